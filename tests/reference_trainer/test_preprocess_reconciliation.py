"""Issue 12: a preprocessing that exits 0 but writes fewer samples than rows fails with the reconciliation.

The reference preprocessing prints the real script's skip lines (``Skipping video at ... - has N
frames ...``, ``Failed to read video at ...: ...``); the step reads them back from its log and names
every left-out file with its reason. Clips too short for every bucket (named by the data check before
approval) are narrated, not failed; anything else left out, or nothing written, is a failure.
"""

from __future__ import annotations

import io
from contextlib import redirect_stdout
from pathlib import Path

import pytest
from conftest import write_dataset

from ltx_pipeline.errors import RunFailed
from ltx_pipeline.ltx.buckets import parse_buckets
from ltx_pipeline.ltx.modes import MODES
from ltx_pipeline.ltx.precomputed import inspect_precomputed
from ltx_pipeline.preprocessing import run as step

BUCKETS = "64x64x17"


class Narrator:
    def __init__(self) -> None:
        self.lines: list[str] = []

    def narrate(self, line: str) -> None:
        self.lines.append(line)


@pytest.fixture()
def base(tmp_path: Path) -> Path:
    from ltx_pipeline.reference_trainer import make_base

    path = tmp_path / "base.safetensors"
    make_base.main([str(path), "--layers", "1", "--text-len", "10", "--text-dim", "16"])
    return path


def preprocess_and_reconcile(dataset: Path, base: Path, log: Path, ctx: Narrator) -> None:
    from ltx_pipeline.reference_trainer import preprocess

    log.write_text("an earlier run's line: Failed to read video at videos/a.mp4: old news\n")
    offset = log.stat().st_size
    out = io.StringIO()
    with redirect_stdout(out):
        assert preprocess.main([str(dataset), "--model-path", str(base), "--text-encoder-path", str(base.parent),
                                "--resolution-buckets", BUCKETS]) == 0
    with log.open("a") as handle:
        handle.write(out.getvalue())
    mode, buckets = MODES["t2v"], tuple(parse_buckets(BUCKETS))
    media = step._primary_media(dataset, mode)
    report = inspect_precomputed(dataset.parent / ".precomputed", mode, list(buckets), load=step._load,
                                 metadata_media=media, metadata_dir=dataset.parent)
    step._reconcile_written(ctx, report, media, dataset.parent, mode, buckets, step._skipped_in(log, offset), log)


def test_an_unreadable_clip_fails_with_expected_written_and_the_reason(tmp_path: Path, base: Path) -> None:
    dataset = write_dataset(tmp_path / "data", [("a.mp4", 17, False), ("b.mp4", 17, False), ("c.mp4", 17, False)])
    broken = tmp_path / "data" / "videos" / "b.mp4"
    broken.write_bytes(broken.read_bytes()[:300])
    with pytest.raises(RunFailed) as raised:
        preprocess_and_reconcile(dataset, base, tmp_path / "preprocess.log", Narrator())
    message = str(raised.value)
    assert "exited 0 but wrote 2 of 3 sample(s)" in message
    assert "b.mp4 (unreadable video:" in message
    assert "a.mp4" not in message.split("left out:")[1]  # the earlier run's line is not this run's


def test_nothing_written_fails_and_names_every_clip(tmp_path: Path, base: Path) -> None:
    dataset = write_dataset(tmp_path / "data", [("a.mp4", 9, False), ("b.mp4", 9, False)])
    with pytest.raises(RunFailed) as raised:
        preprocess_and_reconcile(dataset, base, tmp_path / "preprocess.log", Narrator())
    message = str(raised.value)
    assert "wrote 0 of 2 sample(s)" in message
    assert "a.mp4 (9 frames, fewer than the smallest bucket's 17)" in message and "b.mp4 (9 frames" in message


def test_clips_too_short_for_the_bucket_are_narrated_not_failed(tmp_path: Path, base: Path) -> None:
    dataset = write_dataset(tmp_path / "data", [("a.mp4", 17, False), ("short.mp4", 9, False)])
    ctx = Narrator()
    preprocess_and_reconcile(dataset, base, tmp_path / "preprocess.log", ctx)
    assert ctx.lines == ["Preprocessing left out 1 clip(s) shorter than the smallest bucket (17 frames), as the "
                         "data check said: short.mp4 (9 frames, fewer than the smallest bucket's 17)"]


def test_a_too_short_clip_is_said_once_with_its_reason_and_no_fix_that_would_not_work(tmp_path: Path,
                                                                                       base: Path) -> None:
    """The whole step (``preprocess``): the clip the data check named as too short is narrated with the log's
    reason; no ``dropped-clip`` warning repeats it for each folder with "re-run the same preprocessing" (a re-run
    writes nothing more for it); and a warning names its severity once (not "warning: warning [...]")."""
    from conftest import PreprocessContext

    from ltx_pipeline.ltx.audio_choice import trained_mode
    from ltx_pipeline.workspace import RunPaths

    dataset = write_dataset(tmp_path / "data", [("a.mp4", 17, False), ("short.mp4", 9, False)])
    workspace = tmp_path / "ws"
    ctx = PreprocessContext(workspace=workspace, paths=RunPaths(workspace / "r1"))
    video_only = trained_mode(MODES["t2v"], {"trains": "video"})  # the clips are silent
    summary = step.preprocess(ctx, mode=video_only, metadata_file=dataset, buckets=tuple(parse_buckets(BUCKETS)),
                              output_dir=ctx.paths.dataset / ".precomputed", stage=1, model_path=str(base),
                              text_encoder_path=str(base), pairing=None, extra_flags=["--skip-audio"])
    assert summary["samples"] == 1
    about_short = [line for line in ctx.said if "short.mp4" in line]
    assert about_short == ["Preprocessing left out 1 clip(s) shorter than the smallest bucket (17 frames), as the "
                           "data check said: short.mp4 (9 frames, fewer than the smallest bucket's 17)"], ctx.said
    assert not any(line.startswith("warning") for line in ctx.said)
