"""No ``dict[str, Any]`` crosses a phase boundary: every phase declares a typed, frozen, versioned model.

Each phase in ``PHASES`` names its ``outputs_type`` (a ``PhaseOutputs``), its ``run`` is annotated to
return a ``PhaseResult`` of exactly that type (the runner refuses anything else at run time), and no
field anywhere inside a model is ``Any`` or an untyped mapping, except the free-form payloads listed
below with the reason they are free-form.
"""

from __future__ import annotations

import types
import typing
from typing import Any

import pytest
from pydantic import BaseModel

from ltx_pipeline.engine import PhaseResult
from ltx_pipeline.engine.outputs import PhaseOutputs
from phases import PHASES

# (model, field): free-form by nature, each with why.
FREE_FORM: dict[tuple[str, str], str] = {}


def _untyped(annotation: Any, where: str, seen: set[type]) -> list[str]:
    """Every place under ``annotation`` that is ``Any`` or a mapping to ``Any``."""
    if annotation is Any:
        return [where]
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        if annotation in seen:
            return []
        seen.add(annotation)
        found: list[str] = []
        for name, field in annotation.model_fields.items():
            if (annotation.__name__, name) in FREE_FORM:
                continue
            found += _untyped(field.annotation, f"{annotation.__name__}.{name}", seen)
        return found
    origin = typing.get_origin(annotation)
    if origin is typing.Annotated:
        return _untyped(typing.get_args(annotation)[0], where, seen)
    if origin is not None or isinstance(annotation, types.UnionType):
        found = []
        for arg in typing.get_args(annotation):
            if arg is not Ellipsis:
                found += _untyped(arg, where, seen)
        return found
    if annotation in (dict, list, tuple, set, frozenset):  # bare containers hold Any
        return [where]
    return []


@pytest.mark.parametrize("phase", PHASES, ids=lambda p: p.name)
def test_each_phase_declares_a_frozen_versioned_outputs_model(phase: Any) -> None:
    kind = phase.outputs_type
    assert issubclass(kind, PhaseOutputs)
    assert kind.PHASE == phase.name
    assert kind.SCHEMA_VERSION >= 1
    assert kind.model_config.get("frozen") is True and kind.model_config.get("extra") == "forbid"
    hints = typing.get_type_hints(type(phase).run)
    assert hints["return"] == PhaseResult[kind]  # type: ignore[valid-type]
    assert typing.get_type_hints(type(phase).summary)["outputs"] is kind


@pytest.mark.parametrize("phase", PHASES, ids=lambda p: p.name)
def test_no_field_of_a_phase_outputs_model_is_untyped(phase: Any) -> None:
    assert _untyped(phase.outputs_type, phase.outputs_type.__name__, set()) == []


def test_the_checker_finds_an_untyped_field() -> None:
    class Loose(PhaseOutputs):
        PHASE = "loose"
        payload: dict[str, Any]

    assert _untyped(Loose, "Loose", set()) == ["Loose.payload"]
