"""``PrepareOutputs``: the dataset the prepare phase staged, split and captioned under the run, or why none.

Field names are the keys the phase stored before outputs were typed. A phase with nothing to do
stored only ``prepared`` and ``reason``; the stored JSON keeps exactly the keys given.
"""

from __future__ import annotations

from typing import Any, ClassVar, Literal

from pydantic import SerializerFunctionWrapHandler, model_serializer

from ltx_pipeline.engine.outputs import PhaseOutputs
from ltx_pipeline.outputs._records import Record, as_given
from ltx_pipeline.outputs.probe import ClipFrames

__all__ = ["CaptionCounts", "PrepareOutputs", "PreparedDataset"]


class CaptionCounts(Record):
    """Captions the captioner wrote, and the user's own kept."""

    written: int
    kept: int


class PreparedDataset(Record):
    """The metadata file the prepared dataset is (what later phases read instead of ``--dataset``)."""

    kind: Literal["metadata"]
    path: str


class PrepareOutputs(PhaseOutputs):
    """What the prepare phase stores."""

    PHASE: ClassVar[str] = "prepare"
    SCHEMA_VERSION: ClassVar[int] = 1

    prepared: bool
    reason: str
    metadata_file: str | None = None
    holdout_file: str | None = None  # None: nothing held out
    holdout_ids: tuple[str, ...] = ()
    samples: int = 0  # training rows (the held-out ones not counted)
    captioner: str = ""
    captions: CaptionCounts | None = None
    dropped_scenes: tuple[str, ...] = ()
    audit: str = ""
    dataset: PreparedDataset | None = None
    clip_frames: ClipFrames = ClipFrames()

    @model_serializer(mode="wrap")
    def _stored(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        return as_given(self, handler(self))  # "nothing to prepare" stored its reason alone
