"""The sweep's memory model is verified against the training: a prediction miss is said and recorded.

Autotune predicts the chosen config's peak (its trial's measurement, or the prior's); after training,
monitor compares it with the trainer's own peak statistic. Beyond ±10 % it is a miss: a warning, a line
in run-summary.md, and an entry in the sweep's Optuna study (``memory_model_misses``).
"""

from __future__ import annotations

import optuna
import pytest

import ltx_pipeline.training.judge as train_judge
from ltx_pipeline.cli import main
from ltx_pipeline.ltx.autotune import prediction_miss
from tests.phases.train_helpers import clips, simulated_args, store_of


def test_prediction_miss_is_relative_and_has_a_tolerance() -> None:
    assert prediction_miss(50.0, 54.0) is None  # +8 %: within ±10 %
    assert prediction_miss(50.0, 60.0) == pytest.approx(0.2)
    assert prediction_miss(50.0, 40.0) == pytest.approx(-0.2)
    assert prediction_miss(None, 40.0) is None and prediction_miss(50.0, None) is None


@pytest.mark.parametrize("factor", [1.0, 1.3])
def test_the_training_peak_is_checked_against_the_prediction_and_a_miss_recorded(workspace, tmp_path, monkeypatch,
                                                                                factor) -> None:
    real = train_judge.log_summary

    def trainer_reports(log, lines=400):  # noqa: ANN001, ANN202 - the trainer's figure, as if measured
        summary = real(log, lines=lines)
        if summary.get("peak_gpu_memory_gb") is not None:
            summary["peak_gpu_memory_gb"] *= factor
        return summary

    monkeypatch.setattr(train_judge, "log_summary", trainer_reports)
    assert main(simulated_args(workspace, clips(tmp_path / "data"), "--steps", "40", "--skip-eval")) == 0
    store, run = store_of(workspace)
    latest = store.latest_phase_runs(run.id)
    verdict = latest["monitor"].outputs["memory_model"]
    assert verdict["predicted_gb"] == pytest.approx(latest["autotune"].outputs["predicted_peak_gb"], abs=0.01)
    study = optuna.load_study(study_name="r1-autotune", storage=f"sqlite:///{workspace / 'optuna.db'}")
    misses = study.user_attrs.get("memory_model_misses") or []
    summary = (workspace / "r1" / "outputs" / "run-summary.md").read_text()
    if factor == 1.0:
        assert verdict["miss"] is False and misses == [] and "within ±10%" in summary
    else:
        assert verdict["miss"] is True and verdict["error"] == pytest.approx(0.3, abs=0.01)
        assert len(misses) == 1 and misses[0]["run"] == "r1" and misses[0]["knobs"] == latest["autotune"].outputs[
            "winner"]
        assert "a miss, recorded in the study r1-autotune" in summary
