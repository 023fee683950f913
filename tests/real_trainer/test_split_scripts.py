"""The trainer's own process_videos.py and process_captions.py, as the ltx backend starts them, add up to its
process_dataset.py byte for byte (#44): what lets a cache encode only a run's missing latents or conditions.

Two clips, one with sound and one without, on the tiny model, on this machine's CPU: the three commands are
``LtxBackend.preprocess_command`` for ``dataset``, ``videos`` and ``captions``; every file the whole script
writes is written, with the same bytes and under the same name, by the two halves, and is the file
``precomputed_layout`` predicts.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from ltx_pipeline.backends.ltx import LtxBackend
from ltx_pipeline.ltx.modes import MODES
from ltx_pipeline.ltx.precomputed_layout import row_outputs
from tests.real_trainer.conftest import THREADS, write_clips
from tests.real_trainer.environment import TrainerEnvironment

pytestmark = pytest.mark.real_trainer


def _run(backend: LtxBackend, script: str, dataset: Path, out: Path, model: dict[str, Any]) -> None:
    spec = backend.preprocess_command(dataset, "64x64x25", out, model_path=model["checkpoint"],
                                      text_encoder_path=model["text_encoder"], trigger="TOK", script=script)
    done = subprocess.run(list(spec.argv), cwd=spec.cwd, env={**os.environ, **THREADS, **spec.env},
                          capture_output=True, text=True, timeout=900, check=False)
    assert done.returncode == 0, (spec.printable, done.stdout[-3000:] + done.stderr[-3000:])


def _files(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*.pt"))}


def test_the_trainers_two_halves_write_what_process_dataset_writes(trainer_env: TrainerEnvironment,
                                                                   trainer_root: Path, tiny_model: dict[str, Any],
                                                                   tmp_path: Path) -> None:
    dataset = write_clips(tmp_path / "data", 2, audio=[True, False], frames=32)
    backend = LtxBackend(trainer_root, python=trainer_env.python)
    whole, split = tmp_path / "whole", tmp_path / "split"
    _run(backend, "dataset", dataset, whole, tiny_model)
    _run(backend, "videos", dataset, split, tiny_model)
    _run(backend, "captions", dataset, split, tiny_model)
    expected = _files(whole)
    assert _files(split).keys() == expected.keys()
    differ = [name for name, data in _files(split).items() if data != expected[name]]
    assert not differ, differ
    rows = json.loads(dataset.read_text())
    predicted = {o.path for index, row in enumerate(rows)
                 for o in row_outputs(MODES["t2v"], row, dataset.parent, extract_audio=index == 0)}
    assert predicted == set(expected) and len(predicted) == 5  # 2 conditions, 2 latents, 1 clip with sound
