"""One autotune trial: its config, its launch, what it measured and how it ended.

Owns the trial config (the planned stage config with short steps, checkpoints off, one step-0
validation pass at the planned dims with few denoising steps, the sanity data and the knobs under
test), the supervised launch through the run's journal, the live follow of its log (step time from
clean steady-state steps only), memory measurement (the engine's own sampler on the ``ltx``
backend; the ``reference`` and ``simulated`` backends' own reports) and the classification of its
outcome for ``SweepPlanner``. Loss is never a success criterion; a NaN loss is a failure.

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
import math
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from ltx_pipeline.autotune._measured import MEMORY_FILE
from ltx_pipeline.autotune.vram_sampler import IDLE_MIB, ResourceSampler, gpu_reader
from ltx_pipeline.backends.base import LaunchSpec
from ltx_pipeline.env_names import REFERENCE_LOG_EVERY_ENV
from ltx_pipeline.ltx.autotune import TrialResult, estimate_step_time, relative_spread
from ltx_pipeline.ltx.config_patch import KNOB_PATHS, Patch, apply_patches
from ltx_pipeline.reports.memory_figures import NOT_MEASURED
from ltx_pipeline.trainer_log import LogFollower, LogParser, TrainingProgress, classify_failure, failure_tail
from ltx_pipeline.workspace import atomic_write
from ltx_pipeline.yaml_io import load_yaml

__all__ = ["NOT_MEASURED", "UNMEASURED", "MeasuredTrialResult", "MemoryFigure", "TrialMemory", "TrialOutcome",
           "TrialSettings", "run_trial", "trial_settings", "write_trial_config"]

GIB = 1024**3
_FAILURE_OUTCOMES = {"oom_training": "oom_training", "oom_validation": "oom_validation", "nan_loss": "nan"}
# Not one of the planner's outcomes on purpose: ``SweepPlanner.fits`` needs "fit", so an unmeasured
# trial never fits or wins, and it is not in MEMORY_FAILURES, so it prunes nothing.
UNMEASURED: Any = "unmeasured"
REFERENCE_UNMEASURED = "memory not measured on the reference backend without `reference_memory_scale` in run.yaml"
_REASON_CHARS = 1000  # a pathological one-line reason is cut here, at a word boundary


@dataclass(frozen=True)
class TrialSettings:
    """How trials run on one backend.

    Attributes:
        steps: optimizer steps per trial: two clean ``Step`` lines (the trainer logs every 20 steps,
            the start step's line is warm-up, and a line on the last step shares it with the final
            save, so 41 steps give the clean lines at 20 and 40).
        env: environment added to the launch (the reference trainer's log cadence).
        stop_early: stop the trial as soon as step time and peak memory are measured; False where the
            backend reports its figures only at exit (reference, simulated), whose trials are short.
        sample_gpu: poll the GPU with the engine's own sampler (real GPUs only).
        inference_steps: denoising steps of the trial's validation pass (memory does not depend on it).
    """

    steps: int
    env: dict[str, str] = field(default_factory=dict)
    stop_early: bool = False
    sample_gpu: bool = False
    inference_steps: int = 2


def trial_settings(backend: str) -> TrialSettings:
    """The trial settings for a backend name (``ltx``, ``reference`` or ``simulated``)."""
    if backend == "reference":
        return TrialSettings(steps=7, env={REFERENCE_LOG_EVERY_ENV: "2"})
    if backend == "simulated":
        return TrialSettings(steps=41)  # deterministic step times: two clean lines settle them
    # A real GPU: up to 6 clean lines (121 steps), stopped as soon as the stopping rule knows the step time
    # (ltx.autotune.estimate_step_time: ±3 % at 95 %), usually at the second line (41 steps).
    return TrialSettings(steps=121, stop_early=True, sample_gpu=True)


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


@dataclass
class TrialOutcome:
    """What one trial produced: the planner's result plus what the report shows."""

    result: TrialResult
    host_ram_gb: float | None
    log: str
    failure_kind: str | None = None
    fixes: list[dict[str, Any]] = field(default_factory=list)
    step_spread: float | None = None  # relative spread of its clean step times (two or more samples)


def write_trial_config(ctx: Any, stage_config: Path, target: Path, *, knobs: dict[str, Any], sanity_root: str,
                       output_dir: Path, settings: TrialSettings, number: int,
                       validation_from: int | None = None) -> list[dict[str, Any]]:
    """Write the trial config for ``knobs`` from the planned stage config; return the patch records.

    ``validation_from``: the trial whose step-0 validation memory this one carries (same quantization),
    so this trial skips its own validation pass (``ltx.autotune.VALIDATION_KNOBS`` says why that holds).
    """
    steps = settings.steps
    skip = validation_from is not None
    patches = [
        Patch("data.preprocessed_data_root", sanity_root, "trial data: the sanity set at the largest bucket"),
        Patch("output_dir", str(output_dir), "trial outputs stay under overfit/"),
        Patch("optimization.steps", steps, "a short trial: enough steady steps to time one"),
        Patch("checkpoints.interval", None, "no intermediate checkpoints in a trial"),
        Patch("validation.interval", steps + 1, "only the step-0 validation pass at the planned dims"),
        Patch("validation.skip_initial_validation", skip,
              f"its validation memory is trial {validation_from}'s (same quantization)" if skip
              else "the validation pass's memory is measured"),
        Patch("validation.inference_steps", settings.inference_steps,
              "validation memory does not depend on the number of denoising steps"),
        Patch("model.load_checkpoint", None, "a trial starts from the base model"),
        Patch("wandb.enabled", False, "trials are not logged to W&B"),
    ]
    patches += [Patch(KNOB_PATHS[k], v, "the knobs under test") for k, v in knobs.items()
                if k in KNOB_PATHS and k != "gradient_accumulation_steps"]
    # Accumulation changes time, not peak memory: the trial times one micro-step (accumulation 1) and
    # the planner scales it to the planned effective batch, so a trial costs 1/A of the planned steps.
    patches.append(Patch(KNOB_PATHS["gradient_accumulation_steps"], 1, "a trial times single micro-steps"))
    reason = f"autotune trial {number}"
    text, records = apply_patches(stage_config.read_text(encoding="utf-8"),
                                  [Patch(p.path, p.value, f"{reason}: {p.reason}") for p in patches])
    atomic_write(target, text, root=ctx.workspace)
    return [r.to_dict() for r in records]


def run_trial(ctx: Any, number: int, config: Path, knobs: dict[str, Any], settings: TrialSettings, *,
              gpu_indices: list[int], nvidia_smi: str | None, validated: Any = None,
              carried_validation: MemoryFigure | None = None, pooled_spread: float | None = None) -> TrialOutcome:
    """Launch the trial, follow it until it is measured or ends, and classify how it went.

    ``validated`` is the trial config as validated (``engine.journal.ValidatedConfig``), which the
    journal requires for a trainer launch. ``carried_validation``: the validation figure of an earlier
    trial with the same quantization; this trial's config skips its validation pass (written with
    ``validation_from``) and reports that figure, with its source, as its own validation peak.
    """
    spec = ctx.backend.train_command(config)
    env = {**spec.env, **settings.env}
    if settings.sample_gpu and gpu_indices:
        # Same indices for nvidia-smi and CUDA: the trial runs on the first planned GPU.
        env.update({"CUDA_DEVICE_ORDER": "PCI_BUS_ID", "CUDA_VISIBLE_DEVICES": str(gpu_indices[0])})
    spec = LaunchSpec(spec.argv, spec.cwd, env)
    folder = config.parent
    log = folder / "train.log"
    values = load_yaml(config.read_text(encoding="utf-8")) or {}
    output_dir = Path(values["output_dir"])
    accumulation = int(values["optimization"].get("gradient_accumulation_steps") or 1)
    sampler = ResourceSampler()
    if settings.sample_gpu and gpu_indices:
        reader, name = gpu_reader(gpu_indices[:1], nvidia_smi)
        sampler = ResourceSampler(reader, reader_name=name)
    progress = TrainingProgress(settings.steps, validation_interval=settings.steps + 1)
    started = time.monotonic()
    handle = ctx.journal.launch("trial", number, spec, log, validated)
    sampler.watch(handle.pid)
    if carried_validation is not None:
        sampler.set_label("training")  # no validation pass runs: every sample is the training's
    stopped = nan = False
    with sampler:
        follower, parser = LogFollower(log), LogParser()
        while True:
            alive = handle.alive()
            text, _ = follower.read_text(final=not alive)
            progress.feed(parser.feed_text(text))
            if progress.validations and sampler.label != "training":
                sampler.set_label("training")
            nan = any(not math.isfinite(v) for v in progress.losses.values())
            if alive and (nan or (settings.stop_early
                                  and _measured(progress, sampler, carried_validation, pooled_spread))):
                ctx.journal.stop(handle)
                stopped = True
                break
            if not alive:
                break
            handle.pause(0.1)
        progress.feed(parser.flush())
    wall = time.monotonic() - started
    if not stopped:
        handle = ctx.journal.settle(handle)
    nan = nan or any(not math.isfinite(v) for v in progress.losses.values())
    record = handle.exit()
    exit_code = None if record is None else record.get("exit_code")
    estimate = estimate_step_time(progress.clean_step_times(), pooled_spread=pooled_spread)
    steady = estimate.seconds if (estimate.used >= 2 or estimate.known) else progress.steady_step_time()
    spread = relative_spread(progress.clean_step_times())
    step_time = steady / accumulation if steady is not None else None
    memory = _peaks(ctx.request.backend, output_dir, progress, sampler, wall, scale=_memory_scale(ctx))
    if carried_validation is not None:
        memory = replace(memory, validation=carried_validation)
    host = sampler.host_peak_bytes / GIB if sampler.host_peak_bytes else None
    if nan:
        result = _result(knobs, "nan", step_time, memory, "loss is NaN")
        return _outcome(ctx, folder, result, host, log, "nan_loss")
    if stopped or exit_code == 0:
        done = _clean_end(ctx, folder, knobs, step_time, memory, host, log)
        done.step_spread = spread
        return done
    failure = classify_failure(exit_code, None if record is None else record.get("signal"), failure_tail(log),
                               config=values, initial_validation=carried_validation is None)
    outcome = _FAILURE_OUTCOMES.get(failure.kind, "crash")
    reason = failure.evidence if outcome != "crash" else f"{failure.kind}: {failure.evidence}"
    # A failed trial's figures are not its peak (it never got there): not measured.
    failed = TrialMemory(MemoryFigure.absent(f"the trial failed ({outcome})"),
                         MemoryFigure.absent(f"the trial failed ({outcome})"), memory.seconds)
    result = _result(knobs, outcome, step_time, failed, whole_words(reason))
    fixes = [{"path": f.path, "value": f.value, "reason": f.reason} for f in failure.fix]
    return _outcome(ctx, folder, result, host, log, failure.kind, fixes)


def whole_words(text: str, limit: int = _REASON_CHARS) -> str:
    """The first line of ``text``, whole; past ``limit`` characters cut at a word boundary, never inside a word."""
    line = next((ln.strip() for ln in text.splitlines() if ln.strip()), "")
    if len(line) <= limit:
        return line
    cut = line.rfind(" ", 0, limit)
    return (line[:cut] if cut > 0 else line[:limit]).rstrip() + " …"


def _clean_end(ctx: Any, folder: Path, knobs: dict[str, Any], step_time: float | None, memory: TrialMemory,
               host: float | None, log: Path) -> TrialOutcome:
    """A trial that ended cleanly (or was stopped once measured): fit, assumed fit, or unmeasured."""
    timing = "" if step_time is not None else "step time not measured (too few clean steps)"
    if memory.assumed_fit:
        reason = "; ".join(p for p in (f"{memory.note}: assumed to fit, judged on step time only", timing) if p)
        return _outcome(ctx, folder, _result(knobs, "fit", step_time, memory, reason), host, log)
    missing = [f"{what} peak not measured ({fig.missing or 'no reading'})"
               for what, fig in (("training", memory.training), ("validation", memory.validation)) if fig.gb is None]
    if missing:
        reason = "; ".join([*missing, timing] if timing else missing) + ": cannot be judged to fit"
        fixes = [{"path": None, "value": None, "reason": _measure_fix(ctx.request.backend)}]
        return _outcome(ctx, folder, _result(knobs, UNMEASURED, step_time, memory, reason), host, log,
                        "memory_not_measured", fixes)
    return _outcome(ctx, folder, _result(knobs, "fit", step_time, memory, timing), host, log)


def _measure_fix(backend: str) -> str:
    if backend == "reference":
        return ("check the trial's outputs/reference_memory.json: the reference trainer reports its peaks there "
                "when it completes")
    if backend == "simulated":
        return "give the surface point a peak_vram_gb (and validation_peak_vram_gb)"
    return ("let the engine sample GPU memory: install pynvml (NVML), or pass --nvidia-smi PATH to a working "
            "nvidia-smi; check that the trial runs on the probed GPU")


def _result(knobs: dict[str, Any], outcome: Any, step_time: float | None, memory: TrialMemory,
            reason: str) -> MeasuredTrialResult:
    return MeasuredTrialResult(knobs, outcome, step_time, memory.training.gb, memory.validation.gb, memory.seconds,
                               reason, peak_source=memory.training.source,
                               validation_peak_source=memory.validation.source, memory_note=memory.note,
                               assumed_fit=memory.assumed_fit, order_gb=memory.order_gb)


def _outcome(ctx: Any, folder: Path, result: MeasuredTrialResult, host: float | None, log: Path,
             failure_kind: str | None = None, fixes: list[dict[str, Any]] | None = None) -> TrialOutcome:
    """The outcome, with the memory figures and their sources written beside the trial's log."""
    record = {**result.memory_record(), "host_ram_gb": host,
              "host_ram_source": "process tree RSS (psutil)" if host is not None else None}
    atomic_write(folder / MEMORY_FILE, json.dumps(record, indent=2), root=ctx.workspace)
    return TrialOutcome(result, host, str(log), failure_kind, fixes or [])


def _measured(progress: TrainingProgress, sampler: ResourceSampler, carried: MemoryFigure | None = None,
              pooled_spread: float | None = None) -> bool:
    """Step time known to the stopping rule's precision, and both memory figures taken (or carried)."""
    return (estimate_step_time(progress.clean_step_times(), pooled_spread=pooled_spread).known
            and (carried is not None or bool(progress.validations)) and sampler.peak_gb("training") is not None)


def _memory_scale(ctx: Any) -> float | None:
    """The reference backend's memory scale (``reference_memory_scale`` in run.yaml), None when unset."""
    scale = getattr(getattr(ctx, "backend", None), "memory_scale", None)
    if scale is None:
        scale = getattr(getattr(ctx, "request", None), "reference_memory_scale", None)
    return float(scale) if scale is not None else None


def _peaks(backend: str, output_dir: Path, progress: TrainingProgress, sampler: ResourceSampler,
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
