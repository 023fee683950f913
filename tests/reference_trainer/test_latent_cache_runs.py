"""Issue 44: a run's ``.precomputed`` is assembled from the workspace's latent cache; only misses are encoded.

The step is driven with a stand-in run context whose journal runs the reference trainer's scripts
in-process (as tests/unit/test_data_identity.py does) and records each process it would start: which
script, and the rows of the metadata it was given. Run A fills the cache; run B (another run, same data
and settings) starts no preprocessing process and trains on the same bytes; run C with one caption edited
runs only ``process_captions`` for that row; run D with one clip added encodes only that clip. C's and D's
files are byte for byte what a fresh whole preprocessing of their data writes.
"""

from __future__ import annotations

import io
import json
from contextlib import redirect_stdout
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from ltx_pipeline.env_names import LATENT_CACHE_ENV
from ltx_pipeline.ltx.buckets import parse_buckets
from ltx_pipeline.ltx.modes import get_mode
from ltx_pipeline.preprocessing.run import IDENTITY_FILE, preprocess
from ltx_pipeline.workspace import RunPaths
from tests.reference_trainer.conftest import PreprocessContext, write_dataset

pytest.importorskip("torch")

BUCKETS = "64x64x17"


def _Ctx(**given: Any) -> PreprocessContext:
    return PreprocessContext(request=SimpleNamespace(trigger="sks"), **given)


@pytest.fixture
def base(tmp_path: Path) -> Path:
    from ltx_pipeline.reference_trainer import make_base

    path = tmp_path / "base.safetensors"
    assert make_base.main([str(path), "--layers", "1", "--text-len", "10", "--text-dim", "16"]) == 0
    return path


def run(workspace: Path, name: str, dataset: Path, base: Path) -> tuple[_Ctx, Path, dict[str, Any]]:
    """One run's preprocessing of the full set (stage 1) into its own ``dataset/.precomputed``."""
    ctx = _Ctx(workspace=workspace, paths=RunPaths(workspace / name))
    output = ctx.paths.dataset / ".precomputed"
    result = preprocess(ctx, mode=get_mode("t2v"), metadata_file=dataset, buckets=parse_buckets(BUCKETS),
                        output_dir=output, stage=1, model_path=str(base), text_encoder_path=str(base), extra_flags=[])
    return ctx, output, result


def files_of(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*"))
            if p.is_file() and p.name != IDENTITY_FILE}


def fresh(dataset: Path, base: Path, out: Path) -> dict[str, bytes]:
    """What the toy's whole ``process_dataset`` writes for ``dataset`` (the run's trigger), no cache."""
    from ltx_pipeline.reference_trainer import preprocess as toy

    with redirect_stdout(io.StringIO()):
        assert toy.main([str(dataset), "--model-path", str(base), "--text-encoder-path", str(base),
                         "--resolution-buckets", BUCKETS, "--output-dir", str(out), "--lora-trigger", "sks"]) == 0
    return files_of(out)


def edit_caption(dataset: Path, index: int, caption: str) -> None:
    rows = [json.loads(line) for line in dataset.read_text().splitlines()]
    rows[index]["caption"] = caption
    dataset.write_text("".join(json.dumps(row) + "\n" for row in rows))


