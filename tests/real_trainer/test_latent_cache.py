"""Issue 44, done when: latents are paid once across a workspace's runs, on the official trainer.

Four runs in one workspace through the public CLI on ``--backend ltx`` with the tiny model (real mp4 clips
with sound, this machine's CPU): run A trains 8 steps on 4 clips; run B, another learning rate on the same
data, starts ``train.py`` without a single preprocessing process; run C, one caption edited, runs
``process_captions.py`` for that one row and encodes no video; run D, one clip added, encodes that clip only.
What each run trains on is compared, byte for byte, with a fresh ``process_dataset.py`` of the same rows.
Processes are counted from the store's own records (every child the engine starts is recorded before it
runs), so a process the engine started and the test did not expect cannot hide.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
from pathlib import Path
from typing import Any

import pytest

from ltx_pipeline.backends.ltx import LtxBackend
from tests.real_trainer.conftest import NO_STEP_ZERO, THREADS, cli, run_args, write_clips
from tests.real_trainer.environment import TrainerEnvironment

pytestmark = pytest.mark.real_trainer


def _processes(workspace: Path, run: str) -> list[tuple[str, list[str]]]:
    """(kind, argv) of every child process the engine recorded for ``run``, in start order."""
    with sqlite3.connect(workspace / "ltx-pipeline.db") as db:
        rows = db.execute("SELECT p.kind, p.argv FROM processes p JOIN runs r ON r.id = p.run_id "
                          "WHERE r.name = ? ORDER BY p.id", (run,)).fetchall()
    return [(kind, json.loads(argv)) for kind, argv in rows]


def _scripts(processes: list[tuple[str, list[str]]]) -> list[tuple[str, list[str]]]:
    """Each preprocessing process: the trainer's script it ran and the clips of the metadata it was given."""
    started = []
    for kind, argv in processes:
        if kind != "preprocess":
            continue
        script = next(Path(a).name for a in argv if a.endswith(".py"))
        metadata = Path(next(a for a in argv if a.endswith((".json", ".jsonl", ".csv"))))
        rows = json.loads(metadata.read_text()) if metadata.suffix == ".json" else \
            [json.loads(line) for line in metadata.read_text().splitlines() if line.strip()]
        started.append((script, sorted(Path(str(r.get("video") or r.get("media_path"))).name for r in rows)))
    return started


def _trained_on(workspace: Path, run: str) -> dict[str, bytes]:
    root = workspace / run / "dataset" / ".precomputed"
    files = {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*.pt"))}
    assert files, f"{run} trained on nothing under {root}"
    return files


def _fresh(backend: LtxBackend, dataset: Path, out: Path, model: dict[str, Any]) -> dict[str, bytes]:
    """What ``process_dataset.py`` writes today for ``dataset``'s rows, with no cache anywhere."""
    spec = backend.preprocess_command(dataset, "64x64x25", out, model_path=model["checkpoint"],
                                      text_encoder_path=model["text_encoder"], trigger=None)
    done = subprocess.run(list(spec.argv), cwd=spec.cwd, env={**os.environ, **THREADS, **spec.env},
                          capture_output=True, text=True, timeout=900, check=False)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return {p.relative_to(out).as_posix(): p.read_bytes() for p in sorted(out.rglob("*.pt"))}


def _run(workspace: Path, args: list[str], run: str, *extra: str) -> None:
    done = cli(*args, "--run", run, *extra)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    assert "Traceback" not in done.stdout + done.stderr


def test_runs_over_one_dataset_encode_each_clip_and_caption_once(trainer_env: TrainerEnvironment,
                                                                 trainer_root: Path, tiny_model: dict[str, Any],
                                                                 tmp_path: Path) -> None:
    dataset = write_clips(tmp_path / "data", 4)
    workspace = tmp_path / "ws"
    args = run_args(workspace, trainer_env, trainer_root, tiny_model, dataset, "--skip-eval", "--approve",
                    "--validation-interval", "100", *NO_STEP_ZERO)
    backend = LtxBackend(trainer_root, python=trainer_env.python)
    fresh_first = _fresh(backend, dataset, tmp_path / "fresh-a", tiny_model)

    # A: the first run pays for every clip and caption, in one process.
    _run(workspace, args, "a", "--steps", "8", "--checkpoint-interval", "8")
    clips = sorted(Path(str(r["video"])).name for r in json.loads(dataset.read_text()))
    assert _scripts(_processes(workspace, "a")) == [("process_dataset.py", clips)]
    assert (workspace / "a" / "outputs" / "checkpoints" / "lora_weights_step_00008.safetensors").is_file()
    assert _trained_on(workspace, "a") == fresh_first

    # B: another learning rate; the trainer starts and nothing is encoded.
    _run(workspace, args, "b", "--steps", "2", "--checkpoint-interval", "2", "--learning-rate", "5e-5")
    started = _processes(workspace, "b")
    assert _scripts(started) == []
    assert [kind for kind, _ in started].count("train") == 1
    train_argv = next(argv for kind, argv in started if kind == "train")
    assert any(Path(a).name == "train.py" for a in train_argv), train_argv
    assert _trained_on(workspace, "b") == fresh_first

    # C: one caption edited; only its conditions are encoded, by process_captions.py, and no video.
    rows = json.loads(dataset.read_text())
    rows[1]["caption"] = "a slow square drifts over a plain background at dusk"
    dataset.write_text(json.dumps(rows, indent=2))
    _run(workspace, args, "c", "--steps", "2", "--checkpoint-interval", "2")
    assert _scripts(_processes(workspace, "c")) == [("process_captions.py", [Path(rows[1]["video"]).name])]
    trained_c = _trained_on(workspace, "c")  # compared below with the fresh preprocessing of D's rows

    # D: one clip added; that clip alone is encoded (its latents, sound and caption).
    from ltx_pipeline.ltx.sample_clips import write_clip

    write_clip(dataset.parent / "clips" / "added.mp4", 48, 64, 64, colour="red", background="blue", fps=24.0,
               audio=True, phase=0.5)
    rows.append({"caption": "a red square slides across a blue background", "video": "clips/added.mp4"})
    dataset.write_text(json.dumps(rows, indent=2))
    _run(workspace, args, "d", "--steps", "2", "--checkpoint-interval", "2")
    assert _scripts(_processes(workspace, "d")) == [("process_dataset.py", ["added.mp4"])]
    fresh_last = _fresh(backend, dataset, tmp_path / "fresh-d", tiny_model)
    assert _trained_on(workspace, "d") == fresh_last
    # C's rows are D's less the added clip: each row's files depend on that row alone (D's own check above
    # shows it: one clip encoded apart equals the fresh run of all), so one fresh run serves both.
    assert set(trained_c) == set(fresh_first)
    assert trained_c == {name: fresh_last[name] for name in trained_c}
    edited = [name for name in trained_c if trained_c[name] != fresh_first[name]]
    assert len(edited) == 1 and edited[0].startswith("conditions/"), edited  # the edit changes one caption's file
