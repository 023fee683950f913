"""A typed view of a trainer config: the values the pipeline reads, as the trainer defaults them.

The mirror (``LtxTrainerConfig``) judges a whole config and refuses unknown keys; the pipeline also
reads configs the mirror need not accept yet (a partial one, a key of a newer trainer) and wants a
handful of values, never a nested ``.get()`` chain. ``read_config_view`` reads a YAML mapping once into
these records: extra keys are ignored, a null or absent section takes the trainer's defaults (the
mirror's, which ``tests/unit/test_trainer_config_view.py`` holds them to), and a value of the wrong type
is one ``BadConfig`` naming its dotted path. It reads only; nothing here validates a launch.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError, model_validator

from ltx_pipeline.errors import BadConfig
from ltx_pipeline.yaml_io import load_yaml

__all__ = ["CheckpointsView", "LoraView", "ModelView", "OptimizationView", "TrainerConfigView", "ValidationView",
           "WandbView", "load_config_view", "read_config_view"]


class _View(BaseModel):
    """A section as read: unknown keys ignored, an explicit null section read as an absent one."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    @model_validator(mode="before")
    @classmethod
    def _null_sections_are_absent(cls, data: Any) -> Any:
        if isinstance(data, Mapping):
            return {key: value for key, value in data.items()
                    if not (value is None and key in cls.model_fields and _is_section(cls, key))}
        return data


def _is_section(cls: type[BaseModel], key: str) -> bool:
    annotation = cls.model_fields[key].annotation
    return isinstance(annotation, type) and issubclass(annotation, _View)


class ModelView(_View):
    model_path: str | None = None
    text_encoder_path: str | None = None
    training_mode: str = "lora"
    load_checkpoint: str | None = None


class LoraView(_View):
    rank: int = 64


class OptimizationView(_View):
    steps: int = 3000
    learning_rate: float = 5e-4
    optimizer_type: str = "adamw"
    scheduler_type: str = "linear"


class CheckpointsView(_View):
    interval: int | None = None
    no_resume: bool = False
    save_training_state: str = "minimal"


class ValidationView(_View):
    interval: int | None = 100
    skip_initial_validation: bool = False


class WandbView(_View):
    enabled: bool = False


class TrainerConfigView(_View):
    """The trainer config's values the pipeline reads (``lora`` None: the config has no LoRA section)."""

    model: ModelView = ModelView()
    lora: LoraView | None = None
    optimization: OptimizationView = OptimizationView()
    checkpoints: CheckpointsView = CheckpointsView()
    validation: ValidationView = ValidationView()
    wandb: WandbView = WandbView()
    seed: int = 42


def read_config_view(values: TrainerConfigView | Mapping[str, Any] | None, *,
                     where: str = "the trainer config") -> TrainerConfigView:
    """The typed view of a trainer config mapping (as ``yaml.safe_load`` reads it; None: an empty file); a
    view is returned as it is.

    Raises:
        BadConfig: a value the view reads has the wrong type (the first one, by its dotted path).
    """
    if isinstance(values, TrainerConfigView):
        return values
    if values is not None and not isinstance(values, Mapping):
        raise BadConfig("Trainer config must be a mapping of sections at the top level", where=where,
                        fix="start the file with keys such as `model:` and `data:`")
    try:
        return TrainerConfigView.model_validate(dict(values or {}))
    except ValidationError as error:
        first = error.errors(include_url=False)[0]
        dotted = ".".join(str(part) for part in first["loc"])
        raise BadConfig(f"Trainer config value {dotted} cannot be read: {first['msg']}", where=where,
                        fix=f"correct {dotted} in the config (or in run.yaml, which it is made from)") from None


def load_config_view(path: Path) -> TrainerConfigView:
    """``read_config_view`` of a config file.

    Raises:
        BadConfig: as ``read_config_view``.
        OSError: the file cannot be read.
    """
    return read_config_view(load_yaml(path.read_text(encoding="utf-8")), where=str(path))
