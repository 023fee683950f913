"""Issue #45, done when: ``compare`` on two runs with different learning rates names the learning-rate patch and
prints both runs' figures, each the figure the run recorded (the store's outputs and metrics), never recomputed.

One shared workspace (``tests/compare_workspace.py``: two reference-backend runs, 1e-2 and 5e-3) serves every
assertion, and the command's start-up is checked to import neither torch nor optuna.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ltx_pipeline.cli import main
from tests.cli.test_startup_imports import imported
from tests.compare_workspace import compare_workspace  # noqa: F401 - fixture

pytestmark = pytest.mark.long  # the shared two-run workspace: about 60-80 s of CPU once per session


def _recorded(workspace: Path, name: str) -> dict[str, object]:
    """What the store holds for ``name``: its final step, samples used and last logged loss, read directly."""
    from ltx_pipeline.store import Store

    store = Store.open(workspace / "ltx-pipeline.db")
    run = store.get_run(name)
    latest = store.latest_phase_runs(run.id)
    stage = latest["train"].outputs["stages"][-1]
    monitored = latest["monitor"].outputs["stages"][-1]
    losses = [(m.step, m.loss) for m in store.metrics(run.id, stage["stage"]) if m.loss is not None]
    return {"steps": stage["final_step"], "samples": monitored["samples_used"]["used"], "loss": losses[-1],
            "step_time": monitored["step_time_s"]}


def test_compare_names_the_learning_rate_patch_and_prints_both_runs_figures(
        compare_workspace: Path, capsys: pytest.CaptureFixture[str],  # noqa: F811
        monkeypatch: pytest.MonkeyPatch) -> None:
    from ltx_pipeline.cli.console import out

    # A console as wide as a desktop terminal: at 80 cells (an xdist worker's) the tables fold their cells.
    monkeypatch.setattr(out, "width", 200)
    workspace = compare_workspace
    assert main(["compare", "r1", "r2", "--workspace", str(workspace)]) == 0
    text = capsys.readouterr().out
    row = next(line for line in text.splitlines() if "optimization.learning_rate" in line)
    assert "0.01 (config_patch: plan: stage 1 learning rate)" in row
    assert "0.005 (config_patch: plan: stage 1 learning rate)" in row
    assert "Config differences: 1 of " in text  # only the learning rate differs; run folders differ by name only
    first, second = _recorded(workspace, "r1"), _recorded(workspace, "r2")
    loss_row = next(line for line in text.splitlines() if "final train loss" in line)
    for recorded in (first, second):
        step, loss = recorded["loss"]
        assert f"{loss:.4g} (step {step})" in loss_row
    assert first["loss"] != second["loss"]  # the figures are each run's own
    samples_row = next(line for line in text.splitlines() if "samples trained on" in line)
    assert samples_row.count(f"{first['samples']} of ") == 2

    assert main(["compare", "r1", "r2", "--workspace", str(workspace), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["differences"] == {"patches": ["optimization.learning_rate"], "request": ["learning_rate"]}
    for run, recorded in zip(data["runs"], (first, second), strict=True):
        assert run["steps"]["value"] == recorded["steps"]
        assert run["samples_trained_on"]["value"] == recorded["samples"]
        assert [run["final_train_loss"]["step"], run["final_train_loss"]["value"]] == list(recorded["loss"])
        assert run["seconds_per_step"]["value"] == recorded["step_time"]
        # A figure the run lacks is null with why: the toy writes no holdout-loss.json for a captioned dataset.
        assert run["lowest_holdout_loss"]["value"] is None and "holdout" in run["lowest_holdout_loss"]["why"]
    assert {r["prompt"] for r in data["renders"]} >= {"a red square on a white background"}
    assert all(all(row["files"].values()) for row in data["renders"])  # both runs rendered every prompt


def test_compare_starts_without_torch_or_optuna(compare_workspace: Path) -> None:  # noqa: F811
    chains = imported(["compare", "r1", "r2", "--workspace", str(compare_workspace)])
    heavy = sorted(name for name in chains if name.split(".")[0] in ("torch", "optuna", "starlette", "jinja2"))
    assert heavy == [], [f"{name} via {' > '.join(chains[name])}" for name in heavy[:3]]
