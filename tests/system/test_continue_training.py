"""Issue 33, case 3: a finished run with ``--steps`` raised continues from its final weights.

A reference-backend run on real mp4 clips (autotune on, trials cut short) trains S steps and
finishes; ``run --run R --steps 2S`` then trains exactly S more steps as a warm-started stage: its
config loads the finished stage's final weights with ``no_resume`` (the trainer starts at step 0 of
a fresh schedule over S steps), the sweep is read back from the study and no trial runs again, and
the first learning rates of the continuation are the planned schedule's, the same as the first
stage's (not the old schedule's tail, which the trainer's restored scheduler would give).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import ltx_pipeline.autotune.trial_runner as trial_runner
from ltx_pipeline.autotune._trial import TrialSettings
from ltx_pipeline.cli import main
from tests.conftest import H100_SMI
from tests.phases.train_helpers import mp4_clips, reference_args, store_of

S = 4  # optimizer steps of the first training
_STEP = re.compile(r"Step (\d+)/(\d+) - Loss: [\d.]+, LR: ([\d.e+-]+)")


def _steps(log: Path) -> list[tuple[int, int, float]]:
    return [(int(a), int(b), float(c)) for a, b, c in _STEP.findall(log.read_text(encoding="utf-8"))]


def _optuna_trials(workspace: Path) -> int:
    import optuna

    storage = f"sqlite:///{workspace / 'optuna.db'}"
    return sum(len(optuna.load_study(study_name=s.study_name, storage=storage).trials)
               for s in optuna.get_all_study_summaries(storage))


@pytest.mark.long  # 34 s on 2 cores (2026-12-06): in the opt-in long suite, `-m long`
@pytest.mark.slow  # preprocessing, two short trials and two CPU trainings of the toy model
def test_raising_steps_on_a_finished_run_trains_only_the_extra_steps_from_the_final_weights(
        workspace, tmp_path, fake_smi, monkeypatch, capsys) -> None:
    monkeypatch.setenv("LTX_REFERENCE_LOG_EVERY", "1")
    monkeypatch.setenv("LTX_REFERENCE_DEVICE", "cpu")
    monkeypatch.setattr(trial_runner, "trial_settings",
                        lambda backend: TrialSettings(steps=4, env={"LTX_REFERENCE_LOG_EVERY": "1"}))
    dataset = mp4_clips(tmp_path / "data", n=2)
    args = reference_args(workspace, dataset, fake_smi(H100_SMI), "--rank", "4", "--checkpoint-interval", "2",
                          "--validation-interval", "100")
    assert main([*args, "--steps", str(S)]) == 0, capsys.readouterr().err
    store, run = store_of(workspace)
    first = store.latest_phase_runs(run.id)["train"].outputs["stages"]
    assert [s["final_step"] for s in first] == [S]
    final = Path(first[0]["final_checkpoint"])
    trials = len(store.processes(run.id, "trial"))
    assert trials >= 1 and _optuna_trials(workspace) >= trials
    optuna_before = _optuna_trials(workspace)
    capsys.readouterr()

    assert main([*args, "--steps", str(2 * S)]) == 0, capsys.readouterr().err
    out = capsys.readouterr().out
    assert f"continuing from step {S} to {2 * S}" in out
    # No autotune trial ran: the sweep's inputs do not include the step count.
    assert len(store.processes(run.id, "trial")) == trials
    assert _optuna_trials(workspace) == optuna_before
    # The finished stage was not trained again; the continuation is its own stage of S steps.
    launches = store.processes(run.id, "train")
    assert [p.stage for p in launches] == [1, 2]
    stages = store.latest_phase_runs(run.id)["train"].outputs["stages"]
    assert [s["final_step"] for s in stages] == [S, S]
    continued = Path(stages[1]["output_dir"])
    assert Path(stages[1]["final_checkpoint"]).parent == continued / "checkpoints" and final.is_file()
    # It started from the finished stage's final weights, at step 0 of a fresh schedule.
    config = Path(stages[1]["config"]).read_text(encoding="utf-8")
    assert f"load_checkpoint: {final}" in config and "no_resume: true" in config
    log = Path(launches[1].log_path)
    text = log.read_text(encoding="utf-8")
    assert f"Loading checkpoint from {final}" in text and "Resuming training from step" not in text
    first_steps, extra = _steps(Path(launches[0].log_path)), _steps(log)
    assert [(s, t) for s, t, _ in extra] == [(k, S) for k in range(1, S + 1)]  # only the S extra steps
    # Its learning rate follows the planned schedule from the start: the first training's, step for step.
    assert [lr for _, _, lr in extra] == [lr for _, _, lr in first_steps]
    summary = (workspace / "r1" / "outputs" / "run-summary.md").read_text(encoding="utf-8")
    assert f"ltx-pipeline run --workspace {workspace} --run r1 --steps {4 * S}" in summary

    # Steps at or under what has trained are refused in one line, before anything changes.
    assert main([*args, "--steps", str(S)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"trained {2 * S} steps" in err[0] and "Traceback" not in err[0]
