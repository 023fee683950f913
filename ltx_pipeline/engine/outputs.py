"""``PhaseOutputs``: the base of every phase's typed, versioned outputs.

A phase returns one frozen pydantic model; the store keeps it as JSON together with its schema
version (``phase_runs.outputs_version``), and a consumer reads it back as the same typed object
(``ctx.output(PlanOutputs)``), never as dict keys. The concrete models live in
``ltx_pipeline.outputs``, where their producer and every consumer may import them; the engine knows
only this base and stays free of LTX rules.

Versioning: ``SCHEMA_VERSION`` is bumped whenever a stored shape changes; ``upgrade`` brings data
written at an older version (0: before outputs were typed) to the current shape, so a store from
before a change still loads.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar, TypeVar

from pydantic import BaseModel, ConfigDict, ValidationError
from typing_extensions import Self

from ltx_pipeline.errors import BadInput

__all__ = ["PhaseOutputs", "StoredOutputs"]

OutputsT = TypeVar("OutputsT", bound="PhaseOutputs")


class PhaseOutputs(BaseModel):
    """What one phase produced: frozen, validated, stored as JSON with its schema version."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    PHASE: ClassVar[str]  # the phase that produces it, as named in the store
    SCHEMA_VERSION: ClassVar[int] = 1

    @classmethod
    def upgrade(cls, data: dict[str, Any], version: int) -> dict[str, Any]:
        """``data`` as stored at ``version``, brought to ``SCHEMA_VERSION``'s shape.

        Version 0 is what phases stored as plain dicts before outputs were typed; a model whose
        fields kept those names and meanings needs no change, so the default returns it as is.
        """
        return data

    @classmethod
    def from_stored(cls, data: Mapping[str, Any], version: int) -> Self:
        """The typed outputs from the store's JSON and the version it was written at.

        Raises:
            BadInput: the store holds outputs a newer ltx-pipeline wrote, or data this version cannot read.
        """
        if version > cls.SCHEMA_VERSION:
            raise BadInput(f"The stored {cls.PHASE} outputs have schema version {version}; this ltx-pipeline "
                           f"reads up to {cls.SCHEMA_VERSION}", where=f"phase {cls.PHASE}",
                           fix="upgrade ltx-pipeline (`pip install -U ltx-pipeline`) to read this run")
        try:
            return cls.model_validate(cls.upgrade(dict(data), version))
        except ValidationError as exc:
            first = exc.errors()[0]
            field = ".".join(str(p) for p in first["loc"]) or "(outputs)"
            raise BadInput(f"The stored {cls.PHASE} outputs (schema version {version}) cannot be read: "
                           f"{field}: {first['msg']}", where=f"phase {cls.PHASE}",
                           fix="start a new run (`ltx-pipeline run --run NEW ...`); this run's records are kept "
                               "as they are") from exc

    def to_stored(self) -> dict[str, Any]:
        """The JSON the store keeps (with ``SCHEMA_VERSION`` in its own column)."""
        return self.model_dump(mode="json")


class StoredOutputs:
    """One upstream phase's outputs as the store holds them: JSON and the version it was written at.

    The runner hands these to the context; a consumer turns them into its typed model on first use.
    """

    __slots__ = ("data", "version", "_typed")

    def __init__(self, data: Mapping[str, Any], version: int) -> None:
        self.data = dict(data)
        self.version = version
        self._typed: PhaseOutputs | None = None

    @classmethod
    def of(cls, outputs: PhaseOutputs) -> StoredOutputs:
        stored = cls(outputs.to_stored(), type(outputs).SCHEMA_VERSION)
        stored._typed = outputs
        return stored

    def typed(self, kind: type[OutputsT]) -> OutputsT:
        """The outputs as ``kind`` (validated once, then shared: the model is frozen)."""
        if isinstance(self._typed, kind):
            return self._typed
        typed = kind.from_stored(self.data, self.version)
        self._typed = typed
        return typed
