"""Issue 46, done when: preprocessing with 2 processes under ``accelerate launch`` writes what 1 process writes.

Four clips (two with sound, two silent) on the tiny model, this machine's CPU. Both commands are the ltx
backend's own (``LtxBackend.preprocess_command`` with ``num_processes`` 1 and 2), so the argv under test is the one
the engine starts: ``python scripts/process_dataset.py`` and ``accelerate launch --num_processes 2 --multi_gpu
... trainer_side/cpu_ranks.py scripts/process_dataset.py`` (no GPU here: ranks over gloo). Every file the two
write is compared byte for byte (``torch.save`` of the same tensors and fields gives the same bytes: the
latents are byte-identical, not merely equal). The launcher prefixes each line with its rank (``--tee 3``): rank
0 logs that it took 2 of the 4 rows in each pass, and rank 1 (whose INFO lines the trainer's logger drops)
shows its own 2-of-2 progress for captions and videos; no process encoded all 4 rows.
"""

from __future__ import annotations

import os
import re
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from ltx_pipeline.backends.ltx import LtxBackend
from tests.real_trainer.conftest import THREADS, write_clips
from tests.real_trainer.environment import TrainerEnvironment

pytestmark = pytest.mark.real_trainer


def _preprocess(backend: LtxBackend, dataset: Path, out: Path, model: dict[str, Any], processes: int) -> str:
    """The backend's command run to its end; its output (stdout and stderr, as the engine's log holds them)."""
    spec = backend.preprocess_command(dataset, "64x64x25", out, model_path=model["checkpoint"],
                                      text_encoder_path=model["text_encoder"], trigger="TOK",
                                      num_processes=processes)
    assert ("--num_processes" in spec.argv) == (processes > 1), spec.printable
    done = subprocess.run(list(spec.argv), cwd=spec.cwd, env={**os.environ, **THREADS, **spec.env},
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=900, check=False)
    assert done.returncode == 0, (spec.printable, done.stdout[-4000:])
    return done.stdout


def _files(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def test_two_ranks_write_the_files_one_process_writes(trainer_env: TrainerEnvironment, trainer_root: Path,
                                                       tiny_model: dict[str, Any], tmp_path: Path) -> None:
    dataset = write_clips(tmp_path / "data", 4, audio=[True, True, False, False], frames=32)
    backend = LtxBackend(trainer_root, python=trainer_env.python)
    started = time.monotonic()
    one_log = _preprocess(backend, dataset, tmp_path / "one", tiny_model, 1)
    one_s = time.monotonic() - started
    two_log = _preprocess(backend, dataset, tmp_path / "two", tiny_model, 2)
    print(f"preprocessing 4 clips: 1 process {one_s:.1f} s, 2 processes {time.monotonic() - started - one_s:.1f} s")

    one, two = _files(tmp_path / "one"), _files(tmp_path / "two")
    # 4 conditions, 4 latents, 2 audio latents (the silent clips have none), nothing else (no .tmp leftovers).
    assert sorted({name.split("/")[0] for name in one}) == ["audio_latents", "conditions", "latents"]
    assert len(one) == 10 and two.keys() == one.keys()
    assert [name for name in one if one[name] != two[name]] == []

    assert "Rank 0/1: processing 4 of 4 items" in one_log and "[default" not in one_log
    for script in ("process_captions.py", "process_videos.py"):  # rank 0's own words, once per pass
        assert re.search(rf"^\[default0\]:.*\[rank 0\] Rank 0/2: processing 2 of 4 items .*{script}", two_log, re.M)
    for what in ("captions", "videos"):  # rank 1's progress: its 2 rows of the 4, as rank 0's
        for rank in (0, 1):
            assert re.search(rf"^\[default{rank}\]:\s+Processing {what} .* 2/2 ", two_log, re.M), (rank, what)
    assert "of 4 items" not in two_log.replace("processing 2 of 4 items", "")  # no rank took all 4
