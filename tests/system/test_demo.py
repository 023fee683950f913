"""The demo end to end, as a user runs it: a real process, checked through `status --json` and its files."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from ltx_pipeline.ltx.media import read_media_info

ENGINE = [sys.executable, "-c", "from ltx_pipeline.cli import main; main()"]
PHASES = ["probe", "plan", "prepare", "data_check", "config_patch", "validate", "autotune", "train", "monitor",
          "evaluate"]


@pytest.mark.long  # 79 s on 2 cores (2026-12-06): in the opt-in long suite, `-m long`
@pytest.mark.slow
@pytest.mark.timeout(900)
def test_demo_runs_every_phase_with_an_oom_trial_a_winner_checkpoints_and_a_summary(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    done = subprocess.run([*ENGINE, "demo", "--workspace", str(workspace)], capture_output=True, text=True,
                          timeout=900)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "approves its own plan" in done.stdout and "not LTX-2" in done.stdout
    status = subprocess.run([*ENGINE, "status", "--workspace", str(workspace), "--json"], capture_output=True,
                            text=True, timeout=120)
    run = json.loads(status.stdout)["runs"][0]
    assert run["state"] == "finished"
    assert [p["phase"] for p in run["phases"]] == PHASES
    assert all(p["status"] == "succeeded" for p in run["phases"])
    assert run["request"]["backend"] == "reference" and run["request"]["assume_gpu"].startswith("NVIDIA GeForce")
    sweep = run["autotune"]
    assert any(t["outcome"].startswith("oom") for t in sweep["trials"]), sweep["trials"]
    assert sweep["winner"]["quantization"] == "int8-quanto"  # on the 32GB tier, unquantized does not fit
    root = workspace / run["name"]
    checkpoints = sorted(p.name for p in (root / "outputs" / "checkpoints").glob("lora_weights_step_*.safetensors"))
    assert checkpoints == ["lora_weights_step_00030.safetensors", "lora_weights_step_00060.safetensors"]
    samples = sorted((root / "outputs" / "samples").glob("step_*.mp4"))
    assert [p.name for p in samples] == [f"step_{s:06d}_{k}.mp4" for s in (0, 30, 60) for k in (1, 2)]
    for sample in samples:  # real H.264 a player opens, at the bucket's size
        info = read_media_info(sample)
        assert (info.kind, info.width, info.height, info.frames) == ("video", 96, 64, 25), sample.name
    # The loss falls visibly: logged at least every 5 steps, the last tenth a fifth below the first.
    train_log = (root / "logs" / "train.log").read_text()
    assert "Failed to load" not in train_log  # no third-party false alarm (bitsandbytes' optional CPU kernel)
    losses = [float(m) for m in re.findall(r"Step \d+/60 - Loss: ([0-9.]+)", train_log)]
    assert len(losses) >= 12, losses
    tenth = max(1, len(losses) // 10)
    first, last = sum(losses[:tenth]) / tenth, sum(losses[-tenth:]) / tenth
    assert last <= 0.8 * first, (first, last, losses)
    for name in ("plan.md", "config.yaml", "autotune.md", "autotune.png", "outputs/run-summary.md",
                 "outputs/loss.png", "outputs/step_time.png", "outputs/samples/contact-sheet.png",
                 "outputs/eval/prompts.json", "outputs/eval/contact-sheet.png"):
        assert (root / name).is_file(), name
    assert run["training"]["state"] == "finished" and run["training"]["step"] == 60
    # The toy visibly learns, measured on its own mp4s and printed for the user: step-60 samples nearer the
    # nearest training clip than step-0 ones (measured 60.9 -> 32.8, 38.8, 40.7 over three runs; the old toy
    # 55.4 -> 50.5), and the eval renders of different prompts (one seed) apart (measured 20-79 on average; the
    # old toy 3.6).
    figure = re.search(r"samples vs nearest training clip .*: step 0 ([0-9.]+), step 60 ([0-9.]+) \(", done.stdout)
    assert figure, done.stdout[-3000:]
    first, last = float(figure.group(1)), float(figure.group(2))
    assert last < 0.88 * first, (first, last)
    renders = re.search(r"eval renders of different prompts differ by ([0-9.]+) on average", done.stdout)
    assert renders and float(renders.group(1)) > 10.0, done.stdout[-3000:]
    # The checkpoint grid (#45): the last checkpoint and the lowest-holdout one, one row each, labelled.
    grid = json.loads((root / "outputs" / "eval" / "grid.json").read_text())
    steps = [row["step"] for row in grid["rows"]]
    assert 60 in steps and set(steps) <= {30, 60}, steps
    from PIL import Image

    rows = Image.open(root / "outputs" / "eval" / "grid.png").text["Rows"].splitlines()
    assert [line.split(" holdout ")[0] for line in rows] == [f"step {step}" for step in steps], rows
