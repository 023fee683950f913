"""Issue 12, done when: ordinary mp4 files, no ffmpeg or ffprobe anywhere, from probe to resumed samples.

A dataset of real H.264 clips with sound made with PyAV (three sizes, 24 and 30 fps, one too short for the
bucket, one truncated) is refused with exit 2 naming the broken file and its row; once that file is
removed the data check names the short clip, the reference backend trains, its trainer is SIGKILLed
after a checkpoint and ``resume`` continues from that checkpoint's step (its own log, the
load_checkpoint patch recorded and validated), and the validation samples are mp4s PyAV reads back at
the validation size and frame count. (This is also the killed-trainer test of test_training_faults.)
"""

from __future__ import annotations

import json
import os
import shutil
import signal
from pathlib import Path

import pytest
import yaml

from ltx_pipeline.cli import main
from ltx_pipeline.ltx.media import read_media_info
from ltx_pipeline.ltx.sample_clips import write_clip
from tests.conftest import H100_SMI
from tests.phases.train_helpers import (
    drive_until_validate,
    patch_config,
    reference_args,
    resume,
    store_of,
    training_registered,  # noqa: F401 - fixture
)
from tests.system.test_training_faults import wait_for

CLIPS = (  # name, width, height, fps, frames
    ("wide.mp4", 96, 64, 24.0, 25),
    ("tall.mp4", 64, 96, 30.0, 25),
    ("square.mp4", 64, 64, 30.0, 21),
    ("short.mp4", 64, 64, 24.0, 9),
    ("broken.mp4", 64, 64, 24.0, 25),
)


@pytest.fixture
def no_ffmpeg_on_path(monkeypatch: pytest.MonkeyPatch) -> None:
    """PATH without any folder holding ffmpeg or ffprobe: only Python and pip's wheels are left."""
    folders = [f for f in os.environ.get("PATH", "").split(os.pathsep)
               if f and not any((Path(f) / name).exists() for name in ("ffmpeg", "ffprobe"))]
    monkeypatch.setenv("PATH", os.pathsep.join(folders))
    assert shutil.which("ffmpeg") is None and shutil.which("ffprobe") is None
    monkeypatch.setenv("LTX_REFERENCE_LOG_EVERY", "1")
    monkeypatch.setenv("LTX_REFERENCE_DEVICE", "cpu")


def write_dataset(root: Path) -> Path:
    rows = []
    for index, (name, width, height, fps, frames) in enumerate(CLIPS):
        write_clip(root / "videos" / name, frames, height, width, colour="red", fps=fps, audio=True,
                   phase=index / 5)
        rows.append({"caption": f"a red square, clip {index}", "video": f"videos/{name}"})
    broken = root / "videos" / "broken.mp4"
    broken.write_bytes(broken.read_bytes()[: broken.stat().st_size // 3])  # cut off mid-file
    dataset = root / "dataset.json"
    dataset.write_text(json.dumps(rows))
    return dataset


@pytest.mark.long  # 22 s on 2 cores (2026-12-06): in the opt-in long suite, `-m long`
@pytest.mark.slow  # a CPU training of the toy model, killed and resumed
@pytest.mark.usefixtures("no_ffmpeg_on_path", "training_registered")
def test_real_mp4s_go_from_probe_to_resumed_training_and_readable_samples(workspace, tmp_path, fake_smi,
                                                                         monkeypatch, capsys) -> None:
    dataset = write_dataset(tmp_path / "data")
    args = reference_args(workspace, dataset, fake_smi(H100_SMI), "--steps", "12", "--rank", "4")

    assert main(args) == 2
    err = capsys.readouterr().err
    assert "row 5:" in err and "broken.mp4" in err and "Traceback" not in err
    assert not (workspace / "r1" / "config.yaml").exists()  # refused before the plan

    (tmp_path / "data" / "videos" / "broken.mp4").unlink()
    dataset.write_text(json.dumps([row for row in json.loads(dataset.read_text())
                                   if row["video"] != "videos/broken.mp4"]))
    assert drive_until_validate(monkeypatch, args) == 0
    store, run = store_of(workspace)
    checks = store.latest_phase_runs(run.id)["data_check"].outputs["checks"]
    [short] = [c for c in checks if c["code"] == "short-clip"]
    assert "short.mp4 (9 frames)" in short["message"] and "broken" not in short["message"]

    config = workspace / "r1" / "config.yaml"
    patch_config(config, checkpoints__interval=4, validation__interval=6)
    assert resume(workspace, "--detach") == 0
    [first] = store.processes(run.id, "train")
    checkpoints = workspace / "r1" / "outputs" / "checkpoints"
    wait_for(lambda: (checkpoints / "training_state_step_00004.pt").is_file(), timeout=120)
    os.killpg(first.pid, signal.SIGKILL)
    from ltx_pipeline.checkpoints.discovery import latest_pair

    killed_at = latest_pair(checkpoints).step
    assert 4 <= killed_at < 12
    assert resume(workspace) == 0, capsys.readouterr().err
    assert [p.status for p in store.processes(run.id, "train")] == ["crashed", "exited"]
    first_log = (workspace / "r1" / "logs" / "train.log").read_text()
    second = (workspace / "r1" / "logs" / "train.attempt-2.log").read_text()  # each attempt keeps its own log
    assert "=== ltx-pipeline: launch 1" in first_log and "launch 2" not in first_log and "Step 4/12" in first_log
    assert second.startswith("=== ltx-pipeline: launch 2")
    assert f"Resuming training from step {killed_at}" in second  # the trainer's own step counter
    assert f"Step {killed_at + 1}/12" in second and "Step 1/12" not in second
    assert f"model.load_checkpoint None -> {checkpoints}/lora_weights_step_{killed_at:05d}.safetensors" in \
        "\n".join(e.message for e in store.events(run.id))
    assert (workspace / "r1" / "outputs" / "run-summary.md").is_file()
    # The relaunch ran the config with resume's load_checkpoint patch in it, validated after that patch.
    from ltx_pipeline.engine.journal import config_sha256

    processes = store.processes(run.id, "train")
    assert processes[-1].config_sha256 == config_sha256(config)
    assert processes[0].config_sha256 != processes[-1].config_sha256

    # The preprocessing left the short clip out and said why, in the real script's words.
    assert "short.mp4 - has 9 frames, which is less than the minimum required frames (17)" in \
        (workspace / "r1" / "logs" / "preprocess.log").read_text()
    width, height, frames = yaml.safe_load(config.read_text())["validation"]["video_dims"]
    samples = sorted((workspace / "r1" / "outputs" / "samples").glob("step_*.mp4"))
    assert {path.name.split("_")[1] for path in samples} >= {"000006", "000012"}
    for sample in samples:
        info = read_media_info(sample)
        assert (info.kind, info.width, info.height, info.frames) == ("video", width, height, frames), sample
