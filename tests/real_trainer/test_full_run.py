"""Issue 32, done when: every phase from probe to evaluate on the official trainer, and a real SIGKILL + resume.

The tiny random model and real mp4 clips with sound, through the public CLI on ``--backend ltx`` with
``--trainer-python``, planned for an assumed H100 with autotune off (this machine has no GPU to measure).
What is checked is what a user would look at: the real trainer's weights, samples and eval renders decode,
and ``status`` and ``run-summary.md`` report what the real log said.
"""

from __future__ import annotations

import json
import os
import re
import signal
import time
from pathlib import Path
from typing import Any

import psutil
import pytest

from tests.real_trainer.conftest import NO_STEP_ZERO, cli, run_args, write_clips
from tests.real_trainer.environment import TrainerEnvironment
from tests.real_trainer.export_checks import check_export_loads

pytestmark = pytest.mark.real_trainer


def _decode(path: Path) -> tuple[int, bool]:
    """Frames decoded (every one) and whether the file has a sound track, read back with PyAV."""
    import av

    with av.open(str(path)) as container:
        has_audio = bool(container.streams.audio)
        frames = sum(1 for _ in container.decode(video=0))
    return frames, has_audio


def _status(workspace: Path, run: str) -> dict[str, Any]:
    done = cli("status", "--workspace", str(workspace), "--run", run, "--json")
    assert done.returncode == 0, done.stderr
    return dict(json.loads(done.stdout)["runs"][0])


def test_every_phase_finishes_on_the_real_trainer(trainer_env: TrainerEnvironment, trainer_root: Path,
                                                  tiny_model: dict[str, Any], tmp_path: Path) -> None:
    dataset = write_clips(tmp_path / "data", 4)
    workspace = tmp_path / "ws"
    done = cli(*run_args(workspace, trainer_env, trainer_root, tiny_model, dataset, "--run", "r1", "--steps", "8",
                         "--checkpoint-interval", "4", "--validation-interval", "4", "--approve"))
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    assert "Traceback" not in done.stdout + done.stderr
    run = workspace / "r1"
    outputs = run / "outputs"
    assert sorted(p.name for p in (outputs / "checkpoints").glob("lora_weights_step_*.safetensors")) == [
        "lora_weights_step_00004.safetensors", "lora_weights_step_00008.safetensors"]
    samples = sorted((outputs / "samples").glob("*.mp4"))
    assert {re.match(r"step_(\d+)_", p.name).group(1) for p in samples} == {"000000", "000004", "000008"}  # type: ignore[union-attr]
    for sample in samples:
        frames, has_audio = _decode(sample)
        assert frames == 25 and has_audio, sample  # validation at the 64x64x25 bucket, t2v generates sound
    renders = sorted((outputs / "eval").rglob("*.mp4"))
    assert len(renders) == 6  # 3 training captions + 3 generic prompts; nothing held out from captioned data
    assert all(_decode(render)[0] > 0 for render in renders)

    report = _status(workspace, "r1")
    assert report["state"] == "finished"
    assert [p["status"] for p in report["phases"]] == ["succeeded"] * 10
    log = (run / "logs" / "train.log").read_text(encoding="utf-8", errors="replace")
    speed = re.search(r"Training speed: ([\d.]+) steps/second", log)
    assert speed, "the real trainer's closing statistics"
    summary = (outputs / "run-summary.md").read_text(encoding="utf-8")
    assert "lora_weights_step_00008.safetensors" in summary
    assert f"{float(speed.group(1)):.2f} steps/s" in summary  # the trainer's own figure, as it said it
    assert "no GPU" in summary  # a CPU run's "Peak GPU memory: 0.00 GB" is not reported as a measurement
    training = report["training"]
    assert training["step"] == 8 and training["total"] == 8  # from the real log's checkpoint lines, the plan
    check_export_loads(workspace, "r1", trainer_env, tmp_path / "export")  # #45: the export loads in the trainer


def _trainer_process(config: Path) -> psutil.Process | None:
    """The trainer itself (``python scripts/train.py CONFIG``): not the engine's supervisor, whose command line
    quotes it after ``--``, nor its DataLoader workers, forked with the same command line."""
    matches = {}
    for process in psutil.process_iter(["cmdline", "ppid"]):
        cmdline = process.info.get("cmdline") or []
        if len(cmdline) > 2 and cmdline[1].endswith("train.py") and cmdline[2] == str(config):
            matches[process.pid] = process
    roots = [p for p in matches.values() if p.info["ppid"] not in matches]
    return roots[0] if roots else None


def test_a_folder_of_clips_detached_killed_after_a_checkpoint_resumes_with_the_trainers_own_resume(
        trainer_env: TrainerEnvironment, trainer_root: Path, tiny_model: dict[str, Any], tmp_path: Path) -> None:
    clips = write_clips(tmp_path / "footage", 4, metadata=False)
    workspace = tmp_path / "ws"
    done = cli(*run_args(workspace, trainer_env, trainer_root, tiny_model, clips, "--run", "r2", "--steps", "16",
                         "--checkpoint-interval", "4", "--validation-interval", "16", "--captioner", "offline",
                         "--skip-eval", "--approve", "--detach", *NO_STEP_ZERO))
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    run = workspace / "r2"
    staged = json.loads((run / "dataset" / "dataset.json").read_text())
    assert len(staged) == 4 and all(row["caption"] for row in staged)  # prepare staged and captioned every clip
    state = run / "outputs" / "checkpoints" / "training_state_step_00004.pt"
    try:
        deadline = time.monotonic() + 1200
        while not state.exists() and time.monotonic() < deadline:
            time.sleep(0.2)
        assert state.exists(), (run / "logs" / "train.log").read_text(errors="replace")[-3000:]
        trainer = _trainer_process(run / "config.yaml")
        assert trainer is not None, "the detached trainer is running"
        os.kill(trainer.pid, signal.SIGKILL)
        trainer.wait(timeout=30)
    finally:  # a failed wait must not leave a detached trainer eating the cores of the tests after this one
        for _ in range(5):
            left = _trainer_process(run / "config.yaml")
            if left is None:
                break
            left.kill()
            left.wait(timeout=30)

    done = cli("resume", "--workspace", str(workspace), "--run", "r2")
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    # The relaunch logs to train.attempt-2.log beside the first attempt's train.log.
    log = "".join(path.read_text(encoding="utf-8", errors="replace")
                  for path in sorted((run / "logs").glob("train*.log")))
    resumed = re.search(r"Resuming training from step (\d+)", log)
    assert resumed and int(resumed.group(1)) >= 4, log[-3000:]
    assert (run / "outputs" / "checkpoints" / "lora_weights_step_00016.safetensors").is_file()
    assert _status(workspace, "r2")["state"] == "finished"
