"""The held-out rows, preprocessed as the training rows were and never trained on.

Owns where a run's holdout lives (``<run>/holdout/``), which rows it holds and their latents: the holdout file
(the prepare phase's ``holdout.jsonl``, or the user's ``--holdout-file`` for a captioned dataset) less any row
whose clip is also a training row (said, never silently measured), written with absolute media paths to
``holdout.json`` and preprocessed through ``preprocessing.run.preprocess`` (the latent cache where it keys the
rows) with the last stage's buckets, model files and flags into ``<run>/holdout/.precomputed``.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ltx_pipeline.cache.hits import HOLDOUT_STAGE  # the holdout's preprocessing is recorded under it
from ltx_pipeline.holdout.forecast import NO_HOLDOUT_CAPTIONED, NOTHING_HELD_OUT
from ltx_pipeline.ltx.audio_choice import trained_mode
from ltx_pipeline.ltx.buckets import parse_buckets
from ltx_pipeline.ltx.metadata import read_metadata_rows, resolve_media
from ltx_pipeline.ltx.modes import get_mode
from ltx_pipeline.outputs.config_patch import ConfigPatchOutputs
from ltx_pipeline.outputs.data_check import DataCheckOutputs
from ltx_pipeline.outputs.plan import PlanOutputs
from ltx_pipeline.outputs.prepare import PrepareOutputs
from ltx_pipeline.phase_context import LtxContext
from ltx_pipeline.preprocessing.run import preprocess, write_subset_metadata

__all__ = ["HOLDOUT_STAGE", "HeldOut", "holdout_folder", "holdout_rows", "preprocess_rows"]

def holdout_folder(ctx: LtxContext) -> Path:
    return ctx.paths.root / "holdout"


@dataclass(frozen=True)
class HeldOut:
    """The rows to measure (indices into ``file``), or why there are none."""

    file: Path | None
    indices: tuple[int, ...]
    why_none: str | None = None
    overlap: tuple[str, ...] = ()  # held-out clips that are training rows too, left out


def holdout_rows(ctx: LtxContext) -> HeldOut:
    """The held-out rows of the run that no training row shares a clip with."""
    prepared = ctx.has_output("prepare") and ctx.output(PrepareOutputs).prepared
    holdout = ctx.output(PrepareOutputs).holdout_file if prepared else ctx.request.holdout_file
    if not holdout or not Path(holdout).is_file():
        why = NOTHING_HELD_OUT if prepared else NO_HOLDOUT_CAPTIONED  # as plan.md's section says (forecast)
        return HeldOut(None, (), why)
    path = Path(holdout)
    rows = read_metadata_rows(path)
    trained = _training_media(ctx)
    keep: list[int] = []
    overlap: list[str] = []
    for index, row in enumerate(rows):
        media = _media(path.parent, row)
        if media is not None and media in trained:
            overlap.append(str(media))
        else:
            keep.append(index)
    if not keep:
        why = (f"every held-out row's clip is also a training row ({', '.join(overlap[:3])})" if overlap
               else f"{path} holds no rows")
        return HeldOut(path, (), why, tuple(overlap))
    return HeldOut(path, tuple(keep), None, tuple(overlap))


def _media(base: Path, row: dict[str, Any]) -> Path | None:
    value = str(row.get("video") or row.get("media_path") or row.get("audio") or "")
    return resolve_media(base, value).resolve() if value else None


def _training_media(ctx: LtxContext) -> set[Path]:
    """The clips of the checked training metadata (none known for a preprocessed folder given as the dataset)."""
    metadata = ctx.output(DataCheckOutputs).metadata_file
    if not metadata:
        return set()
    path = Path(metadata)
    return {m for row in read_metadata_rows(path) if (m := _media(path.parent, row)) is not None}


def preprocess_rows(ctx: LtxContext, held: HeldOut) -> tuple[Path, dict[str, Any]]:
    """The held-out rows' ``.precomputed`` (made now unless it already matches); its root and the report."""
    assert held.file is not None and held.indices
    data = ctx.output(DataCheckOutputs)
    patch = ctx.output(ConfigPatchOutputs)
    stage = data.stages[-1]
    folder = holdout_folder(ctx)
    metadata, _ = write_subset_metadata(ctx, held.file, len(held.indices), folder / "holdout.json",
                                        indices=held.indices)
    mode = trained_mode(get_mode(ctx.request.mode), ctx.output(PlanOutputs).audio)  # as the stages were
    root = folder / ".precomputed"
    report = preprocess(ctx, mode=mode, metadata_file=metadata, buckets=parse_buckets(stage.buckets), output_dir=root,
                        stage=HOLDOUT_STAGE, model_path=patch.model_path, text_encoder_path=patch.text_encoder_path,
                        extra_flags=[])
    return root, report
