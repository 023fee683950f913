"""One autotune trial as the driver and every autotune worker run it: config, validation, launch, record.

``TrialRunner`` writes ``<run>/overfit/trial-NNN/config.yaml`` from the stage config that trains the
plan's most expensive bucket, validates it like any launch, runs it with ``autotune.run_trial``
and returns the outcome with the attributes the study keeps. What earlier trials measured shapes a
trial (``records``, in the sweep's record format): once two clean lines gave the step-time spread,
later trials may stop at one line; a trial with the quantization of one whose step-0 validation was
measured carries that figure instead of validating again.
"""

from __future__ import annotations

import time
from dataclasses import replace
from pathlib import Path
from typing import Any

# Inside the package: its own modules directly, not the package door (which outsiders use).
from ltx_pipeline.autotune._peaks import MemoryFigure
from ltx_pipeline.autotune._trial import (
    TrialOutcome,
    TrialSettings,
    run_trial,
    trial_settings,
    write_trial_config,
)
from ltx_pipeline.engine.fingerprint import file_digest
from ltx_pipeline.engine.journal import ValidatedConfig
from ltx_pipeline.ltx.autotune import PRECISION, format_knobs, validation_key
from ltx_pipeline.outputs.config_patch import ConfigPatchOutputs
from ltx_pipeline.outputs.data_check import DataCheckOutputs
from ltx_pipeline.outputs.plan import PlanOutputs
from ltx_pipeline.outputs.probe import ProbeOutputs
from ltx_pipeline.phase_context import LtxContext
from ltx_pipeline.training.validation import LaunchTarget, validate_stage

__all__ = ["ONE_LINE_STEPS", "TrialRunner", "largest_stage_config"]

# One clean Step line (the trainer logs every 20 steps): what a trial after the first needs once the
# sweep knows the spread of step times on this machine.
ONE_LINE_STEPS = 21


