"""The toy's split preprocessing (its process_videos and process_captions) adds up to its process_dataset (#44).

A cache fills a run's misses with the narrowest script; that is only sound if the latents one half writes and
the conditions the other writes are, byte for byte and name for name, what one whole preprocessing writes, and
exactly the files ``precomputed_layout`` predicts. Each command is the reference backend's own argv.
"""

from __future__ import annotations

import importlib
from pathlib import Path

from conftest import write_dataset

from ltx_pipeline.backends.reference import ReferenceBackend
from ltx_pipeline.ltx.metadata import read_metadata_rows
from ltx_pipeline.ltx.modes import MODES
from ltx_pipeline.ltx.precomputed_layout import row_outputs

CLIPS = [("a.mp4", 17, True), ("b.mp4", 17, False), ("c.mp4", 25, True)]


def _preprocess(script: str, dataset: Path, base: Path, out: Path) -> None:
    spec = ReferenceBackend().preprocess_command(dataset, "64x64x17", out, model_path=str(base),
                                                 text_encoder_path=str(base.parent), trigger="TOK", script=script)
    assert spec.argv[1] == "-m"
    assert importlib.import_module(spec.argv[2]).main(list(spec.argv[3:])) == 0


def _files(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def test_the_two_halves_write_what_one_whole_preprocessing_writes(tmp_path: Path) -> None:
    from ltx_pipeline.reference_trainer import make_base

    base = tmp_path / "base.safetensors"
    make_base.main([str(base), "--layers", "1", "--text-len", "10", "--text-dim", "16"])
    dataset = write_dataset(tmp_path / "data", CLIPS)
    whole, split = tmp_path / "whole", tmp_path / "split"
    _preprocess("dataset", dataset, base, whole)
    _preprocess("videos", dataset, base, split)
    assert {name.split("/")[0] for name in _files(split)} == {"latents", "audio_latents"}
    _preprocess("captions", dataset, base, split)
    expected = _files(whole)
    assert _files(split) == expected

    rows = read_metadata_rows(dataset)
    sound = {f"videos/{name}": audio for name, _, audio in CLIPS}
    predicted = {output.path for row in rows
                 for output in row_outputs(MODES["t2v"], row, dataset.parent, extract_audio=sound[row["video"]])}
    assert predicted == set(expected) and len(predicted) == 8  # 3 conditions, 3 latents, 2 clips with sound
