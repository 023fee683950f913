"""One autotune trial: its config, its launch, what it measured and how it ended.

Owns the trial config (the planned stage config with short steps, checkpoints off, one step-0
validation pass at the planned dims with few denoising steps, the sanity data and the knobs under
test), the supervised launch through the run's journal, the live follow of its log (step time from
clean steady-state steps only), memory measurement (the engine's own sampler on the ``ltx``
backend; the ``reference`` and ``simulated`` backends' own reports) and the classification of its
outcome for ``SweepPlanner``. Loss is never a success criterion; a NaN loss is a failure. The memory
figures themselves, each with its source, and the result record carrying them are ``_peaks``.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from ltx_pipeline.autotune._measured import MEMORY_FILE
from ltx_pipeline.autotune._peaks import (
    GIB,
    UNMEASURED,
    MeasuredTrialResult,
    MemoryFigure,
    TrialMemory,
    memory_scale,
    trial_peaks,
)
from ltx_pipeline.autotune.vram_sampler import ResourceSampler, gpu_reader
from ltx_pipeline.backends.base import LaunchSpec
from ltx_pipeline.env_names import REFERENCE_LOG_EVERY_ENV
from ltx_pipeline.ltx.autotune import StepTimeEstimate, TrialResult, estimate_step_time, relative_spread
from ltx_pipeline.ltx.config_patch import KNOB_PATHS, Patch, apply_patches
from ltx_pipeline.ltx.config_values import config_value
from ltx_pipeline.trainer_log import LogFollower, LogParser, TrainingProgress, classify_failure, failure_tail
from ltx_pipeline.workspace import atomic_write
from ltx_pipeline.yaml_io import load_yaml

__all__ = ["TrialOutcome", "TrialSettings", "run_trial", "trial_settings", "whole_words", "write_trial_config"]

_FAILURE_OUTCOMES = {"oom_training": "oom_training", "oom_validation": "oom_validation", "nan_loss": "nan"}
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
    if config_value(load_yaml(stage_config.read_text(encoding="utf-8")) or {}, "hub.push_to_hub"):
        patches.append(Patch("hub.push_to_hub", False, "a trial uploads nothing (--push-to-hub is the run's)"))
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
    folder = config.parent
    log = folder / "train.log"
    values = load_yaml(config.read_text(encoding="utf-8")) or {}
    sampler = ResourceSampler()
    if settings.sample_gpu and gpu_indices:
        reader, name = gpu_reader(gpu_indices[:1], nvidia_smi)
        sampler = ResourceSampler(reader, reader_name=name)
    progress = TrainingProgress(settings.steps, validation_interval=settings.steps + 1)
    started = time.monotonic()
    handle = ctx.journal.launch("trial", number, _launch_spec(ctx, config, settings, gpu_indices), log, validated)
    sampler.watch(handle.pid)
    if carried_validation is not None:
        sampler.set_label("training")  # no validation pass runs: every sample is the training's
    stopped, nan = _follow(ctx, handle, log, progress, sampler,
                           lambda: settings.stop_early and _measured(progress, sampler, carried_validation,
                                                                     pooled_spread))
    wall = time.monotonic() - started
    if not stopped:
        handle = ctx.journal.settle(handle)
    nan = nan or any(not math.isfinite(v) for v in progress.losses.values())
    estimate = estimate_step_time(progress.clean_step_times(), pooled_spread=pooled_spread)
    from_estimate = estimate.used >= 2 or estimate.known
    steady = estimate.seconds if from_estimate else progress.steady_step_time()
    accumulation = int(values["optimization"].get("gradient_accumulation_steps") or 1)
    step_time = steady / accumulation if steady is not None else None
    memory = trial_peaks(ctx.request.backend, Path(values["output_dir"]), progress, sampler, wall,
                         scale=memory_scale(ctx))
    if carried_validation is not None:
        memory = replace(memory, validation=carried_validation)
    host = sampler.host_peak_bytes / GIB if sampler.host_peak_bytes else None
    ended = _Ended(folder, log, knobs, step_time, memory, host)
    record = handle.exit()
    if nan:
        return _outcome(ctx, ended, _result(ended, "nan", memory, "loss is NaN"), "nan_loss")
    if stopped or (record is not None and record.get("exit_code") == 0):
        done = _clean_end(ctx, folder, knobs, step_time, memory, host, log)
        done.step_spread = relative_spread(progress.clean_step_times())
        done.result.step_margin = _margin(estimate) if from_estimate else None
        return done
    return _failed(ctx, ended, record, values, initial_validation=carried_validation is None)


def _margin(estimate: StepTimeEstimate) -> float | None:
    """The step time's 95 % half width relative to it (what the winner's noise rule reads), None if unknown."""
    if estimate.half_width is None or not estimate.seconds:
        return None
    return estimate.half_width / estimate.seconds


def _launch_spec(ctx: Any, config: Path, settings: TrialSettings, gpu_indices: list[int]) -> LaunchSpec:
    """The backend's train command for ``config``, with the trial's environment (and its one GPU, when sampled)."""
    spec = ctx.backend.train_command(config)
    env = {**spec.env, **settings.env}
    if settings.sample_gpu and gpu_indices:
        # Same indices for nvidia-smi and CUDA: the trial runs on the first planned GPU.
        env.update({"CUDA_DEVICE_ORDER": "PCI_BUS_ID", "CUDA_VISIBLE_DEVICES": str(gpu_indices[0])})
    return LaunchSpec(spec.argv, spec.cwd, env)


def _follow(ctx: Any, handle: Any, log: Path, progress: TrainingProgress, sampler: ResourceSampler,
            measured: Callable[[], bool]) -> tuple[bool, bool]:
    """Feed the trial's log to ``progress`` while it runs; stop it at a NaN loss or once ``measured()``.

    Returns ``(stopped, nan)``: whether the engine stopped it, and whether a NaN loss was seen by then.
    """
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
            if alive and (nan or measured()):
                ctx.journal.stop(handle)
                stopped = True
                break
            if not alive:
                break
            handle.pause(0.1)
        progress.feed(parser.flush())
    return stopped, nan


@dataclass(frozen=True)
class _Ended:
    """What every ending of a trial is reported with: where it ran, its knobs and what it measured."""

    folder: Path
    log: Path
    knobs: dict[str, Any]
    step_time: float | None
    memory: TrialMemory
    host: float | None


def _failed(ctx: Any, ended: _Ended, record: dict[str, Any] | None, values: dict[str, Any], *,
            initial_validation: bool) -> TrialOutcome:
    """A trial that failed: its failure classified from the exit and the log's tail, with the fixes proposed."""
    exit_code = None if record is None else record.get("exit_code")
    failure = classify_failure(exit_code, None if record is None else record.get("signal"), failure_tail(ended.log),
                               config=values, initial_validation=initial_validation)
    outcome = _FAILURE_OUTCOMES.get(failure.kind, "crash")
    reason = failure.evidence if outcome != "crash" else f"{failure.kind}: {failure.evidence}"
    # A failed trial's figures are not its peak (it never got there): not measured.
    failed = TrialMemory(MemoryFigure.absent(f"the trial failed ({outcome})"),
                         MemoryFigure.absent(f"the trial failed ({outcome})"), ended.memory.seconds)
    result = _result(ended, outcome, failed, whole_words(reason))
    fixes = [{"path": f.path, "value": f.value, "reason": f.reason} for f in failure.fix]
    return _outcome(ctx, ended, result, failure.kind, fixes)


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
    ended = _Ended(folder, log, knobs, step_time, memory, host)
    timing = "" if step_time is not None else "step time not measured (too few clean steps)"
    if memory.assumed_fit:
        reason = "; ".join(p for p in (f"{memory.note}: assumed to fit, judged on step time only", timing) if p)
        return _outcome(ctx, ended, _result(ended, "fit", memory, reason))
    missing = [f"{what} peak not measured ({fig.missing or 'no reading'})"
               for what, fig in (("training", memory.training), ("validation", memory.validation)) if fig.gb is None]
    if missing:
        reason = "; ".join([*missing, timing] if timing else missing) + ": cannot be judged to fit"
        fixes = [{"path": None, "value": None, "reason": _measure_fix(ctx.request.backend)}]
        return _outcome(ctx, ended, _result(ended, UNMEASURED, memory, reason), "memory_not_measured", fixes)
    return _outcome(ctx, ended, _result(ended, "fit", memory, timing))


