"""``Record``: a nested part of a phase's outputs, stored with exactly the keys it was made with.

Phases stored optional parts by leaving a key out (``{}`` for no clips, no ``python`` without
``--trainer-python``, a model file's identity whose keys depend on its kind). A ``Record`` keeps that
shape: a field that was not given is not written back, so an old row round-trips to the same JSON and
a fresh result stores what the untyped code stored. Readers still see every field, at its default.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, SerializerFunctionWrapHandler, model_serializer

__all__ = ["Record", "as_given", "drop_absent"]


class Record(BaseModel):
    """A frozen nested record whose stored JSON holds only the fields it was given."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    @model_serializer(mode="wrap")
    def _as_given(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        return as_given(self, handler(self))


def as_given(model: BaseModel, data: dict[str, Any]) -> dict[str, Any]:
    """``data`` (``model`` dumped) less the fields ``model`` was not given."""
    return {key: value for key, value in data.items() if key in model.model_fields_set}


def drop_absent(data: dict[str, Any], keys: tuple[str, ...]) -> dict[str, Any]:
    """``data`` less those of ``keys`` whose value is None: parts older rows (or some runs) never had."""
    return {key: value for key, value in data.items() if not (key in keys and value is None)}
