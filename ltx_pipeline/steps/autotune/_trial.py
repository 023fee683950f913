"""One autotune trial: its config, its launch, what it measured and how it ended.

Owns the trial config (the planned stage config with short steps, checkpoints off, one step-0
validation pass at the planned dims with few denoising steps, the sanity data and the knobs under
test), the supervised launch through the run's journal, the live follow of its log (step time from
clean steady-state steps only), memory measurement (the engine's own sampler on the ``ltx``
backend; the ``reference`` and ``simulated`` backends' own reports) and the classification of its
outcome for ``SweepPlanner``. Loss is never a success criterion; a NaN loss is a failure.
"""

from __future__ import annotations

import json
import math
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from ltx_pipeline.backends.base import LaunchSpec
from ltx_pipeline.ltx.autotune import TrialResult
from ltx_pipeline.ltx.config_patch import KNOB_PATHS, Patch, apply_patches
from ltx_pipeline.steps.vram_sampler import ResourceSampler, nvidia_smi_reader, nvml_reader
from ltx_pipeline.trainer_log import LogFollower, LogParser, TrainingProgress, classify_failure, read_tail
from ltx_pipeline.workspace import atomic_write

__all__ = ["TrialOutcome", "TrialSettings", "run_trial", "trial_settings", "write_trial_config"]

GIB = 1024**3
_FAILURE_OUTCOMES = {"oom_training": "oom_training", "oom_validation": "oom_validation", "nan_loss": "nan"}


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
        return TrialSettings(steps=7, env={"LTX_REFERENCE_LOG_EVERY": "2"})
    if backend == "simulated":
        return TrialSettings(steps=41)
    return TrialSettings(steps=41, stop_early=True, sample_gpu=True)


@dataclass
class TrialOutcome:
    """What one trial produced: the planner's result plus what the report shows."""

    result: TrialResult
    host_ram_gb: float | None
    log: str
    failure_kind: str | None = None
    fixes: list[dict[str, Any]] = field(default_factory=list)


