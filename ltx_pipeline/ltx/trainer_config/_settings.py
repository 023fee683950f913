"""One trainer-config key set on its own (``run --set KEY=VALUE``): does the key exist, is the value valid.

A key is ``section.field`` (``validation.inference_steps``) or a top-level field (``seed``); the value is
checked by the mirror's own section model with every other field at its default, so the field's type, its
bounds and its validators decide, with paths relaxed (whether a path exists is judged when the whole config
is validated before a launch). Keys inside lists (``validation.samples[0]``) and whole sections are not
settable one by one: they are refused with the section's own keys named.
"""

from __future__ import annotations

import difflib
from typing import Any

from pydantic import BaseModel, TypeAdapter, ValidationError

from ltx_pipeline.ltx.trainer_config._paths import PathPolicy
from ltx_pipeline.ltx.trainer_config._schema import LtxTrainerConfig

__all__ = ["SettingProblem", "check_setting", "settable_keys"]


class SettingProblem(ValueError):
    """A ``--set`` key the trainer does not have, or a value its schema refuses (one line, with a fix)."""

    def __init__(self, what: str, fix: str) -> None:
        super().__init__(what)
        self.what, self.fix = what, fix


def _section_model(name: str) -> type[BaseModel] | None:
    """The model of a top-level section (``lora: LoraConfig | None`` gives LoraConfig); None for a scalar."""
    field = LtxTrainerConfig.model_fields[name]
    candidates = [field.annotation, *getattr(field.annotation, "__args__", ())]
    return next((c for c in candidates if isinstance(c, type) and issubclass(c, BaseModel)), None)


def settable_keys() -> list[str]:
    """Every key ``--set`` takes: each field of each section, and the top-level scalars."""
    keys = []
    for name in LtxTrainerConfig.model_fields:
        if name == "training_strategy":  # a union of strategies: chosen by --mode, not key by key
            continue
        model = _section_model(name)
        keys += [name] if model is None else [f"{name}.{field}" for field in model.model_fields]
    return keys


def check_setting(key: str, value: Any) -> Any:
    """``value`` as the trainer's schema reads it for ``key``.

    Raises:
        SettingProblem: an unknown key, or a value the field refuses.
    """
    keys = settable_keys()
    if key not in keys:
        close = difflib.get_close_matches(key, keys, n=3)
        section = key.split(".", 1)[0]
        siblings = [k for k in keys if k.startswith(section + ".")]
        hint = (f"use {close[0]}" + (f" (or {', '.join(close[1:])})" if close[1:] else "") if close else
                f"{section} has {', '.join(siblings)}" if siblings else "keys look like validation.inference_steps")
        raise SettingProblem(f"the trainer config has no key {key!r}", hint)
    section, _, field = key.partition(".")
    model = _section_model(section)
    try:
        if model is None:  # a top-level scalar (seed): its annotation alone
            annotation: Any = LtxTrainerConfig.model_fields[section].annotation
            TypeAdapter(annotation).validate_python(value, strict=False)
        else:
            model.model_validate({field: value}, context=PathPolicy(relaxed=True).context())
    except ValidationError as exc:
        # Only this field's own errors: the section's other required fields (model.model_path) are not given
        # here, and cross-field rules are judged on the whole config before a launch.
        errors = [e for e in exc.errors() if model is None or tuple(e["loc"][:1]) == (field,)]
        if errors:
            raise SettingProblem(f"{key}: {value!r} is refused by the trainer's schema ({errors[0]['msg']})",
                                 f"give {key} a value its field takes") from None
    return value