def _measure_fix(backend: str) -> str:
    if backend == "reference":
        return ("check the trial's outputs/reference_memory.json: the reference trainer reports its peaks there "
                "when it completes")
    if backend == "simulated":
        return "give the surface point a peak_vram_gb (and validation_peak_vram_gb)"
    return ("let the engine sample GPU memory: install pynvml (NVML), or pass --nvidia-smi PATH to a working "
            "nvidia-smi; check that the trial runs on the probed GPU")


def _result(ended: _Ended, outcome: Any, memory: TrialMemory, reason: str) -> MeasuredTrialResult:
    return MeasuredTrialResult(ended.knobs, outcome, ended.step_time, memory.training.gb, memory.validation.gb,
                               memory.seconds, reason, peak_source=memory.training.source,
                               validation_peak_source=memory.validation.source, memory_note=memory.note,
                               assumed_fit=memory.assumed_fit, order_gb=memory.order_gb)


def _outcome(ctx: Any, ended: _Ended, result: MeasuredTrialResult, failure_kind: str | None = None,
             fixes: list[dict[str, Any]] | None = None) -> TrialOutcome:
    """The outcome, with the memory figures and their sources written beside the trial's log."""
    record = {**result.memory_record(), "host_ram_gb": ended.host,
              "host_ram_source": "process tree RSS (psutil)" if ended.host is not None else None}
    atomic_write(ended.folder / MEMORY_FILE, json.dumps(record, indent=2), root=ctx.workspace)
    return TrialOutcome(result, ended.host, str(ended.log), failure_kind, fixes or [])


def _measured(progress: TrainingProgress, sampler: ResourceSampler, carried: MemoryFigure | None = None,
              pooled_spread: float | None = None) -> bool:
    """Step time known to the stopping rule's precision, and both memory figures taken (or carried)."""
    return (estimate_step_time(progress.clean_step_times(), pooled_spread=pooled_spread).known
            and (carried is not None or bool(progress.validations)) and sampler.peak_gb("training") is not None)


