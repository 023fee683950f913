"""A trial's memory figures, each with its source, as each backend reports them; the planner's result carrying them.

Every memory figure carries its source (``MemoryFigure``; the result's ``peak_source`` and
``validation_peak_source``, also written to ``<trial>/memory.json`` for the reports):
- ``ltx``: "vram sampler (nvml)" or "vram sampler (nvidia-smi)" (idle readings are not
  measurements), or "trainer statistic" (the statistics block's peak) when that is higher;
- ``reference``: "reference trainer accounting (scaled x S)" only when a memory scale is set
  (``reference_memory_scale`` in run.yaml); without one the toy's bytes say nothing about a GPU, so both
  figures are not measured and the trial is judged on step time only (``assumed_fit``);
- ``simulated``: "simulated cost surface" (a point without a validation figure validates at its
  training peak, as the simulated trainer does).
An unmeasured figure is None ("not measured"), never 0.0. A trial that ran cleanly but lacks its
training or validation peak is ``unmeasured`` (``UNMEASURED``): never a fit, never a winner, and
not a memory failure either (it settles nothing about other configs).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ltx_pipeline.autotune.vram_sampler import IDLE_MIB, ResourceSampler
from ltx_pipeline.ltx.autotune import TrialResult
from ltx_pipeline.trainer_log import TrainingProgress

__all__ = ["GIB", "REFERENCE_UNMEASURED", "UNMEASURED", "MeasuredTrialResult", "MemoryFigure", "TrialMemory",
           "memory_scale", "trial_peaks"]

GIB = 1024**3
# Not one of the planner's outcomes on purpose: ``SweepPlanner.fits`` needs "fit", so an unmeasured
# trial never fits or wins, and it is not in MEMORY_FAILURES, so it prunes nothing.
UNMEASURED: Any = "unmeasured"
REFERENCE_UNMEASURED = "memory not measured on the reference backend without `reference_memory_scale` in run.yaml"


@dataclass(frozen=True)
class MemoryFigure:
    """One memory figure and where it came from; ``gb`` None means not measured (``missing`` says why)."""

    gb: float | None
    source: str | None = None
    missing: str = ""

    @classmethod
    def absent(cls, why: str) -> MemoryFigure:
        return cls(None, None, why)


@dataclass(frozen=True)
class TrialMemory:
    """A trial's memory figures, its duration and how its fit may be judged.

    ``assumed_fit``: nothing measured the memory and none can (the reference backend without a
    memory scale); the trial is judged on step time only and ``order_gb`` (the toy's own unscaled
    accounting, never shown as GPU memory) only orders the planner's trials.
    """

    training: MemoryFigure
    validation: MemoryFigure
    seconds: float
    note: str = ""
    assumed_fit: bool = False
    order_gb: float | None = None


@dataclass
class MeasuredTrialResult(TrialResult):
    """The planner's ``TrialResult`` with the source of each memory figure.

    For the planner, ``peak_gb`` is None when the trial is ``unmeasured`` (so a baseline without a
    full measurement reads "reported no peak memory", never a partial peak judged against the
    limit), and the toy's ordering figure when the fit is assumed (memory not measured: judged on
    step time only); ``peak_vram_gb``/``validation_peak_vram_gb`` stay what was measured (None
    when not), which is what every record and report shows.
    """

    peak_source: str | None = None
    validation_peak_source: str | None = None
    memory_note: str = ""
    assumed_fit: bool = False
    order_gb: float | None = None

    @property
    def peak_gb(self) -> float | None:
        if self.outcome == UNMEASURED:
            return None
        if self.assumed_fit and self.peak_vram_gb is None and self.validation_peak_vram_gb is None:
            return self.order_gb
        return super().peak_gb

    def memory_record(self) -> dict[str, Any]:
        """What ``memory.json`` holds and the reports read: each figure with its source."""
        return {"peak_vram_gb": self.peak_vram_gb, "peak_source": self.peak_source,
                "validation_peak_vram_gb": self.validation_peak_vram_gb,
                "validation_peak_source": self.validation_peak_source, "memory_note": self.memory_note,
                "assumed_fit": self.assumed_fit,
                "judged_on": "step time only (memory not measured)" if self.assumed_fit else "memory and step time"}


def memory_scale(ctx: Any) -> float | None:
    """The reference backend's memory scale (``reference_memory_scale`` in run.yaml), None when unset."""
    scale = getattr(getattr(ctx, "backend", None), "memory_scale", None)
    if scale is None:
        scale = getattr(getattr(ctx, "request", None), "reference_memory_scale", None)
    return float(scale) if scale is not None else None