def test_runs_over_the_same_data_encode_each_file_once(tmp_path: Path, base: Path) -> None:
    dataset = write_dataset(tmp_path / "data", [("a.mp4", 17, True), ("b.mp4", 17, False), ("c.mp4", 17, True)])
    workspace = tmp_path / "ws"

    a_ctx, a_out, a_result = run(workspace, "a", dataset, base)
    assert a_ctx.journal.started == [("preprocess", ["a.mp4", "b.mp4", "c.mp4"])]  # all new: one whole script
    assert a_result["counts"]["latents"] == 3 and not a_result["reused"]
    a_files = files_of(a_out)
    assert sorted(a_files) == ["audio_latents/videos/a.pt", "audio_latents/videos/c.pt", "conditions/videos/a.pt",
                               "conditions/videos/b.pt", "conditions/videos/c.pt", "latents/videos/a.pt",
                               "latents/videos/b.pt", "latents/videos/c.pt"]
    assert a_files == fresh(dataset, base, tmp_path / "fresh-a")

    b_ctx, b_out, b_result = run(workspace, "b", dataset, base)  # e.g. another learning rate: same data
    assert b_ctx.journal.started == []  # no preprocessing process at all
    assert files_of(b_out) == a_files and b_result["counts"] == a_result["counts"]
    assert (b_out / "latents/videos/a.pt").stat().st_ino == (a_out / "latents/videos/a.pt").stat().st_ino
    assert json.loads((b_out / IDENTITY_FILE).read_text()) == json.loads((a_out / IDENTITY_FILE).read_text())
    assert any("8 of 8 file(s) came from the latent cache" in line for line in b_ctx.said)

    edit_caption(dataset, 1, "a red square, edited")
    c_ctx, c_out, _ = run(workspace, "c", dataset, base)
    assert c_ctx.journal.started == [("process_captions", ["b.mp4"])]  # that caption only, no video encoding
    c_files = files_of(c_out)
    assert c_files["conditions/videos/b.pt"] != a_files["conditions/videos/b.pt"]
    assert {k: v for k, v in c_files.items() if k != "conditions/videos/b.pt"} == \
        {k: v for k, v in a_files.items() if k != "conditions/videos/b.pt"}
    assert c_files == fresh(dataset, base, tmp_path / "fresh-c")

    write_dataset(tmp_path / "more", [("d.mp4", 17, True)], colour="green")
    (tmp_path / "data" / "videos" / "d.mp4").write_bytes((tmp_path / "more" / "videos" / "d.mp4").read_bytes())
    dataset.write_text(dataset.read_text() + json.dumps({"caption": "a green square", "video": "videos/d.mp4"}) + "\n")
    d_ctx, d_out, d_result = run(workspace, "d", dataset, base)
    assert d_ctx.journal.started == [("preprocess", ["d.mp4"])]  # only the added clip is encoded
    assert d_result["counts"]["latents"] == 4 and files_of(d_out) == fresh(dataset, base, tmp_path / "fresh-d")


def test_a_clip_too_short_for_every_bucket_is_narrated_and_never_makes_a_rerun_encode(tmp_path: Path,
                                                                                      base: Path) -> None:
    dataset = write_dataset(tmp_path / "data", [("a.mp4", 17, True), ("short.mp4", 9, True)])
    workspace = tmp_path / "ws"
    first, _, _ = run(workspace, "a", dataset, base)
    assert first.journal.started == [("preprocess", ["a.mp4", "short.mp4"])]  # a script runs: it says why itself
    assert "short.mp4 - has 9 frames, which is less than the minimum" in first.paths.logs.joinpath(
        "preprocess.log").read_text()
    second, out, result = run(workspace, "b", dataset, base)
    assert second.journal.started == [] and result["samples"] == 1
    assert sorted(files_of(out)) == ["audio_latents/videos/a.pt", "conditions/videos/a.pt", "latents/videos/a.pt"]
    assert any("left out 1 clip(s) shorter than the smallest bucket" in line and "short.mp4 (9 frames" in line
               for line in second.said)


