"""``AutotuneOutputs``: the sweep's trials, what it pruned, the winner and its patches (or: autotune off).

One name, one meaning: ``effective_batch`` is the samples per optimizer step over every process, as
``--effective-batch`` and the plan's recipe mean it; ``per_gpu_batch`` is one process's share
(``batch_size x gradient_accumulation_steps``, what the search space keeps fixed while it trades batch
size against accumulation). Version 0 stored the per-GPU value under ``effective_batch`` and no process
count: ``upgrade`` moves it to ``per_gpu_batch`` and leaves the total unknown (None).
"""

from __future__ import annotations

from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, model_validator

from ltx_pipeline.engine.outputs import PhaseOutputs
from ltx_pipeline.outputs.validate import PatchRecordOutputs

__all__ = ["AutotuneOutputs", "Knobs", "NoiseTie", "PriorUse", "PrunedConfig", "SideBySide", "SideBySideTrial",
           "SupersededTrial", "TrialRecord"]

_FROZEN = ConfigDict(frozen=True, extra="forbid")

# The swept knobs as the plan and the trainer config spell them (``ltx.autotune.SPACE_KEYS``): quantization
# and optimizer names, batch size and accumulation counts, gradient checkpointing on or off.
KnobValue = str | int | float | bool | None
Knobs = dict[str, KnobValue]


class TrialRecord(BaseModel):
    """One trial (run here, on another host, or settled by a prior study) as the sweep recorded it."""

    model_config = _FROZEN

    number: int | str | None  # the trial number; "prior <study>#<n>" for a result taken from a prior study
    knobs: Knobs
    outcome: str  # ``ltx.autotune.Outcome`` (fit, oom_training, ...); kept open for names older runs stored
    state: str  # complete, fail (as the study holds it) or prior
    fits: bool
    step_time_s: float | None
    peak_vram_gb: float | None
    validation_peak_vram_gb: float | None
    seconds: float | None
    reason: str | None = ""
    host_ram_gb: float | None = None
    log: str | None = None
    objective: float | None = None
    step_spread: float | None = None
    step_margin: float | None = None  # the step time's relative 95 % half width (None: counted as exact)
    peak_source: str | None = None
    validation_peak_source: str | None = None
    assumed_fit: bool | None = None
    from_prior: str | None = None  # "<study> trial <n>": where a prior's result came from
    host: str | None = None  # the host that ran it, on a shared store
    gpus: list[int] | None = None  # the GPU indices it ran on, when trials ran side by side (--autotune-parallel)


class PrunedConfig(BaseModel):
    model_config = _FROZEN

    knobs: Knobs
    reason: str


class SupersededTrial(BaseModel):
    model_config = _FROZEN

    number: int
    reason: str


class SideBySideTrial(BaseModel):
    """One trial of a sweep with several slots: its GPUs and its span, in seconds after the first start."""

    model_config = _FROZEN

    number: int
    gpus: list[int]
    start_s: float
    end_s: float
    settled: bool  # stopped as settled by other results: GPU time spent on no result


class SideBySide(BaseModel):
    """How the trials of a sweep with several slots shared the GPUs (``autotune.side_by_side``)."""

    model_config = _FROZEN

    slots: list[list[int]]
    trials: list[SideBySideTrial]
    most_at_once: int
    shared: list[list[int]]  # [trial, trial, GPU] per pair that overlapped on a GPU (none expected)
    wall_seconds: float
    gpu_seconds: float
    settled_gpu_seconds: float


class NoiseTie(BaseModel):
    """The winner is not the fastest measured fit: it is within the noise of it (the 95 % interval of the two
    step times' difference) and nearer the plan (``ltx.autotune._ranking``). Seconds per optimizer step."""

    model_config = _FROZEN

    fastest: Knobs
    fastest_objective: float
    winner_objective: float
    interval_s: float


class PriorUse(BaseModel):
    """What an earlier run's finished sweep told this one, and why."""

    model_config = _FROZEN

    study: str
    used: bool
    why: str
    results: int | None = None  # how many of its results settled this sweep (when used)


class AutotuneOutputs(PhaseOutputs):
    """The sweep (or ``off``: no trial ran, the plan's ``baseline`` trains as is)."""

    PHASE: ClassVar[str] = "autotune"
    SCHEMA_VERSION: ClassVar[int] = 1

    off: str | None = None  # why autotune did not sweep (the user turned it off); None when it swept
    baseline: Knobs
    deltas: Knobs
    patches: list[PatchRecordOutputs]
    reports: dict[str, str]  # report kind (log, markdown, plot) -> file
    study: str | None = None
    storage: str | None = None  # the optuna.db path, or the server's URL with its password replaced
    capacity_gb: float | None = None
    headroom: float | None = None
    limit_gb: float | None = None
    per_gpu_batch: int | None = None  # samples per optimizer step on one process (batch x accumulation)
    processes: int | None = None  # processes over every node; None in runs stored before version 1
    effective_batch: int | None = None  # samples per optimizer step over every process (per_gpu_batch x processes)
    trials: list[TrialRecord] = []
    pruned: list[PrunedConfig] = []
    winner: Knobs | None = None
    objective: float | None = None  # seconds per optimizer step of the winner
    superseded: list[SupersededTrial] = []
    prior: PriorUse | None = None
    predicted_peak_gb: float | None = None  # what the memory model expects the training to peak at
    side_by_side: SideBySide | None = None  # trials run several at once (--autotune-parallel), else None
    noise_tie: NoiseTie | None = None  # the fastest fit lost to a nearer config within its noise, else None

    @model_validator(mode="after")
    def _one_effective_batch(self) -> AutotuneOutputs:
        if None not in (self.per_gpu_batch, self.processes, self.effective_batch) and \
                self.effective_batch != (self.per_gpu_batch or 0) * (self.processes or 0):
            raise ValueError(f"effective_batch {self.effective_batch} is not per_gpu_batch {self.per_gpu_batch} x "
                             f"processes {self.processes}")
        return self

    @classmethod
    def upgrade(cls, data: dict[str, Any], version: int) -> dict[str, Any]:
        """Version 0 stored the per-GPU batch under ``effective_batch`` (and no process count)."""
        if version < 1 and "effective_batch" in data:
            data = {**data, "per_gpu_batch": data["effective_batch"], "effective_batch": None}
        return data

    def to_stored(self) -> dict[str, Any]:
        data = self.model_dump(mode="json")
        data["patches"] = [p.to_stored() for p in self.patches]
        if self.off is not None:  # autotune off stores what it decided, nothing of a sweep
            return {k: data[k] for k in ("off", "baseline", "deltas", "patches", "reports")}
        data.pop("off")
        data["trials"] = [{k: v for k, v in t.items()
                           if v is not None or k not in ("from_prior", "host", "gpus", "step_margin")}
                          for t in data["trials"]]
        if self.prior is not None and self.prior.results is None:
            data["prior"].pop("results")
        for key in ("side_by_side", "noise_tie"):  # when unused, a row is the JSON it was before the field existed
            if data[key] is None:
                data.pop(key)
        return data
