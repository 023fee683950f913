"""``--eval-checkpoints all`` on the reference backend: the same prompts and seeds rendered at every kept
checkpoint, ``outputs/eval/grid.png`` with one row per checkpoint, and a resume that renders nothing again."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from PIL import Image

from ltx_pipeline.ltx.media import read_frames
from tests.conftest import H100_SMI, REPO
from tests.phases.test_evaluate import ENGINE_NO_AUTOTUNE
from tests.phases.test_prepare import clip_folder


@pytest.mark.long  # a reference run as processes: toy training with two checkpoints, two eval renders
@pytest.mark.slow
@pytest.mark.timeout(400)
def test_eval_checkpoints_all_renders_every_checkpoint_into_one_grid_row_each(workspace, tmp_path, fake_smi) -> None:
    folder = clip_folder(tmp_path / "clips", 8)  # 8 clips: 1 held out, 7 trained on
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    args = ["--workspace", str(workspace), "--run", "r1"]
    done = subprocess.run([*ENGINE_NO_AUTOTUNE, "run", *args, "--dataset", str(folder), "--backend", "reference",
                           "--nvidia-smi", fake_smi(H100_SMI), "--buckets", "64x64x17", "--steps", "4",
                           "--checkpoint-interval", "2", "--rank", "4", "--trigger", "fxclp", "--eval-prompt",
                           "fxclp a lighthouse", "--eval-checkpoints", "all", "--approve"],
                          env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    outputs = workspace / "r1" / "outputs"
    grid = json.loads((outputs / "eval" / "grid.json").read_text())
    assert [row["step"] for row in grid["rows"]] == [2, 4]
    prompts = [p["prompt"] for p in grid["prompts"]]
    listing = json.loads((outputs / "eval" / "prompts.json").read_text())["renders"]
    assert prompts == [r["prompt"] for r in listing]  # the same prompts, in the same order, at each checkpoint
    assert grid["rows"][1]["renders"] == [r["file"] for r in listing]  # the last row is the final weights' renders
    earlier = [Path(f) for f in grid["rows"][0]["renders"]]
    assert all(f.is_relative_to(outputs / "eval" / "checkpoints" / "step_00002") for f in earlier)
    assert all(len(read_frames(f)) == 17 for f in earlier)
    assert any((read_frames(a)[8].astype(int) - read_frames(Path(b))[8]).any()  # other weights, other pictures
               for a, b in zip(earlier, grid["rows"][1]["renders"], strict=True))
    measured = (outputs / "holdout-loss.json").is_file()
    picture = Image.open(outputs / "eval" / "grid.png")
    assert [line.split(" holdout ")[0] for line in picture.text["Rows"].splitlines()] == ["step 2", "step 4"]
    assert all(("holdout" in line) == measured for line in picture.text["Rows"].splitlines())
    assert picture.text["Prompts"].splitlines() == prompts
    assert "`eval/grid.png`" in (outputs / "run-summary.md").read_text()  # the summary points at it
    final = {f: Path(f).stat().st_mtime_ns for f in grid["rows"][1]["renders"]}

    again = subprocess.run([*ENGINE_NO_AUTOTUNE, "run", *args, "--eval-checkpoints", "last", "--approve"], env=env,
                           capture_output=True, text=True, timeout=300)
    assert again.returncode == 0, again.stderr[-3000:]
    grid = json.loads((outputs / "eval" / "grid.json").read_text())
    assert [row["step"] for row in grid["rows"]] == [4]
    assert not (outputs / "eval" / "checkpoints" / "step_00002").exists()  # the folder matches grid.json
    assert len(Image.open(outputs / "eval" / "grid.png").text["Rows"].splitlines()) == 1
    assert {f: Path(f).stat().st_mtime_ns for f in grid["rows"][0]["renders"]} == final  # nothing rendered again
