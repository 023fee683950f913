"""The typed view of a trainer config (``ltx.trainer_config.view``): the trainer's defaults, read leniently."""

from __future__ import annotations

import pytest
from pydantic import BaseModel

from ltx_pipeline.errors import BadConfig
from ltx_pipeline.ltx.trainer_config import LtxTrainerConfig, TrainerConfigView, read_config_view


def _mirror_section(name: str) -> type[BaseModel]:
    annotation = LtxTrainerConfig.model_fields[name].annotation
    section = next(a for a in getattr(annotation, "__args__", (annotation,)) if isinstance(a, type))
    assert issubclass(section, BaseModel)
    return section


@pytest.mark.parametrize("section", ["model", "lora", "optimization", "checkpoints", "validation", "wandb"])
def test_each_value_defaults_as_the_mirror_and_so_the_trainer_defaults_it(section: str) -> None:
    view = TrainerConfigView.model_fields[section].annotation
    view = next(a for a in getattr(view, "__args__", (view,)) if isinstance(a, type))
    mirror = _mirror_section(section)
    for name, field in view.model_fields.items():  # type: ignore[union-attr]
        if name == "model_path":  # required by the trainer: the view reads it as absent (None)
            continue
        assert field.default == mirror.model_fields[name].default, f"{section}.{name}"
    assert TrainerConfigView.model_fields["seed"].default == LtxTrainerConfig.model_fields["seed"].default


def test_null_sections_read_as_absent_and_unknown_keys_are_ignored() -> None:
    view = read_config_view({"optimization": None, "model": {"training_mode": "full", "newer_key": 1},
                             "validation": {"interval": None}, "data": {"x": 1}})
    assert view.optimization.steps == 3000 and view.model.training_mode == "full"
    assert view.validation.interval is None and view.lora is None
    lax = read_config_view({"lora": {}, "optimization": {"learning_rate": "1e-4", "steps": "10"}})
    assert lax.lora is not None and lax.lora.rank == 64  # `lora: {}` is the trainer's default adapter
    assert lax.optimization.learning_rate == pytest.approx(1e-4) and lax.optimization.steps == 10
    assert read_config_view(None) == TrainerConfigView() and read_config_view(lax) is lax


def test_a_value_of_the_wrong_type_is_one_line_naming_its_path() -> None:
    with pytest.raises(BadConfig) as bad:
        read_config_view({"optimization": {"steps": "many"}}, where="/run/config.yaml")
    assert bad.value.exit_code == 2
    assert "optimization.steps" in str(bad.value) and "/run/config.yaml" in str(bad.value)
    with pytest.raises(BadConfig):
        read_config_view(["not", "a", "mapping"])  # type: ignore[arg-type]
