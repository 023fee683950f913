"""The prepare phase on real mp4s (PyAV): a folder of clips, one long video, metadata with captions missing.

Driven through the real CLI in-process on the reference backend (the offline captioner: measured facts
of each clip, deterministic). Each test checks what a user depends on: the two gates, the user's
files untouched, only missing captions written, scenes split at the cuts, nothing captioned twice.
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from ltx_pipeline.cli import main
from ltx_pipeline.ltx.media import read_media_info, write_video
from ltx_pipeline.ltx.sample_clips import write_clip
from tests.conftest import H100_SMI
from tests.phases.train_helpers import reference_args, store_of, training_registered  # noqa: F401

BACKGROUNDS = ("blue", "green", "black", "white", "purple", "yellow")


def clip_folder(root: Path, n: int, frames: int = 17) -> Path:
    """``n`` real clips (a red square on a changing background), no metadata: what most users start from."""
    for index in range(n):
        write_clip(root / f"shot{index:02d}.mp4", frames, 64, 64, colour="red",
                   background=BACKGROUNDS[index % len(BACKGROUNDS)], audio=True, phase=index / 7)
    return root


def tree_digest(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file()}


def scenes_video(path: Path, seconds: float = 40.0, cuts: int = 4, fps: int = 24) -> Path:
    """One video of ``cuts + 1`` scenes (hard cuts between unlike colours, motion inside each scene)."""
    colours = [(220, 30, 30), (30, 190, 60), (40, 70, 220), (230, 210, 40), (240, 240, 240), (140, 50, 180)]
    total = int(seconds * fps)
    frames = np.zeros((total, 48, 64, 3), dtype=np.uint8)
    per = total // (cuts + 1)
    for index in range(total):
        scene = min(index // per, cuts)
        frames[index] = colours[scene]
        x = (index % per) * 40 // per
        frames[index, 16:32, x:x + 16] = (20, 20, 20)
    rate = 8000
    tone = np.sin(np.arange(int(seconds * rate), dtype=np.float32) * (2 * np.pi * 440 / rate)) * 0.3
    write_video(path, frames, fps=fps, audio=tone[None, :].astype(np.float32), sample_rate=rate)
    return path


def approve(workspace: Path) -> int:
    return main(["approve", "--workspace", str(workspace), "--run", "r1"])


def resume(workspace: Path) -> int:
    return main(["resume", "--workspace", str(workspace), "--run", "r1"])


@pytest.mark.long  # 17 s on 2 cores (2026-12-06): in the opt-in long suite, `-m long`
@pytest.mark.slow  # a full reference run (toy training on the CPU)
@pytest.mark.usefixtures("training_registered")
def test_folder_of_clips_goes_through_both_gates_to_a_finished_run(workspace, tmp_path, fake_smi, capsys) -> None:
    folder = clip_folder(tmp_path / "clips", 12)
    before = tree_digest(folder)
    args = [a for a in reference_args(workspace, folder, fake_smi(H100_SMI), "--steps", "4", "--rank", "4",
                                      "--trigger", "fxclp") if a != "--approve"]
    assert main(args) == 3  # the plan gate
    plan = (workspace / "r1" / "plan.md").read_text()
    assert "## Data preparation" in plan and "caption 12 clip(s) with offline" in plan and "hold out 1 of 12" in plan
    assert not (workspace / "r1" / "dataset").exists()  # nothing heavy before approval
    assert approve(workspace) == 0
    capsys.readouterr()
    assert resume(workspace) == 3  # the captions gate
    out = capsys.readouterr().out
    shown = [line for line in out.splitlines() if "]   [media/" in line]
    assert len(shown) == 3 and all("second clip" in line for line in shown), out
    assert "captions approval gate" in out
    rows = json.loads((workspace / "r1" / "dataset" / "dataset.json").read_text())
    held = [json.loads(line) for line in (workspace / "r1" / "dataset" / "holdout.jsonl").read_text().splitlines()]
    assert len(rows) == 11 and len(held) == 1 and not {r["video"] for r in rows} & {h["video"] for h in held}
    assert all("fxclp" not in r["caption"] and "red" in r["caption"] for r in rows)
    assert approve(workspace) == 0
    assert "Approved captions" in capsys.readouterr().out
    assert resume(workspace) == 0
    store, run = store_of(workspace)
    assert store.get_run("r1").state == "finished"
    data_check = store.latest_phase_runs(run.id)["data_check"].outputs
    assert data_check["metadata_file"] == str(workspace / "r1" / "dataset" / "dataset.json")
    assert data_check["samples"] == 11
    summary = (workspace / "r1" / "outputs" / "run-summary.md").read_text()
    assert "Prepared into" in summary and "12 written, 0 kept); held out 1 in" in summary
    assert tree_digest(folder) == before  # the user's folder, byte for byte
    assert (workspace / "r1" / "dataset" / "media" / "shot00.mp4").is_symlink()


@pytest.fixture
def up_to_prepare(monkeypatch):
    """Only probe, plan and prepare: what these tests look at, without a training."""
    import phases

    monkeypatch.setattr(phases, "PHASES", tuple(p for p in phases.PHASES if p.name in ("probe", "plan", "prepare")))


@pytest.mark.usefixtures("training_registered", "up_to_prepare")
def test_approved_captions_stand_and_hand_edits_are_kept_and_asked_again(workspace, tmp_path, fake_smi,
                                                                           capsys) -> None:
    folder = clip_folder(tmp_path / "clips", 4)
    args = [a for a in reference_args(workspace, folder, fake_smi(H100_SMI), "--steps", "2") if a != "--approve"]
    assert main(args) == 3
    assert approve(workspace) == 0 and resume(workspace) == 3
    assert approve(workspace) == 0
    capsys.readouterr()
    assert resume(workspace) == 0
    assert "prepare unchanged, skipping" in capsys.readouterr().out  # its own files are no change
    assert main(["status", "--workspace", str(workspace), "--run", "r1"]) == 0
    assert "captions sha256:" in capsys.readouterr().out

    metadata = workspace / "r1" / "dataset" / "dataset.json"
    rows = json.loads(metadata.read_text())
    rows[0]["caption"] = "my own words"
    metadata.write_text(json.dumps(rows, indent=1))
    edited = metadata.read_bytes()
    assert resume(workspace) == 3  # the edit changed the hash: asked again, the edit kept
    out = capsys.readouterr().out
    assert "captions edited" in out and "Captioning" not in out and "my own words" in out
    assert metadata.read_bytes() == edited
    assert approve(workspace) == 0
    capsys.readouterr()
    assert resume(workspace) == 0
    assert "prepare unchanged, skipping" in capsys.readouterr().out


@pytest.mark.usefixtures("training_registered", "up_to_prepare")
def test_a_holdout_of_every_sample_is_refused_with_one_line(workspace, tmp_path, fake_smi, capsys) -> None:
    folder = clip_folder(tmp_path / "clips", 3)
    before = tree_digest(folder)
    assert main(reference_args(workspace, folder, fake_smi(H100_SMI), "--holdout", "3")) == 2
    errors = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert len(errors) == 1 and "--holdout 3 leaves nothing to train on" in errors[0], errors
    assert tree_digest(folder) == before and not (workspace / "r1" / "dataset").exists()


@pytest.mark.usefixtures("training_registered", "up_to_prepare")
def test_a_long_video_with_no_scene_as_long_as_the_bucket_fails_with_one_line(workspace, tmp_path, fake_smi,
                                                                             capsys) -> None:
    video = scenes_video(tmp_path / "short.mp4", seconds=3.0, cuts=2)  # three 24-frame scenes
    args = reference_args(workspace, video, fake_smi(H100_SMI), "--buckets", "64x32x49")
    assert main(args) == 2
    errors = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert len(errors) == 1 and "shorter than 49 frames" in errors[0] and "--buckets" in errors[0], errors


@pytest.mark.usefixtures("training_registered", "up_to_prepare")
@pytest.mark.parametrize("missing", [(2, 5, 7), (0, 1, 3, 4, 6, 8, 9)], ids=["3-missing", "7-missing"])
def test_metadata_with_captions_missing_captions_only_those(workspace, tmp_path, fake_smi, missing) -> None:
    clip_folder(tmp_path / "data" / "videos", 10)
    rows = [{"caption": "" if i in missing else f"user caption {i}", "video": f"videos/shot{i:02d}.mp4"}
            for i in range(10)]
    dataset = tmp_path / "data" / "dataset.json"
    dataset.write_text(json.dumps(rows))
    before = tree_digest(tmp_path / "data")
    args = reference_args(workspace, dataset, fake_smi(H100_SMI), "--steps", "2", "--holdout", "0")
    assert main([a for a in args if a != "--approve"]) == 3
    plan = (workspace / "r1" / "plan.md").read_text()
    assert f"{len(missing)} of 10 rows have no caption" in plan and f"keep {10 - len(missing)} caption(s)" in plan
    assert approve(workspace) == 0 and resume(workspace) == 3
    store, run = store_of(workspace)
    prepared = store.latest_phase_runs(run.id)["prepare"].outputs
    assert prepared["captions"] == {"written": len(missing), "kept": 10 - len(missing)}
    written = json.loads((workspace / "r1" / "dataset" / "dataset.json").read_text())
    by_clip = {Path(r["video"]).name: r["caption"] for r in written}
    assert {name: c for name, c in by_clip.items() if c.startswith("user caption")} == {
        f"shot{i:02d}.mp4": f"user caption {i}" for i in range(10) if i not in missing}
    assert all("second clip" in by_clip[f"shot{i:02d}.mp4"] for i in missing)
    assert tree_digest(tmp_path / "data") == before


@pytest.mark.long  # splits a 40-second video and trains on its scenes: 21 s on a busy 2-core box (2026-12-07)
@pytest.mark.usefixtures("training_registered")
def test_one_long_video_of_5_scenes_is_split_into_5_clips_and_trained_on(workspace, tmp_path, fake_smi) -> None:
    video = scenes_video(tmp_path / "long.mp4")
    args = reference_args(workspace, video, fake_smi(H100_SMI), "--steps", "2", "--rank", "4", "--buckets",
                          "64x32x17")
    assert main(args) == 0
    store, run = store_of(workspace)
    prepared = store.latest_phase_runs(run.id)["prepare"].outputs
    scenes = sorted((workspace / "r1" / "dataset" / "scenes").glob("*.mp4"))
    assert len(scenes) == 5, scenes
    assert sum(read_media_info(s).frames for s in scenes) == 960
    assert prepared["samples"] + len(prepared["holdout_ids"]) == 5
    assert store.get_run("r1").state == "finished"


@pytest.mark.long  # 17.9 s per run on a 2-core box (2026-12-07): the default suite stays under 6 min
@pytest.mark.slow  # the engine as a process, killed while it captions
def test_engine_killed_while_captioning_then_resume_captions_nothing_twice(workspace, tmp_path, fake_smi) -> None:
    folder = clip_folder(tmp_path / "clips", 24, frames=49)
    smi = fake_smi(H100_SMI)
    base = [sys.executable, "-c", "from ltx_pipeline.cli import main; main()"]
    args = ["--workspace", str(workspace), "--run", "r1"]
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    first = subprocess.run([*base, "run", *args, "--dataset", str(folder), "--backend", "reference", "--nvidia-smi",
                            smi, "--buckets", "64x64x17", "--steps", "2"], env=env, capture_output=True, timeout=120)
    assert first.returncode == 3, first.stderr
    assert subprocess.run([*base, "approve", *args], env=env, timeout=60).returncode == 0
    progress = workspace / "r1" / "dataset" / "captions.json"
    engine = subprocess.Popen([*base, "resume", *args], env=env, stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL, start_new_session=True)
    deadline = time.monotonic() + 120
    at_kill = 0
    while time.monotonic() < deadline and engine.poll() is None:
        try:
            at_kill = len(json.loads(progress.read_text()))
        except (OSError, ValueError):
            at_kill = 0
        if at_kill >= 3:
            os.killpg(engine.pid, signal.SIGKILL)
            break
        time.sleep(0.01)
    engine.wait(timeout=30)
    assert 3 <= at_kill < 24, f"not caught mid-captioning ({at_kill} captions)"
    before = {r["media_path"]: r["caption"] for r in json.loads(progress.read_text())}
    second = subprocess.run([*base, "resume", *args], env=env, capture_output=True, text=True, timeout=300)
    assert second.returncode == 3, second.stderr
    done = store_of(workspace)
    prepared = done[0].latest_phase_runs(done[1].id)["prepare"].outputs
    assert prepared["captions"]["written"] == 24 - len(before)  # the rest only
    assert f"Captioning {24 - len(before)} clip(s)" in second.stdout
    after = {r["media_path"]: r["caption"] for r in json.loads(progress.read_text())}
    assert {k: after[k] for k in before} == before and len(after) == 24


@pytest.mark.usefixtures("training_registered", "up_to_prepare")
def test_your_holdout_file_stays_out_of_training_when_the_captions_are_prepared_again(workspace, tmp_path,
                                                                                     fake_smi, capsys) -> None:
    folder = clip_folder(tmp_path / "clips", 4)
    holdout = tmp_path / "held.json"
    holdout.write_text(json.dumps([{"caption": "a held-out clip", "video": "clips/shot01.mp4"}]))
    args = [a for a in reference_args(workspace, folder, fake_smi(H100_SMI), "--steps", "2", "--holdout-file",
                                      str(holdout)) if a != "--approve"]
    assert main(args) == 3
    assert approve(workspace) == 0 and resume(workspace) == 3
    metadata = workspace / "r1" / "dataset" / "dataset.json"

    def trained() -> set[str]:
        return {Path(r["video"]).name for r in json.loads(metadata.read_text())}

    assert trained() == {"shot00.mp4", "shot02.mp4", "shot03.mp4"}
    rows = json.loads(metadata.read_text())
    rows[0]["caption"] = "my own words"  # a hand edit: the prepare phase runs again over the same split
    metadata.write_text(json.dumps(rows, indent=1))
    capsys.readouterr()
    assert resume(workspace) == 3
    assert trained() == {"shot00.mp4", "shot02.mp4", "shot03.mp4"}  # shot01 is still held out
    store, run = store_of(workspace)
    assert store.latest_phase_runs(run.id)["prepare"].outputs["samples"] == 3