def test_a_team_path_holds_the_cache_and_off_preprocesses_whole(tmp_path: Path, base: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    dataset = write_dataset(tmp_path / "data", [("a.mp4", 17, True)])
    team = tmp_path / "team-cache"
    monkeypatch.setenv(LATENT_CACHE_ENV, str(team))
    run(tmp_path / "ws1", "a", dataset, base)
    other, _, _ = run(tmp_path / "ws2", "a", dataset, base)  # another workspace, the same team cache
    assert other.journal.started == [] and (team / "entries").is_dir()
    assert not (tmp_path / "ws1" / "cache" / "latents").exists()

    monkeypatch.setenv(LATENT_CACHE_ENV, "off")
    off, out, _ = run(tmp_path / "ws2", "b", dataset, base)
    assert off.journal.started == [("preprocess", ["a.mp4"])] and (out / "latents/videos/a.pt").stat().st_nlink == 1


def test_linking_an_entry_again_over_its_own_link_leaves_no_temporary_file(tmp_path: Path) -> None:
    from ltx_pipeline.cache import link_entry

    source = tmp_path / "entry.pt"
    source.write_bytes(b"latents")
    dest = tmp_path / "run" / "latents" / "a.pt"
    link_entry(source, dest)
    link_entry(source, dest)  # rename() over a hard link to the same file does nothing: the temp name stays
    assert sorted(p.name for p in dest.parent.iterdir()) == ["a.pt"] and dest.read_bytes() == b"latents"


def test_a_key_another_run_is_making_is_waited_for_not_encoded_twice(tmp_path: Path, base: Path) -> None:
    import threading
    import time

    from ltx_pipeline.cache import Modality
    from ltx_pipeline.ltx.modes import get_mode as mode_of
    from ltx_pipeline.preprocessing.cache_plan import plan_stage
    from ltx_pipeline.preprocessing.run import model_files

    dataset = write_dataset(tmp_path / "data", [("a.mp4", 17, True), ("b.mp4", 17, True)])
    made = fresh(dataset, base, tmp_path / "fresh")
    workspace = tmp_path / "ws"
    ctx = _Ctx(workspace=workspace, paths=RunPaths(workspace / "r"))
    plan = plan_stage(ctx, mode=mode_of("t2v"), metadata_file=dataset, buckets=parse_buckets(BUCKETS),
                      files=model_files(workspace, str(base), str(base)), extra_flags=[])
    assert plan is not None
    b_condition = next(want.key for want in plan.wants()
                       if want.key.modality is Modality.CONDITION and want.name == "videos/b.pt")
    held, done = threading.Event(), threading.Event()

    def other_run() -> None:  # holds b's conditions until this run has run its scripts, then makes them
        with plan.store.claim(b_condition) as claim:
            held.set()
            while len(ctx.journal.started) < 2:
                time.sleep(0.01)
            time.sleep(0.5)  # this run is past its scripts by now: it must wait, not link a missing file
            (tmp_path / "made.pt").write_bytes(made["conditions/videos/b.pt"])
            claim.put(tmp_path / "made.pt")
        done.set()

    thread = threading.Thread(target=other_run)
    thread.start()
    assert held.wait(10)
    output = ctx.paths.dataset / ".precomputed"
    preprocess(ctx, mode=get_mode("t2v"), metadata_file=dataset, buckets=parse_buckets(BUCKETS), output_dir=output,
               stage=1, model_path=str(base), text_encoder_path=str(base), extra_flags=[])
    thread.join(10)
    assert done.is_set()
    assert ctx.journal.started == [("preprocess", ["a.mp4"]), ("process_videos", ["b.mp4"])]  # b's caption: waited
    assert files_of(output) == made


def test_rows_with_one_caption_share_its_conditions_entry(tmp_path: Path, base: Path) -> None:
    dataset = write_dataset(tmp_path / "data", [("a.mp4", 17, True), ("b.mp4", 17, True)])
    edit_caption(dataset, 0, "the same words")
    edit_caption(dataset, 1, "the same words")
    first, out, _ = run(tmp_path / "ws", "a", dataset, base)
    assert first.journal.started == [("preprocess", ["a.mp4", "b.mp4"])]
    assert files_of(out) == fresh(dataset, base, tmp_path / "fresh")
    assert (out / "conditions/videos/a.pt").stat().st_ino == (out / "conditions/videos/b.pt").stat().st_ino
    second, _, _ = run(tmp_path / "ws", "b", dataset, base)
    assert second.journal.started == []


def test_a_corrupted_entry_is_quarantined_and_made_again_never_trained_on(tmp_path: Path, base: Path) -> None:
    dataset = write_dataset(tmp_path / "data", [("a.mp4", 17, True), ("c.mp4", 17, True)])
    workspace = tmp_path / "ws"
    _, a_out, _ = run(workspace, "a", dataset, base)
    entry = next(p for p in (workspace / "cache" / "latents" / "entries").rglob("*")
                 if p.is_file() and p.stat().st_ino == (a_out / "latents/videos/c.pt").stat().st_ino)
    entry.chmod(0o644)  # a bit flipped on disk: the entry's bytes are no longer the ones it was made with
    data = bytearray(entry.read_bytes())
    data[len(data) // 2] ^= 0xFF
    entry.write_bytes(bytes(data))

    b_ctx, b_out, _ = run(workspace, "b", dataset, base)
    assert b_ctx.journal.started == [("process_videos", ["c.mp4"])]  # that file alone is made again
    assert files_of(b_out) == fresh(dataset, base, tmp_path / "fresh")  # never the corrupted bytes
    assert any("Latent cache:" in line and "quarantin" in line for line in b_ctx.said), b_ctx.said
    assert list((workspace / "cache" / "latents" / "quarantine").iterdir())
