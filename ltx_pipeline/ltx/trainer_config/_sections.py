"""Mirror of the trainer's plain config sections: model, lora, optimization, acceleration, data,
checkpoints, hub, wandb and flow_matching (facts §1.3-§1.11).

Every class forbids unknown keys and keeps the trainer's types, defaults, Literal values and
bounds, so pydantic reports the same error type at the same location. The path validators follow
the trainer (model_path: not a URL and exists; VAE paths: files; data root: expanduser + resolve,
exists and is a directory) but take the working directory and the "relaxed" switch from the
validation context (see ``trainer_config_paths``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator, model_validator

from ltx_pipeline.ltx.trainer_config._paths import locate, path_policy, resolved

__all__ = [
    "DEFAULT_LORA_TARGET_MODULES",
    "QUANTIZATION_OPTIONS",
    "SCHEDULER_TYPES",
    "AccelerationConfig",
    "CheckpointsConfig",
    "ConfigBaseModel",
    "DataConfig",
    "FlowMatchingConfig",
    "HubConfig",
    "LoraConfig",
    "ModelConfig",
    "OptimizationConfig",
    "WandbConfig",
]

DEFAULT_LORA_TARGET_MODULES = ("to_k", "to_q", "to_v", "to_out.0")
QuantizationOption = Literal["int8-quanto", "int4-quanto", "int2-quanto", "fp8-quanto", "fp8uz-quanto"]
QUANTIZATION_OPTIONS = ("int8-quanto", "int4-quanto", "int2-quanto", "fp8-quanto", "fp8uz-quanto")
SchedulerType = Literal["constant", "linear", "cosine", "cosine_with_restarts", "polynomial", "step"]
SCHEDULER_TYPES = ("constant", "linear", "cosine", "cosine_with_restarts", "polynomial", "step")


class ConfigBaseModel(BaseModel):
    """Base of every mirrored section: unknown keys are errors (``extra_forbidden``)."""

    model_config = ConfigDict(extra="forbid")


class ModelConfig(ConfigBaseModel):
    """The base checkpoint and the training mode. ``text_encoder_path``/``load_checkpoint`` are unchecked."""

    model_path: str | Path = Field(...)
    text_encoder_path: str | Path | None = None
    video_vae_path: str | Path | None = None
    audio_vae_path: str | Path | None = None
    training_mode: Literal["lora", "full"] = "lora"
    load_checkpoint: str | Path | None = None

    @field_validator("model_path")
    @classmethod
    def _check_model_path(cls, value: str | Path, info: ValidationInfo) -> str | Path:
        if str(value).startswith(("http://", "https://")):
            raise ValueError(f"Model path cannot be a URL: {value}")
        policy = path_policy(info)
        if not policy.relaxed and not locate(value, policy).exists():
            raise ValueError(f"Model path does not exist: {value}")
        return value  # only checked, never rewritten (the trainer keeps it as given)

    @field_validator("video_vae_path", "audio_vae_path")
    @classmethod
    def _check_component_path(cls, value: str | Path | None, info: ValidationInfo) -> str | Path | None:
        policy = path_policy(info)
        if value is not None and not policy.relaxed and not locate(value, policy).is_file():
            raise ValueError(f"Model component path does not exist or is not a file: {value}")
        return value


class LoraConfig(ConfigBaseModel):
    """LoRA adapter shape; ``lora: {}`` gives rank 64, alpha 64, dropout 0 and the default targets."""

    rank: int = Field(default=64, ge=2)
    alpha: int = Field(default=64, ge=1)
    dropout: float = Field(default=0.0, ge=0.0, le=1.0)
    target_modules: list[str] = Field(default_factory=lambda: list(DEFAULT_LORA_TARGET_MODULES))


class OptimizationConfig(ConfigBaseModel):
    """Optimizer and LR schedule. ``steps``, ``batch_size`` and accumulation have no bounds in the trainer."""

    learning_rate: float = 5e-4
    steps: int = 3000
    batch_size: int = 2
    gradient_accumulation_steps: int = 1
    max_grad_norm: float = 1.0
    optimizer_type: Literal["adamw", "adamw8bit"] = "adamw"
    scheduler_type: SchedulerType = "linear"
    scheduler_params: dict[Any, Any] = Field(default_factory=dict)
    enable_gradient_checkpointing: bool = False


class AccelerationConfig(ConfigBaseModel):
    """Mixed precision, quantization and the memory-saving switches."""

    mixed_precision_mode: Literal["no", "fp16", "bf16"] | None = "bf16"
    quantization: QuantizationOption | None = None
    load_text_encoder_in_8bit: bool = False
    offload_optimizer_during_validation: bool = False


class DataConfig(ConfigBaseModel):
    """The preprocessed dataset; the root is stored absolute (expanduser + resolve)."""

    preprocessed_data_root: str = Field(...)
    num_dataloader_workers: int = Field(default=2, ge=0)

    @field_validator("preprocessed_data_root")
    @classmethod
    def _check_data_root(cls, value: str, info: ValidationInfo) -> str:
        policy = path_policy(info)
        path = resolved(value, policy)
        if not policy.relaxed:
            if not path.exists():
                raise ValueError(f"Dataset path does not exist: {value}")
            if not path.is_dir():
                raise ValueError(f"Dataset path is not a directory: {value}")
        return str(path)


class CheckpointsConfig(ConfigBaseModel):
    """Checkpoint cadence and retention (``keep_last_n`` 0 or -1 keeps all)."""

    interval: int | None = Field(default=None, gt=0)
    keep_last_n: int = Field(default=1, ge=-1)
    precision: Literal["bfloat16", "float32"] = "bfloat16"
    no_resume: bool = False
    save_training_state: Literal["full", "minimal", "off"] = "minimal"


class HubConfig(ConfigBaseModel):
    """Pushing the weights to the Hugging Face Hub."""

    push_to_hub: bool = False
    hub_model_id: str | None = None

    @model_validator(mode="after")
    def _require_model_id(self) -> HubConfig:
        if self.push_to_hub and not self.hub_model_id:
            raise ValueError("hub_model_id must be specified when push_to_hub is True")
        return self


class WandbConfig(ConfigBaseModel):
    """Weights & Biases logging."""

    enabled: bool = False
    project: str = "ltxv-trainer"
    entity: str | None = None
    tags: list[str] = Field(default_factory=list)
    log_validation_videos: bool = True


class FlowMatchingConfig(ConfigBaseModel):
    """Timestep sampling; the params are passed as kwargs to the sampler at train() start."""

    timestep_sampling_mode: Literal["uniform", "shifted_logit_normal"] = "shifted_logit_normal"
    timestep_sampling_params: dict[Any, Any] = Field(default_factory=dict)