def trial_peaks(backend: str, output_dir: Path, progress: TrainingProgress, sampler: ResourceSampler,
           wall: float, *, scale: float | None = None) -> TrialMemory:
    """The trial's memory figures, each with its source, and its seconds, from what this backend reports."""
    stats_peak = progress.stats.peak_gpu_memory_gb if progress.stats else None
    if stats_peak is not None and stats_peak * 1024 <= IDLE_MIB:
        stats_peak = None  # an idle card's reading is not a measurement
    if backend == "simulated":
        return _simulated_peaks(output_dir, stats_peak)
    if backend == "reference":
        return _reference_peaks(output_dir, wall, scale)
    train = _max_figure(MemoryFigure(sampler.peak_gb("training"), sampler.source, sampler.missing("training")),
                        MemoryFigure(stats_peak, "trainer statistic"))
    validation = sampler.peak_gb("validation")
    return TrialMemory(train, MemoryFigure(validation, sampler.source if validation is not None else None,
                                           "" if validation is not None else sampler.missing("validation")), wall)


def _simulated_peaks(output_dir: Path, stats_peak: float | None) -> TrialMemory:
    cost = _read_json(output_dir / "simulated_cost.json") or {}
    seconds = float(cost.get("gpu_seconds") or 0.0)
    surface = "simulated cost surface"
    if cost.get("peak_vram_gb"):
        train = MemoryFigure(float(cost["peak_vram_gb"]), surface)
    elif stats_peak is not None:
        train = MemoryFigure(stats_peak, "trainer statistic")
    else:
        train = MemoryFigure.absent("the simulated trainer reported no peak")
    if cost.get("validation_peak_vram_gb"):
        validation = MemoryFigure(float(cost["validation_peak_vram_gb"]), surface)
    elif cost.get("peak_vram_gb"):
        # The simulated trainer validates at the point's training peak when it has no validation figure.
        validation = MemoryFigure(float(cost["peak_vram_gb"]), f"{surface} (the training peak: the point has no "
                                                              "validation figure)")
    else:
        validation = MemoryFigure.absent("the simulated trainer reported no validation peak")
    return TrialMemory(train, validation, seconds)


def _reference_peaks(output_dir: Path, wall: float, scale: float | None) -> TrialMemory:
    report = _read_json(output_dir / "reference_memory.json")
    if report is None:
        why = "the reference trainer wrote no reference_memory.json"
        return TrialMemory(MemoryFigure.absent(why), MemoryFigure.absent(why), wall)
    if report.get("status") != "completed":
        why = f"the reference trainer's accounting ended {report.get('status') or 'without a status'}"
        return TrialMemory(MemoryFigure.absent(why), MemoryFigure.absent(why), wall)
    peaks = report.get("peak_bytes") or {}
    if scale is None:
        # The toy's bytes are real but say nothing about a GPU: no figure, judged on step time only.
        raw = max((float(v) for v in peaks.values() if v), default=0.0) / float(report.get("scale") or 1.0) / GIB
        return TrialMemory(MemoryFigure.absent(REFERENCE_UNMEASURED), MemoryFigure.absent(REFERENCE_UNMEASURED),
                           wall, REFERENCE_UNMEASURED, assumed_fit=raw > 0, order_gb=raw or None)
    used = float(report.get("scale") or scale)
    source = f"reference trainer accounting (scaled x {used:g})"

    def figure(phase: str) -> MemoryFigure:
        value = peaks.get(phase)
        if not value:
            return MemoryFigure.absent(f"the reference trainer counted no {phase} memory")
        return MemoryFigure(float(value) / GIB, source)

    return TrialMemory(figure("training"), figure("validation"), wall)


def _max_figure(*figures: MemoryFigure) -> MemoryFigure:
    """The highest measured figure with its source; the first one's reason when none was measured."""
    known = [f for f in figures if f.gb is not None]
    if not known:
        return figures[0]
    return max(known, key=lambda f: f.gb or 0.0)


def _read_json(path: Path) -> dict[str, Any] | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None