class TrialRunner:
    """Runs trials of one sweep on this host.

    Args:
        sanity_root: the sanity set the trials train on (the driver's, shared with the workers).
        max_batch: the largest batch size of the space (how many sanity samples a trial may read).
        gpu_indices: this host's GPUs (a trial runs on the first).
        capacity_gb: per-GPU memory (part of a failure's environment).
    """

    def __init__(self, ctx: LtxContext, *, sanity_root: str, max_batch: int, gpu_indices: list[int],
                 capacity_gb: float) -> None:
        self.ctx = ctx
        self.sanity_root = sanity_root
        self.max_batch = max_batch
        self.gpu_indices = gpu_indices
        self.capacity = capacity_gb
        self.settings = trial_settings(ctx.request.backend)
        self.stage_config = largest_stage_config(ctx)

    def run(self, knobs: dict[str, Any], number: int, records: list[dict[str, Any]], *,
            gpus: tuple[int, ...] | None = None) -> tuple[TrialOutcome, dict[str, Any]]:
        """Run trial ``number`` with ``knobs``; return its outcome and the attributes the study keeps.

        ``gpus``: the trial's own GPU slot (``autotune.slots``), made its process's ``CUDA_VISIBLE_DEVICES``
        and recorded with it; None: this host's GPUs, the first used (one trial at a time).
        """
        ctx = self.ctx
        folder = ctx.paths.overfit / f"trial-{number:03d}"
        config = folder / "config.yaml"
        source, carried = carried_validation(records, knobs)
        spread, settings = self.timing(records)
        if gpus is not None:  # physical indices, as the probe and nvidia-smi number them
            settings = replace(settings, env={**settings.env, "CUDA_DEVICE_ORDER": "PCI_BUS_ID",
                                              "CUDA_VISIBLE_DEVICES": ",".join(map(str, gpus))})
        write_trial_config(ctx, self.stage_config, config, knobs=knobs, sanity_root=self.sanity_root,
                           output_dir=folder / "outputs", settings=settings, number=number, validation_from=source)
        validated = self._validate(config, knobs)
        ctx.narrate(f"Trial {number}: {format_knobs(knobs)} ..." + (
            f" (no validation pass: its memory is trial {source}'s, same quantization)" if carried else ""))
        started = time.time()
        done = run_trial(ctx, number, config, knobs, settings, gpu_indices=list(gpus or self.gpu_indices),
                         nvidia_smi=ctx.request.nvidia_smi, validated=validated, carried_validation=carried,
                         pooled_spread=spread)
        extra = {"trial_number": number, "host_ram_gb": done.host_ram_gb, "log": done.log,
                 "step_spread": done.step_spread, "failure_kind": done.failure_kind, "fixes": done.fixes,
                 "environment": self.environment(),
                 **({"gpus": list(gpus), "started_at": started, "ended_at": time.time()} if gpus else {})}
        return done, extra

    def timing(self, records: list[dict[str, Any]]) -> tuple[float | None, TrialSettings]:
        """The step-time spread earlier trials measured, and this trial's settings.

        The spread is the machine's and the trainer's, not a config's: once a trial has timed two clean
        lines, later trials may rest on one (``ltx.autotune.estimate_step_time``). A backend whose
        trials run to their end (the figures come at exit) then runs one logged line's worth of steps.
        """
        spreads = [t["step_spread"] for t in records if t.get("step_spread") is not None]
        spread = max(spreads) if spreads else None
        if spread is None or 1.96 * spread > PRECISION or self.settings.stop_early:
            return spread, self.settings
        return spread, replace(self.settings, steps=ONE_LINE_STEPS)

    def environment(self) -> dict[str, Any]:
        """What a trial's failure may depend on besides its knobs: the stage config it was derived
        from, the host's /dev/shm and the GPUs' memory."""
        host = self.ctx.output(ProbeOutputs).host
        return {"stage_config": file_digest(self.stage_config), "shm_bytes": host.shm_total_bytes,
                "gpu_memory_gb": round(self.capacity, 2)}

    def _validate(self, config: Path, knobs: dict[str, Any]) -> ValidatedConfig:
        """A trial runs one process on the sanity set; its config is validated like any launch."""
        ctx = self.ctx
        data = ctx.output(DataCheckOutputs)
        rows = max(1, min(self.max_batch, data.samples or self.max_batch))
        target = LaunchTarget(stage=0, buckets=data.sanity.bucket, processes=1, dataset_samples=rows,
                              shm_bytes=ctx.output(ProbeOutputs).host.shm_total_bytes)
        result = validate_stage(ctx.backend, config, target, strict=ctx.request.backend != "simulated")
        return result.raise_if_failed(f"The trial config for {format_knobs(knobs)}")


def carried_validation(records: list[dict[str, Any]], knobs: dict[str, Any]) -> tuple[int | None,
                                                                                       MemoryFigure | None]:
    """An earlier trial's measured step-0 validation figure that holds for ``knobs`` too.

    Validation memory depends on the quantization alone among the swept knobs
    (``ltx.autotune.VALIDATION_KNOBS`` gives the argument), so a trial with the same quantization
    as one whose validation was measured skips its own pass: one validation per quantization.
    """
    for record in records:
        if (record.get("from_prior") or record.get("validation_peak_vram_gb") is None
                or validation_key(record["knobs"]) != validation_key(knobs) or record.get("number") is None):
            continue
        source = record.get("validation_peak_source") or "measured"
        if not source.startswith("carried from"):
            source = f"carried from trial {record['number']} ({source})"
        return int(record["number"]), MemoryFigure(float(record["validation_peak_vram_gb"]), source)
    return None, None


def largest_stage_config(ctx: LtxContext) -> Path:
    """The stage config that trains the plan's most expensive bucket (it sets the memory peak)."""
    bucket = ctx.output(DataCheckOutputs).sanity.bucket
    stages = ctx.output(PlanOutputs).recipe.stages
    configs = {c.stage: Path(c.config) for c in ctx.output(ConfigPatchOutputs).configs}
    index = next((s.index for s in stages if bucket in s.buckets), stages[0].index)
    return configs[index]
