"""A pydantic v2 mirror of ltx-trainer's ``LtxTrainerConfig``, and the checks built on it.

Owns the root model (sections in the trainer's order, its cross-field validator in the trainer's
order, facts §1.12), the public entry points other phases use (``validate_trainer_config``,
``parse_trainer_config``, ``load_trainer_config_file``, ``format_findings``, ``data_sources``) and
the ``ConfigFinding`` record. Invariant: for any YAML mapping, the mirror accepts exactly what
``LtxTrainerConfig(**load_yaml(f))`` accepts, and reports each problem at the same dotted
location with the same pydantic error type and message, so a config that passes here will not
fail the trainer's config step. It is written independently from the documented schema (no
trainer code is copied) and imports neither torch nor the trainer. Validation reads the
filesystem (as the trainer does) but never writes; ``relaxed_paths`` turns every existence check
off for configs with placeholders. Two deliberate differences: a missing ``model`` section is
reported as ``model.model_path`` among all other errors (the trainer stops at that one), and a
``training_strategy`` that is not a mapping is ``union_tag_not_found`` (the trainer crashes).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import Field, TypeAdapter, ValidationError, ValidationInfo, field_validator, model_validator

from ltx_pipeline.errors import BadConfig
from ltx_pipeline.ltx.trainer_config._paths import PathPolicy, path_policy, resolved
from ltx_pipeline.ltx.trainer_config._sections import (
    AccelerationConfig,
    CheckpointsConfig,
    ConfigBaseModel,
    DataConfig,
    FlowMatchingConfig,
    HubConfig,
    LoraConfig,
    ModelConfig,
    OptimizationConfig,
    WandbConfig,
)
from ltx_pipeline.ltx.trainer_config._strategy import TextToVideoConfig, TrainingStrategyConfig
from ltx_pipeline.ltx.trainer_config._validation import ValidationConfig
from ltx_pipeline.yaml_io import load_yaml

__all__ = [
    "ConfigFinding",
    "LtxTrainerConfig",
    "data_sources",
    "format_findings",
    "load_trainer_config_file",
    "parse_trainer_config",
    "validate_trainer_config",
]


class LtxTrainerConfig(ConfigBaseModel):
    """The whole trainer config. ``data`` and ``model.model_path`` are required.

    Omitting ``training_strategy`` selects the deprecated ``text_to_video`` strategy, as in the
    trainer. ``output_dir`` is resolved only when supplied; the default stays "outputs".
    """

    # Without ``model:`` this validates {} and so raises that model_path is required, as the trainer does.
    model: ModelConfig = Field(default_factory=lambda: ModelConfig.model_validate({}))
    lora: LoraConfig | None = None
    training_strategy: TrainingStrategyConfig = Field(default_factory=TextToVideoConfig)
    optimization: OptimizationConfig = Field(default_factory=OptimizationConfig)
    acceleration: AccelerationConfig = Field(default_factory=AccelerationConfig)
    data: DataConfig
    validation: ValidationConfig = Field(default_factory=ValidationConfig)
    checkpoints: CheckpointsConfig = Field(default_factory=CheckpointsConfig)
    hub: HubConfig = Field(default_factory=HubConfig)
    flow_matching: FlowMatchingConfig = Field(default_factory=FlowMatchingConfig)
    wandb: WandbConfig = Field(default_factory=WandbConfig)
    seed: int = 42
    output_dir: str = "outputs"

    @field_validator("output_dir")
    @classmethod
    def _expand_output_dir(cls, value: str, info: ValidationInfo) -> str:
        return str(resolved(value, path_policy(info)))

    @model_validator(mode="after")
    def _check_strategy_compatibility(self, info: ValidationInfo) -> LtxTrainerConfig:
        if not path_policy(info).relaxed:
            root = Path(self.data.preprocessed_data_root)
            for dir_name in self.training_strategy.get_data_sources():
                if not (root / dir_name).is_dir():
                    raise ValueError(
                        f"Required data directory '{dir_name}' does not exist under "
                        f"preprocessed_data_root: {root / dir_name}"
                    )
        legacy_ic_lora = self.training_strategy.name == "video_to_video"
        if legacy_ic_lora and self.validation.interval:
            has_reference = bool(self.validation.reference_videos) or any(
                condition.type == "reference"
                for sample in self.validation.samples
                for condition in sample.conditions
            )
            if not has_reference:
                raise ValueError(
                    "reference_videos or samples with reference conditions must be provided "
                    "in validation config when using video_to_video strategy"
                )
        if self.model.training_mode == "lora" and self.lora is None:
            raise ValueError("LoRA configuration must be provided when training_mode is 'lora'")
        if legacy_ic_lora and self.model.training_mode != "lora":
            raise ValueError("Training mode must be 'lora' when using video_to_video strategy")
        return self


_STRATEGY: TypeAdapter[Any] = TypeAdapter(TrainingStrategyConfig)


@dataclass(frozen=True)
class ConfigFinding:
    """One problem in a trainer config, located as pydantic (and so the trainer) locates it.

    Attributes:
        path: dotted location, e.g. ``optimization.learnin_rate`` or
            ``training_strategy.flexible.video.conditions.0.prefix.temporal_boundary``; "" for
            problems found by a model-level validator of the whole config.
        message: pydantic's message, e.g. ``Extra inputs are not permitted``.
        code: pydantic's error type, e.g. ``extra_forbidden``, ``missing``, ``value_error``.
        severity: always "error": every finding makes the trainer refuse the config.
    """

    path: str
    message: str
    code: str
    severity: Literal["error"] = "error"

    def line(self) -> str:
        """``<dotted.path>: <message>``; model-level problems read ``(top level): <message>``."""
        return f"{self.path or '(top level)'}: {self.message}"


def _build(data: Mapping[str, Any], relaxed_paths: bool, cwd: Path | None) -> LtxTrainerConfig:
    policy = PathPolicy(relaxed=relaxed_paths, cwd=cwd.resolve() if cwd is not None else None)
    payload: Any = data
    if isinstance(data, Mapping):
        payload = dict(data)
        # NOTE: the trainer builds a missing `model` from a default factory that itself fails,
        # which aborts validation with a lone "ModelConfig / model_path" error. Supplying an empty
        # section reports the same problem as `model.model_path` missing, next to all the others.
        payload.setdefault("model", {})
    return LtxTrainerConfig.model_validate(payload, context=policy.context())


def _findings(error: ValidationError) -> list[ConfigFinding]:
    return [
        ConfigFinding(
            path=".".join(str(part) for part in item["loc"]),
            message=item["msg"],
            code=item["type"],
        )
        for item in error.errors(include_url=False)
    ]


def validate_trainer_config(
    data: dict[str, Any], *, relaxed_paths: bool = False, cwd: Path | None = None
) -> list[ConfigFinding]:
    """Check a trainer config mapping the way ``ltx-trainer`` would, collecting every problem.

    Args:
        data: the parsed YAML mapping (e.g. from ``load_trainer_config_file``); not modified.
        relaxed_paths: skip every existence check (model_path, VAE files, data root, data
            subdirectories, legacy validation media) so placeholder paths pass; URL and all
            non-path rules still apply.
        cwd: directory relative paths resolve against; None means the process working directory.

    Returns:
        The findings, empty when the trainer would accept the config.
    """
    try:
        _build(data, relaxed_paths, cwd)
    except ValidationError as error:
        return _findings(error)
    return []


def parse_trainer_config(
    data: Mapping[str, Any], *, relaxed_paths: bool = False, cwd: Path | None = None
) -> LtxTrainerConfig:
    """Build the mirrored config, raising one ``BadConfig`` that lists every finding.

    Args:
        data: the parsed YAML mapping.
        relaxed_paths: as in ``validate_trainer_config``.
        cwd: as in ``validate_trainer_config``.

    Returns:
        The validated config (relative data root / output_dir made absolute).

    Raises:
        BadConfig: the config is invalid; ``errors`` holds ``(dotted path, message)`` pairs.
    """
    try:
        return _build(data, relaxed_paths, cwd)
    except ValidationError as error:
        findings = _findings(error)
    raise _bad_config(findings)


def _bad_config(findings: list[ConfigFinding]) -> BadConfig:
    count = len(findings)
    return BadConfig(
        f"Trainer config has {count} error{'s' if count != 1 else ''}; first: {findings[0].line()}",
        fix="correct each listed key as its message says, then run again",
        errors=[(finding.path, finding.message) for finding in findings],
    )


def data_sources(config: LtxTrainerConfig | Mapping[str, Any]) -> dict[str, str]:
    """The directories the strategy requires under ``preprocessed_data_root``.

    Args:
        config: a validated config, or a raw mapping; for a mapping only its
            ``training_strategy`` section is validated (absent means legacy ``text_to_video``), so
            the answer is available even while other sections are still broken.

    Returns:
        Directory name (relative, or absolute when the config says so) -> dataset output key,
        e.g. ``{"conditions": "conditions", "latents": "video_latents"}``.

    Raises:
        BadConfig: the mapping's ``training_strategy`` section does not validate.
    """
    if isinstance(config, LtxTrainerConfig):
        return dict(config.training_strategy.get_data_sources())
    section = config.get("training_strategy", {})
    try:
        strategy = _STRATEGY.validate_python(section)
    except ValidationError as error:
        findings = [ConfigFinding(".".join(filter(None, ("training_strategy", f.path))), f.message, f.code)
                    for f in _findings(error)]
        raise _bad_config(findings) from error
    return dict(strategy.get_data_sources())


def load_trainer_config_file(path: Path) -> dict[str, Any]:
    """Read a trainer config YAML with ``yaml.safe_load``, like ``scripts/train.py`` does.

    ``safe_load`` (YAML 1.1) is kept on purpose: it reads ``1e-4`` as a string, which the trainer
    then coerces, and the mirror must see the same values.

    Args:
        path: the YAML file.

    Returns:
        The top-level mapping.

    Raises:
        BadConfig: the file is missing or unreadable, is not valid YAML (the line is given), or
            its top level is not a mapping.
    """
    path = Path(path)
    if not path.is_file():
        state = "is a directory" if path.is_dir() else "does not exist"
        raise BadConfig(f"Trainer config file {state}", where=str(path), fix="pass the path of a YAML file")
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise BadConfig(f"Cannot read trainer config: {error}", where=str(path),
                        fix="make it a readable UTF-8 text file") from error
    try:
        data = load_yaml(text)
    except yaml.YAMLError as error:
        raise _yaml_error(path, error) from error
    if not isinstance(data, dict):
        found = _KINDS.get(type(data), f"a {type(data).__name__}") if data is not None else "an empty file"
        raise BadConfig(f"Trainer config must be a mapping of sections at the top level, found {found}",
                        where=str(path), fix="start the file with keys such as `model:` and `data:`")
    return data


_KINDS = {list: "a list", str: "a string", int: "a number", float: "a number", bool: "a boolean"}


def _yaml_error(path: Path, error: yaml.YAMLError) -> BadConfig:
    mark = getattr(error, "problem_mark", None)
    where = f"{path}, line {mark.line + 1}, column {mark.column + 1}" if mark is not None else str(path)
    problem = getattr(error, "problem", None) or str(error).splitlines()[0]
    return BadConfig(f"Trainer config is not valid YAML: {problem}", where=where,
                     fix="correct the YAML syntax at that line (indentation, quotes, colons)")


def format_findings(findings: Iterable[ConfigFinding]) -> list[str]:
    """One line per finding: ``<dotted.path>: <message>`` (``(top level)`` for model-level ones)."""
    return [finding.line() for finding in findings]
