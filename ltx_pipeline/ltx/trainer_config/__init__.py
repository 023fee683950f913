"""A pydantic v2 mirror of ltx-trainer's config schema: the room's one door.

``validate_trainer_config`` and ``parse_trainer_config`` check a mapping exactly as the trainer's
``LtxTrainerConfig`` would, ``load_trainer_config_file`` reads a YAML file with one-line errors,
``format_findings`` prints findings and ``data_sources`` lists where a config reads its data.
Inside: ``_schema`` (the root model and entry points), ``_sections`` (model, lora, optimization and
the other flat sections), ``_strategy`` (training strategies and their conditions), ``_validation``
(validation samples), ``_paths`` (the path-existence policy) and ``_settings`` (one key set alone,
``check_setting``). Nothing outside this package imports those modules. ``view`` (public) reads a
config's values typed, as the trainer defaults them, without judging it: ``read_config_view`` /
``load_config_view`` return a ``TrainerConfigView``.
"""

from ltx_pipeline.ltx.trainer_config._schema import (
    ConfigFinding,
    LtxTrainerConfig,
    data_sources,
    format_findings,
    load_trainer_config_file,
    parse_trainer_config,
    validate_trainer_config,
)
from ltx_pipeline.ltx.trainer_config._settings import SettingProblem, check_setting, settable_keys
from ltx_pipeline.ltx.trainer_config.view import TrainerConfigView, load_config_view, read_config_view

__all__ = [
    "ConfigFinding",
    "SettingProblem",
    "LtxTrainerConfig",
    "TrainerConfigView",
    "check_setting",
    "data_sources",
    "format_findings",
    "load_config_view",
    "load_trainer_config_file",
    "parse_trainer_config",
    "read_config_view",
    "settable_keys",
    "validate_trainer_config",
]
