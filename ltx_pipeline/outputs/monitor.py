"""``MonitorOutputs``: the run's landing page and plots, each stage's measured figures, the memory model's check."""

from __future__ import annotations

from typing import ClassVar

from pydantic import BaseModel, ConfigDict

from ltx_pipeline.engine.outputs import PhaseOutputs

__all__ = ["MemoryModelCheck", "MonitorOutputs", "MonitoredStage", "SamplesUsed"]

_FROZEN = ConfigDict(frozen=True, extra="forbid")


class SamplesUsed(BaseModel):
    """What the trainer trained on, from its own log (or the latent files): ``training.samples_used``."""

    model_config = _FROZEN

    used: int | None
    total: int | None
    skipped: int | None
    source: str
    log: str


class MonitoredStage(BaseModel):
    model_config = _FROZEN

    stage: int
    final_checkpoint: str | None
    final_step: int
    step_time_s: float | None  # the measured steady-state step time
    peak_gpu_memory_gb: float | None
    samples_used: SamplesUsed | None = None  # runs monitored before it was recorded lack it


class MemoryModelCheck(BaseModel):
    """Autotune's predicted peak for the trained config against the trainer's own peak statistic."""

    model_config = _FROZEN

    predicted_gb: float
    measured_gb: float
    miss: bool
    error: float | None  # relative error, when beyond the tolerance
    tolerance: float
    study: str | None


class MonitorOutputs(PhaseOutputs):
    PHASE: ClassVar[str] = "monitor"
    SCHEMA_VERSION: ClassVar[int] = 1

    summary: str  # run-summary.md
    loss_plot: str
    step_time_plot: str
    contact_sheet: str | None = None
    memory_model: MemoryModelCheck | None = None
    stages: list[MonitoredStage]
