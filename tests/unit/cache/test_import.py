"""``ltx-pipeline cache import DIR`` (#44): a run's verified ``.precomputed`` keyed as a run keys it, copied in.

A run's preprocessing (the reference toy's scripts, in-process; ``InProcessJournal`` counts the processes it
would start) fills one workspace's folder; importing that folder into a fresh workspace's cache makes a run
there start no preprocessing process and train on the same bytes. The user's folder is only read. A folder
without an identity record is refused whole with the fix; a file whose caption changed after it was encoded,
or whose shapes are wrong, is refused on its own line.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from ltx_pipeline.cli import main
from ltx_pipeline.ltx.buckets import parse_buckets
from ltx_pipeline.ltx.modes import get_mode
from ltx_pipeline.preprocessing.run import IDENTITY_FILE, preprocess
from ltx_pipeline.workspace import RunPaths
from tests.reference_trainer.conftest import PreprocessContext, write_dataset

pytest.importorskip("torch")

BUCKETS = "64x64x17"


@pytest.fixture
def base(tmp_path: Path) -> Path:
    from ltx_pipeline.reference_trainer import make_base

    path = tmp_path / "base.safetensors"
    assert make_base.main([str(path), "--layers", "1", "--text-len", "10", "--text-dim", "16"]) == 0
    return path


def run(workspace: Path, name: str, dataset: Path, base: Path) -> tuple[PreprocessContext, Path]:
    """One run's preprocessing of its full set (stage 1) into its own ``dataset/.precomputed``."""
    ctx = PreprocessContext(workspace=workspace, paths=RunPaths(workspace / name),
                            request=SimpleNamespace(trigger="sks"))
    output = ctx.paths.dataset / ".precomputed"
    preprocess(ctx, mode=get_mode("t2v"), metadata_file=dataset, buckets=parse_buckets(BUCKETS), output_dir=output,
               stage=1, model_path=str(base), text_encoder_path=str(base), extra_flags=[])
    return ctx, output


def files_of(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*.pt"))}


def state_of(root: Path) -> dict[str, Any]:
    """Every file's bytes, mode and mtime: what import must leave as it found it."""
    return {str(p.relative_to(root)): (p.read_bytes(), p.stat().st_mode, p.stat().st_mtime_ns)
            for p in sorted(root.rglob("*")) if p.is_file()}


def cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, list[str], str]:
    code = main(list(args))
    captured = capsys.readouterr()
    return code, captured.out.splitlines(), captured.err.strip()


def test_a_runs_folder_imported_into_a_fresh_workspace_makes_its_run_encode_nothing(
        tmp_path: Path, base: Path, capsys: pytest.CaptureFixture[str]) -> None:
    dataset = write_dataset(tmp_path / "data", [("a.mp4", 17, True), ("b.mp4", 17, False)])
    first, folder = run(tmp_path / "ws1", "a", dataset, base)
    assert first.journal.started == [("preprocess", ["a.mp4", "b.mp4"])]
    before = state_of(folder)
    fresh = tmp_path / "ws2"

    code, lines, err = cli(capsys, "cache", "import", str(folder), "--workspace", str(fresh))
    assert code == 0, err
    assert len(lines) == 6 and all(line.startswith("imported ") for line in lines[:5])
    assert sorted(line.split()[1] for line in lines[:5]) == sorted(files_of(folder))
    root = fresh / "cache" / "latents"
    assert lines[-1] == f"Imported 5 of 5 file(s) from {folder} into {root}; 0 already there, 0 refused."
    assert state_of(folder) == before  # the user's files: read, never moved or changed

    second, output = run(fresh, "b", dataset, base)
    assert second.journal.started == []  # every file came from the imported entries: no preprocessing process
    assert files_of(output) == files_of(folder)
    assert any("5 of 5 file(s) came from the latent cache" in line for line in second.said)

    code, lines, _ = cli(capsys, "cache", "import", str(folder), "--workspace", str(fresh), "--json")
    assert code == 0 and {f["outcome"] for f in json.loads("\n".join(lines))["files"]} == {"present"}


def test_a_folder_without_an_identity_record_is_refused_whole_with_the_fix(
        tmp_path: Path, base: Path, capsys: pytest.CaptureFixture[str]) -> None:
    dataset = write_dataset(tmp_path / "data", [("a.mp4", 17, True)])
    _, folder = run(tmp_path / "ws1", "a", dataset, base)
    mine = tmp_path / "mine" / ".precomputed"
    shutil.copytree(folder, mine, copy_function=shutil.copy)  # a plain copy, as a user makes one
    (mine / IDENTITY_FILE).unlink()
    code, lines, err = cli(capsys, "cache", "import", str(mine), "--workspace", str(tmp_path / "ws2"))
    assert code == 2 and lines == []
    assert err == (f"error: {mine} has no record of what it was made from ({IDENTITY_FILE}) ({mine}). Fix: import "
                   f"only a .precomputed folder ltx-pipeline preprocessed (it holds {IDENTITY_FILE}); for any other, "
                   "run ltx-pipeline over its data once: the run fills the cache.")
    assert not (tmp_path / "ws2" / "cache" / "latents" / "entries").exists()


def test_a_caption_edited_after_encoding_and_a_wrong_shape_are_refused_file_by_file(
        tmp_path: Path, base: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import torch

    dataset = write_dataset(tmp_path / "data", [("a.mp4", 17, True), ("b.mp4", 17, True)])
    _, folder = run(tmp_path / "ws1", "a", dataset, base)
    mine = tmp_path / "mine" / ".precomputed"
    shutil.copytree(folder, mine)  # keeps the files' times, as a careful copy does
    bad = mine / "latents" / "videos" / "b.pt"
    os.chmod(bad, 0o644)
    torch.save({"latents": torch.zeros(128, 1, 1, 1)}, bad)  # written after its clip: only its shape is wrong
    time_of_a = (mine / "conditions" / "videos" / "a.pt").stat().st_mtime_ns
    os.utime(dataset, ns=(time_of_a + 10**9, time_of_a + 10**9))  # the metadata changed after a's caption was encoded
    os.utime(mine / "conditions" / "videos" / "b.pt", ns=(time_of_a + 2 * 10**9,) * 2)  # b's came after it

    code, lines, _ = cli(capsys, "cache", "import", str(mine), "--workspace", str(tmp_path / "ws2"))
    assert code == 2
    assert [line.split(" (")[0] for line in lines[:2]] == ["imported audio_latents/videos/a.pt",
                                                           "imported audio_latents/videos/b.pt"]
    lines = lines[2:]
    assert lines[0] == "refused conditions/videos/a.pt: dataset.jsonl changed after this file was encoded (its " \
                       "caption may differ)"
    assert lines[1].startswith("imported conditions/videos/b.pt (condition-")
    assert lines[2].startswith("imported latents/videos/a.pt (video-")
    assert lines[3] == "refused latents/videos/b.pt: `latents` has shape [128, 1, 1, 1], expected [128, 3, 2, 2] " \
                       "for bucket 64x64x17"
    assert lines[4] == f"Imported 4 of 6 file(s) from {mine} into {tmp_path / 'ws2' / 'cache' / 'latents'}; " \
                       "0 already there, 2 refused."
