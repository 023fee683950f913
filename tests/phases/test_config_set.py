"""``run --set KEY=VALUE``: the user's own trainer-config values, patched after the plan's, recorded with their
reason, listed in plan.md's config table and kept in run.yaml; a later ``--set`` adds to them and re-plans.
The simulated backend, up to validate (config_patch is what patches)."""

from __future__ import annotations

from pathlib import Path

import pytest

from ltx_pipeline.cli import main
from ltx_pipeline.ltx.user_settings import REASON
from ltx_pipeline.yaml_io import load_yaml
from tests.phases.train_helpers import clips, simulated_args, store_of


def _patches(workspace: Path) -> dict[str, tuple[object, str]]:
    store, row = store_of(workspace)
    [config] = store.latest_phase_runs(row.id)["config_patch"].outputs["configs"]
    return {p["path"]: (p["new"], p["reason"]) for p in config["patches"]}


@pytest.mark.usefixtures("until_validate")
def test_set_values_reach_the_config_last_and_a_later_set_adds_to_them(
        workspace: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    dataset = clips(tmp_path / "data", n=1)
    args = simulated_args(workspace, dataset, "--steps", "20", "--set", "validation.inference_steps=5",
                          "--set", "validation.video_dims=[64, 64, 9]", "--set", "optimization.max_grad_norm=0.25")
    assert main(args) == 0, capsys.readouterr().err
    run = workspace / "r1"
    config = load_yaml((run / "config.yaml").read_text()) or {}
    assert config["validation"]["inference_steps"] == 5
    assert config["validation"]["video_dims"] == [64, 64, 9]  # over the plan's "largest training bucket"
    assert config["optimization"]["max_grad_norm"] == 0.25
    patches = _patches(workspace)
    assert patches["validation.inference_steps"] == (5, REASON)
    assert patches["validation.video_dims"] == ([64, 64, 9], REASON)
    plan = (run / "plan.md").read_text()
    assert "| validation.inference_steps (your --set, applied last) | 5 |" in plan
    assert "| validation.video_dims (your --set, applied last) | [64, 64, 9] |" in plan
    assert (load_yaml((run / "run.yaml").read_text()) or {})["config_set"] == {
        "validation.inference_steps": 5, "validation.video_dims": [64, 64, 9], "optimization.max_grad_norm": 0.25}

    capsys.readouterr()
    assert main(simulated_args(workspace, dataset, "--steps", "20", "--set", "validation.inference_steps=7",
                               "--set", "seed=3")) == 0, capsys.readouterr().err
    out = capsys.readouterr().out
    assert "[plan]" in out  # another request: planned again, and approved again (--approve)
    config = load_yaml((run / "config.yaml").read_text()) or {}
    assert (config["validation"]["inference_steps"], config["seed"], config["optimization"]["max_grad_norm"]) == \
        (7, 3, 0.25)


def test_a_run_owned_key_is_refused_before_anything_is_written(workspace: Path, tmp_path: Path,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    dataset = clips(tmp_path / "data", n=1)
    assert main(simulated_args(workspace, dataset, "--set", "optimization.learning_rate=1e-3")) == 2
    [line] = capsys.readouterr().err.strip().splitlines()
    assert line == "error: optimization.learning_rate is set by the run itself (--set). Fix: use --learning-rate."
    assert not (workspace / "r1").exists() and not (workspace / "ltx-pipeline.db").exists()
