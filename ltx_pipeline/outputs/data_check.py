"""``DataCheckOutputs``: the checked dataset, each stage's latents source and data identity, the models.

Field names are the keys the data_check phase stored before outputs were typed. A model file's
identity (``ltx.data_identity.model_identity``) has keys that depend on its kind; it is stored with
exactly the keys it was made with (``Record``), and so is the whole record (``left_out_silent`` and
``agreed_skips`` are present only when they apply).
"""

from __future__ import annotations

from typing import Any, ClassVar, Literal

from pydantic import SerializerFunctionWrapHandler, model_serializer

from ltx_pipeline.engine.outputs import PhaseOutputs
from ltx_pipeline.ltx.data_check import Check
from ltx_pipeline.outputs._records import Record, as_given

__all__ = ["DataCheckOutputs", "DataStage", "ModelFileIdentities", "ModelIdentity", "ModelPairing", "SanitySet"]


class ModelIdentity(Record):
    """The content identity of a checkpoint or text encoder (``ltx.data_identity.model_identity``)."""

    path: str | None = None
    kind: Literal["safetensors", "file", "folder", "missing"]
    size: int | None = None  # safetensors, file
    header: str | None = None  # safetensors: digest of the header bytes
    head: str | None = None  # file: digest of the first MiB
    config: str | None = None  # folder: digest of config.json (None without one)
    files: tuple[tuple[str, int], ...] | None = None  # folder: names and sizes
    content: str | None = None  # the digest of all but the path

    def plain(self) -> dict[str, Any]:
        """As ``model_identity`` made it, for the ``ltx`` rules that compare identities."""
        return self.model_dump(mode="json")


class ModelFileIdentities(Record):
    """The checkpoint and the text encoder given to preprocessing."""

    model: ModelIdentity
    text_encoder: ModelIdentity

    def plain(self) -> dict[str, Any]:
        return self.model_dump(mode="json")


class ModelPairing(ModelFileIdentities):
    """The two identities and their joint digest: what the text conditions were made with."""

    digest: str


class DataStage(Record):
    """Where one stage's latents come from: the verified existing folder (``reuse``) or a new one."""

    index: int
    buckets: str  # the --resolution-buckets text, e.g. "960x544x49;512x512x49"
    source: Literal["reuse", "preprocess"]
    preprocessed_root: str
    metadata_file: str | None = None  # preprocess only
    data_identity: str | None = None  # absent in an older run's record


class SanitySet(Record):
    """The sanity trial's data: the largest bucket, preprocessed under the run's overfit folder."""

    bucket: str
    preprocessed_root: str


class DataCheckOutputs(PhaseOutputs):
    """What the data_check phase stores."""

    PHASE: ClassVar[str] = "data_check"
    SCHEMA_VERSION: ClassVar[int] = 1

    metadata_file: str | None  # None for a .precomputed folder given as --dataset
    samples: int
    checks: tuple[Check, ...] = ()
    stages: tuple[DataStage, ...]
    sanity: SanitySet
    model_files: ModelFileIdentities | None = None  # absent in an older run's record
    conditions_pairing: ModelPairing | None = None  # absent in an older run's record
    left_out_silent: tuple[str, ...] = ()  # --audio on: the silent clips left out (stored only then)
    agreed_skips: int = 0  # a reused folder's silent samples the trainer skips, as the plan said (stored only then)

    @model_serializer(mode="wrap")
    def _stored(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        return as_given(self, handler(self))

    def stage(self, index: int) -> DataStage:
        """Stage ``index`` (1-based)."""
        return next(s for s in self.stages if s.index == index)
