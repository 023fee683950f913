"""The cost-surface format that drives the ``simulated`` backend.

A surface describes one GPU and, for each combination of the autotune knobs that fits, its step
time and peak VRAM; any combination not listed runs out of memory at its first training step.
VRAM is in the trainer's own unit (nvidia-smi MiB / 1024, printed as GB); capacity is
``memory_mib / 1024``. Two optional fields per point extend the format for failure tests:
``loss_nan: true`` (the loss is NaN from the first step) and ``crash: "message"`` (the trainer
crashes at its first step with that RuntimeError), and ``validation_dims: [W, H, F]`` (the dims
``validation_peak_vram_gb`` holds for; a validation at other dims scales its excess over the
training peak by the latent token count). One optional top-level field describes the host:
``small_shm: true`` (a /dev/shm too small for DataLoader workers: any config with
``data.num_dataloader_workers > 0`` dies with PyTorch's bus error, as a container's 64 MB default does).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import AliasChoices, BaseModel, ConfigDict, Field, ValidationError, model_validator

from ltx_pipeline.errors import BadInput
from ltx_pipeline.yaml_io import load_yaml

__all__ = ["KNOB_NAMES", "CostSurface", "SurfacePoint", "knobs_key", "load_surface"]

KNOB_NAMES = ("quantization", "optimizer_type", "batch_size", "enable_gradient_checkpointing")
Quantization = Literal["int8-quanto", "int4-quanto", "int2-quanto", "fp8-quanto", "fp8uz-quanto"] | None
#: One knob combination's values, in ``KNOB_NAMES`` order (``None`` where a knob is not given).
KnobsKey = tuple[Any, ...]


class SurfaceGpu(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str = Field(min_length=1)
    memory_mib: int = Field(gt=0)
    count: int = Field(default=1, ge=1, le=64)


class Knobs(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    quantization: Quantization
    optimizer_type: Literal["adamw", "adamw8bit"]
    batch_size: int = Field(ge=1)
    enable_gradient_checkpointing: bool


class SurfacePoint(BaseModel):
    model_config = ConfigDict(extra="forbid")

    knobs: Knobs
    step_time_s: float = Field(gt=0)
    peak_vram_gb: float = Field(gt=0)
    validation_peak_vram_gb: float | None = Field(default=None, gt=0)
    # The validation.video_dims the validation peak was measured at: other dims scale its part above the
    # training peak by the latent token count (so a render at smaller dims needs less).
    validation_dims: tuple[int, int, int] | None = None
    loss_nan: bool = False
    crash: str | None = None


class CostSurface(BaseModel):
    """A whole surface file."""

    model_config = ConfigDict(extra="forbid")

    gpu: SurfaceGpu
    load_time_s: float = Field(default=0, ge=0)
    validation_time_s: float = Field(default=0, ge=0)
    # One process's batch x accumulation the surface's figures are for (the sweep's per-GPU batch E). Surface
    # files written before the name said so call it ``effective_batch``: read as the same per-GPU value.
    per_gpu_batch: int = Field(default=1, ge=1, validation_alias=AliasChoices("per_gpu_batch", "effective_batch"))
    small_shm: bool = False
    points: list[SurfacePoint] = Field(min_length=1)

    @model_validator(mode="after")
    def _unique_points(self) -> CostSurface:
        seen: set[KnobsKey] = set()
        for point in self.points:
            key = knobs_key(point.knobs.model_dump())
            if key in seen:
                raise ValueError(f"knob combination {dict(zip(KNOB_NAMES, key, strict=True))} is listed twice")
            seen.add(key)
        return self

    @property
    def capacity_gb(self) -> float:
        return self.gpu.memory_mib / 1024

    def lookup(self, knobs: dict[str, Any]) -> SurfacePoint | None:
        """The point for these knobs, or None: that combination runs out of memory."""
        key = knobs_key(knobs)
        return next((p for p in self.points if knobs_key(p.knobs.model_dump()) == key), None)


def knobs_key(knobs: dict[str, Any]) -> KnobsKey:
    return tuple(knobs.get(name) for name in KNOB_NAMES)


def load_surface(path: Path) -> CostSurface:
    """Read and validate a surface file.

    Raises:
        BadInput: missing file, YAML error or a field that breaks the format, named by its path.
    """
    try:
        data = load_yaml(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise BadInput(f"Cannot read the cost surface: {exc.strerror}", where=str(path),
                       fix="pass an existing file to --surface") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        raise BadInput("The cost surface is not valid YAML" + (f" (line {mark.line + 1})" if mark else ""),
                       where=str(path), fix="correct the YAML syntax") from None
    try:
        return CostSurface.model_validate(data)
    except ValidationError as exc:
        err = exc.errors()[0]
        field = ".".join(str(p) for p in err["loc"]) or "(top level)"
        raise BadInput(f"Cost surface field {field}: {err['msg']}", where=str(path),
                       fix="see the cost-surface format in the README") from None
