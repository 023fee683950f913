"""``TrainOutputs``: each stage's trained result, or the stage whose trainer goes on detached.

A finished stage names its final weights, step and the trainer's own statistics; a detached one
(``--detach``, Ctrl-C while following, a SLURM job) says where it runs, and the next ``resume``
re-attaches to it.
"""

from __future__ import annotations

from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict

from ltx_pipeline.engine.outputs import PhaseOutputs

__all__ = ["PendingStage", "TrainOutputs", "TrainedStage"]

_FROZEN = ConfigDict(frozen=True, extra="forbid")


class TrainedStage(BaseModel):
    """A stage whose trainer finished."""

    model_config = _FROZEN

    stage: int
    config: str
    output_dir: str
    log: str
    pid: int | None
    launch: str  # the printable launch command
    final_checkpoint: str | None
    final_step: int
    resumed_from: int | None = None  # the checkpoint step its last launch resumed from
    start_step: int = 0  # the run's step this stage's step 0 stands for (a continuation of a finished run)
    peak_gpu_memory_gb: float | None = None
    wandb_url: str | None = None
    steps_per_second: float | None = None
    on_gpu: bool = True  # older runs trained on GPUs only

    pending: Literal[False] = False  # never stored: a trained stage is told from a pending one by this

    @property
    def run_final_step(self) -> int:
        """The run's step the stage ended at (a continuation counts from the step it continues)."""
        return self.start_step + self.final_step


class PendingStage(BaseModel):
    """A stage whose trainer goes on without the engine."""

    model_config = _FROZEN

    stage: int
    pending: Literal[True] = True
    pid: int | None
    log: str
    launch: str
    output_dir: str
    slurm_job: int | None = None


class TrainOutputs(PhaseOutputs):
    PHASE: ClassVar[str] = "train"
    SCHEMA_VERSION: ClassVar[int] = 1

    stages: list[TrainedStage | PendingStage]
    stage_count: int

    @property
    def trained(self) -> list[TrainedStage]:
        return [s for s in self.stages if isinstance(s, TrainedStage)]

    @property
    def last(self) -> TrainedStage | PendingStage:
        return self.stages[-1]

    def to_stored(self) -> dict[str, Any]:
        stages = []
        for stage in self.stages:
            data = stage.model_dump(mode="json")
            if isinstance(stage, TrainedStage):
                data.pop("pending")
            elif stage.slurm_job is None:
                data.pop("slurm_job")
            stages.append(data)
        return {"stages": stages, "stage_count": self.stage_count}