def write_trial_config(ctx: Any, stage_config: Path, target: Path, *, knobs: dict[str, Any], sanity_root: str,
                       output_dir: Path, settings: TrialSettings, number: int) -> list[dict[str, Any]]:
    """Write the trial config for ``knobs`` from the planned stage config; return the patch records."""
    steps = settings.steps
    patches = [
        Patch("data.preprocessed_data_root", sanity_root, "trial data: the sanity set at the largest bucket"),
        Patch("output_dir", str(output_dir), "trial outputs stay under overfit/"),
        Patch("optimization.steps", steps, "a short trial: enough steady steps to time one"),
        Patch("checkpoints.interval", None, "no intermediate checkpoints in a trial"),
        Patch("validation.interval", steps + 1, "only the step-0 validation pass at the planned dims"),
        Patch("validation.skip_initial_validation", False, "the validation pass's memory is measured"),
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
              gpu_indices: list[int], nvidia_smi: str | None) -> TrialOutcome:
    """Launch the trial, follow it until it is measured or ends, and classify how it went."""
    spec = ctx.backend.train_command(config)
    env = {**spec.env, **settings.env}
    if settings.sample_gpu and gpu_indices:
        # Same indices for nvidia-smi and CUDA: the trial runs on the first planned GPU.
        env.update({"CUDA_DEVICE_ORDER": "PCI_BUS_ID", "CUDA_VISIBLE_DEVICES": str(gpu_indices[0])})
    spec = LaunchSpec(spec.argv, spec.cwd, env)
    folder = config.parent
    log = folder / "train.log"
    values = yaml.safe_load(config.read_text(encoding="utf-8")) or {}
    output_dir = Path(values["output_dir"])
    accumulation = int(values["optimization"].get("gradient_accumulation_steps") or 1)
    reader = None
    if settings.sample_gpu and gpu_indices:
        reader = nvml_reader(gpu_indices[:1]) or nvidia_smi_reader(nvidia_smi, gpu_indices[:1])
    sampler = ResourceSampler(reader)
    progress = TrainingProgress(settings.steps, validation_interval=settings.steps + 1)
    started = time.monotonic()
    handle = ctx.journal.launch("trial", number, spec, log)
    sampler.watch(handle.pid)
    stopped = nan = False
    with sampler:
        follower, parser = LogFollower(log), LogParser()
        while True:
            alive = handle.alive()
            lines, _ = follower.read_new(final=not alive)
            for line in lines:
                progress.feed(parser.feed(line))
            if progress.validations and sampler.label != "training":
                sampler.set_label("training")
            nan = any(not math.isfinite(v) for v in progress.losses.values())
            if alive and (nan or (settings.stop_early and _measured(progress, sampler))):
                ctx.journal.stop(handle)
                stopped = True
                break
            if not alive:
                break
            time.sleep(0.1)
        progress.feed(parser.flush())
    wall = time.monotonic() - started
    if not stopped:
        handle = ctx.journal.settle(handle)
    nan = nan or any(not math.isfinite(v) for v in progress.losses.values())
    record = handle.exit()
    exit_code = None if record is None else record.get("exit_code")
    steady = progress.steady_step_time()
    step_time = steady / accumulation if steady is not None else None
    train_peak, val_peak, seconds = _peaks(ctx.request.backend, output_dir, progress, sampler, wall)
    host = sampler.host_peak_bytes / GIB if sampler.host_peak_bytes else None
    if nan:
        result = TrialResult(knobs, "nan", step_time, train_peak, val_peak, seconds, "loss is NaN")
        return TrialOutcome(result, host, str(log), "nan_loss")
    if stopped or exit_code == 0:
        reason = "" if step_time is not None else "step time not measured (too few clean steps)"
        return TrialOutcome(TrialResult(knobs, "fit", step_time, train_peak, val_peak, seconds, reason), host, str(log))
    failure = classify_failure(exit_code, None if record is None else record.get("signal"), read_tail(log, 200),
                               config=values, initial_validation=True)
    outcome = _FAILURE_OUTCOMES.get(failure.kind, "crash")
    reason = failure.evidence if outcome != "crash" else f"{failure.kind}: {failure.evidence}"
    result = TrialResult(knobs, outcome, step_time, None, None, seconds, reason[:300])  # type: ignore[arg-type]
    fixes = [{"path": f.path, "value": f.value, "reason": f.reason} for f in failure.fix]
    return TrialOutcome(result, host, str(log), failure.kind, fixes)


def _measured(progress: TrainingProgress, sampler: ResourceSampler) -> bool:
    return (progress.steady_step_time() is not None and bool(progress.validations)
            and sampler.peak_gb("training") is not None)


def _peaks(backend: str, output_dir: Path, progress: TrainingProgress, sampler: ResourceSampler,
           wall: float) -> tuple[float | None, float | None, float]:
    """(training peak GB, validation peak GB, trial seconds) from what this backend reports."""
    stats_peak = progress.stats.peak_gpu_memory_gb if progress.stats else None
    if backend == "simulated":
        cost = _read_json(output_dir / "simulated_cost.json") or {}
        train = cost.get("peak_vram_gb") or stats_peak
        return train, cost.get("validation_peak_vram_gb"), float(cost.get("gpu_seconds") or 0.0)
    if backend == "reference":
        report = _read_json(output_dir / "reference_memory.json") or {}
        peaks = report.get("peak_bytes") or {}
        ok = report.get("status") == "completed"
        train = peaks.get("training") / GIB if ok and peaks.get("training") else None
        val = peaks.get("validation") / GIB if ok and peaks.get("validation") else None
        return train, val, wall
    train = _max(sampler.peak_gb("training"), stats_peak)
    return train, sampler.peak_gb("validation"), wall


def _max(*values: float | None) -> float | None:
    known = [v for v in values if v is not None]
    return max(known) if known else None


def _read_json(path: Path) -> dict[str, Any] | None:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
