"""The evaluate phase's holdout loss end to end on the reference backend (#45): a run with a holdout measures
step 0 and every checkpoint before the renders (skipped here), on a clip the toy never trained on, and says so in
``holdout-loss.json``, ``holdout_loss.png``, run-summary.md and ``status --json``; ``--holdout-loss off`` skips it.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ltx_pipeline.cli import main
from tests.conftest import H100_SMI
from tests.phases.test_prepare import clip_folder
from tests.phases.train_helpers import reference_args


@pytest.mark.long  # a whole reference run (preprocessing, toy training, measurement): about 40 s on 2 cores
@pytest.mark.timeout(400)
def test_a_run_with_a_holdout_measures_every_checkpoint_on_rows_never_trained_on(workspace, tmp_path, fake_smi,
                                                                               capsys) -> None:
    folder = clip_folder(tmp_path / "clips", 4)
    args = reference_args(workspace, folder, fake_smi(H100_SMI), "--steps", "4", "--rank", "4",
                          "--checkpoint-interval", "2", "--holdout", "1", "--autotune", "off")
    assert main(args) == 0
    run = workspace / "r1"
    rows = json.loads((run / "outputs" / "holdout-loss.json").read_text())
    assert [r["step"] for r in rows] == [0, 2, 4] and rows[0]["checkpoint"] is None
    assert [Path(r["checkpoint"]).name for r in rows[1:]] == ["lora_weights_step_00002.safetensors",
                                                             "lora_weights_step_00004.safetensors"]
    assert all(r["holdout"]["samples"] == 1 and r["train"]["samples"] == 3 for r in rows)
    assert all(r["holdout"]["audio"] is not None for r in rows)  # the clips have sound: audio apart from video
    assert len({r["holdout"]["total"] for r in rows}) == 3
    assert (run / "outputs" / "holdout_loss.png").stat().st_size > 0
    lowest = min(rows, key=lambda r: (r["holdout"]["total"], r["step"]))
    summary = (run / "outputs" / "run-summary.md").read_text()
    assert f"The lowest holdout loss was measured at step {lowest['step']} " in summary
    capsys.readouterr()
    assert main(["status", "--workspace", str(workspace), "--run", "r1", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)["runs"][0]
    assert report["holdout_loss"]["lowest"]["step"] == lowest["step"]
    assert report["holdout_loss"]["checkpoints"] == rows
    [held] = [json.loads(line)["video"] for line in (run / "dataset" / "holdout.jsonl").read_text().splitlines()]
    trained_on = sorted(p.stem for p in (run / "dataset" / ".precomputed" / "latents").rglob("*.pt"))
    assert len(trained_on) == 3 and Path(held).stem not in trained_on
    assert [p.stem for p in (run / "holdout" / ".precomputed" / "latents").rglob("*.pt")] == [Path(held).stem]

    # Off in run.yaml, then resume: evaluate runs again and says why nothing is measured.
    request = run / "run.yaml"
    request.write_text(request.read_text() + "holdout_loss: 'off'\n")
    assert main(["resume", "--workspace", str(workspace), "--run", "r1"]) == 0
    assert "## Holdout loss\n\nNot measured: --holdout-loss off" in (run / "outputs" / "run-summary.md").read_text()
