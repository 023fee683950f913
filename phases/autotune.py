"""Autotune phase: a short sanity trial at full resolution, then an Optuna-recorded sweep for the fastest fit.

Heavy (past the approval gate). Scratch lives under ``<run>/overfit/``: the sanity set (the plan's
most expensive bucket, as many samples as the largest batch size tried; ``preprocessing.sanity_set`` links it
from the latent cache entries of the full set's stage, which it preprocesses first), one folder per trial
(config, outputs, log). The sweep is ``autotune.sweep.Sweep``: ``SweepPlanner`` picks each config
and settles what each result implies (memory is monotone along every knob), ``autotune`` runs
and measures one trial; every trial and pruned config is recorded in the run's Optuna study, from which an
interrupted sweep resumes without re-running finished trials (a trial left running by a dead
engine is stopped and run again once). The study is keyed by what the trials measure (``_sweep_key``),
not by the step count, learning rate or cadence: continuing a finished run reads its sweep back and
runs no trial. A failing baseline stops the run with its classified
failure and fixes. The winner's deltas are patched into every stage config with the reason
"autotune"; ``autotune.log``/``.md``/``.png`` sit in the run folder.

With ``autotune: off`` (``--autotune off``) no trial runs and nothing is patched: the outputs say so in
one field (``off``, the reason) beside the plan's ``baseline`` knobs, with no objective and no predicted
peak, and autotune.md names the baseline trained as is. Whether autotune can run on this machine at
all is the plan's to say (``ltx.autotune.availability``): an approval blocker, never a failed sweep.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ltx_pipeline.autotune import write_off_reports
from ltx_pipeline.autotune.sweep import Sweep
from ltx_pipeline.autotune.trial_runner import largest_stage_config
from ltx_pipeline.engine import PhaseResult
from ltx_pipeline.engine.fingerprint import digest, file_digest
from ltx_pipeline.holdout.plan_section import write_after_autotune
from ltx_pipeline.ltx.autotune import SPACE_KEYS, format_knobs
from ltx_pipeline.ltx.autotune.availability import OFF_REASON
from ltx_pipeline.ltx.config_patch import KNOB_PATHS
from ltx_pipeline.outputs.autotune import AutotuneOutputs
from ltx_pipeline.outputs.config_patch import ConfigPatchOutputs
from ltx_pipeline.outputs.data_check import DataCheckOutputs
from ltx_pipeline.outputs.plan import PlanOutputs
from ltx_pipeline.outputs.probe import ProbeOutputs
from ltx_pipeline.phase_context import LtxContext
from ltx_pipeline.preprocessing.processes import preprocess_span
from ltx_pipeline.preprocessing.sanity_set import prepare_sanity_set

__all__ = ["PHASE"]


class AutotunePhase:
    name = "autotune"
    heavy = True
    outputs_type = AutotuneOutputs

    def gpu_span(self, ctx: LtxContext) -> tuple[int, int]:
        """One GPU per trial (``--autotune-parallel``: that many at once, auto: every free one) and per
        preprocessing rank of its sanity set; a trial is one process, so one GPU is enough to start."""
        choice = ctx.request.autotune_parallel
        visible = len(ctx.output(ProbeOutputs).gpus.gpus)
        trials = visible if choice == "auto" else int(choice)
        low, high = preprocess_span(ctx, 1)
        return (trials if choice != "auto" and trials > 1 else low), max(high, trials)

    def fingerprint(self, ctx: LtxContext) -> dict[str, Any]:
        parts = {"validate": ctx.output_digest("validate"), **_inputs(ctx)}
        if ctx.request.autotune == "off":  # absent when on: every earlier run's fingerprint stays as it was
            parts["autotune"] = "off"
        return parts

    def run(self, ctx: LtxContext) -> PhaseResult[AutotuneOutputs]:
        if ctx.request.autotune == "off":
            off = _off(ctx)
            write_after_autotune(ctx, off)  # plan.md's holdout-loss section: why its seconds stay unknown
            return PhaseResult(off)
        ctx.narrate("Autotune: a short trial at full resolution with the planned config (the baseline), then "
                    "variants of quantization, optimizer, batch size or checkpointing, to find the fastest config "
                    "whose peak VRAM, training or validation, stays under the headroom. Each trial stops once its "
                    "step time and memory are measured; configs a result already settles are not run. Loss is not "
                    "a criterion.")
        sweep = Sweep(ctx, ctx.output(PlanOutputs).recipe, ctx.output(ProbeOutputs))
        sanity_root = prepare_sanity_set(ctx, sweep.max_batch)  # at most the full set's entries, linked
        outputs = sweep.run(sanity_root, digest(_sweep_key(ctx)))
        write_after_autotune(ctx, outputs)  # plan.md's holdout-loss section, with a bound from the measured step
        return PhaseResult(outputs)

    def summary(self, outputs: AutotuneOutputs) -> str:
        if outputs.off:
            return f"off {outputs.off}; no trial ran, the plan's baseline config is trained as is"
        ran = len(outputs.trials)
        change = ", ".join(f"{k}={v}" for k, v in outputs.deltas.items()) or "the baseline kept"
        return (f"{ran} trial(s), {len(outputs.pruned)} pruned; winner {change} "
                f"({outputs.objective or 0.0:.2f}s per optimizer step); study {outputs.study}")


def _off(ctx: LtxContext) -> AutotuneOutputs:
    """Autotune off by the user's choice: no trial, no patch; autotune.md says which baseline trains as is.

    The outputs carry no objective and no predicted peak: nothing was measured, so monitor has no
    memory model to check.
    """
    baseline = {k: ctx.output(PlanOutputs).recipe.knobs[k] for k in SPACE_KEYS}
    ctx.narrate(f"Autotune is off {OFF_REASON}. No trial runs and nothing is patched; training uses the plan's "
                f"baseline config as is, {format_knobs(baseline)}.")
    turn_on = f"ltx-pipeline run --workspace {ctx.workspace} --run {ctx.run_name} --autotune on"
    reports = write_off_reports(ctx.paths.root, ctx.workspace, baseline, reason=OFF_REASON, turn_on=turn_on)
    return AutotuneOutputs(off=OFF_REASON, baseline=baseline, deltas={}, patches=[], reports=reports)


def _inputs(ctx: LtxContext) -> dict[str, Any]:
    """What decides the sweep's results: a study is resumed only when these are unchanged."""
    parts: dict[str, Any] = {"config_patch": ctx.output_digest("config_patch"),
                             "knobs": ctx.output(PlanOutputs).recipe.knobs, "headroom": ctx.request.headroom,
                             "backend": ctx.request.backend,
                             "sanity": ctx.output(DataCheckOutputs).sanity.model_dump(mode="json")}
    # A simulated GPU's trials are read off the surface file (the request requires --surface for one).
    if ctx.backend.capabilities.simulated_gpu is not None and ctx.request.surface:
        parts["surface"] = {"path": ctx.request.surface, "digest": file_digest(Path(ctx.request.surface))}
    return parts


# What a trial overrides or never measures: the step count, the learning rate and its schedule, checkpoint and
# validation cadence, where data and outputs are, the warm start (a trial starts from the base), W&B, the seed,
# the Hub upload at the end of training (a trial uploads nothing);
# and the swept knobs, keyed as the plan's. Everything else in the config can change memory or speed.
_UNMEASURED = ("optimization.steps", "optimization.learning_rate", "optimization.scheduler_type",
               "optimization.scheduler_params", "checkpoints", "validation.interval", "model.load_checkpoint",
               "output_dir", "data.preprocessed_data_root", "wandb", "seed", "hub", *KNOB_PATHS.values())


def _sweep_key(ctx: LtxContext) -> dict[str, Any]:
    """The study's identity: what the trials' measurements depend on, so a sweep is read back, never run
    again, when only the rest changed (raising --steps continues a finished run with no trial).

    The trials' stage config as config_patch made it (the template and its patches, not the live file: a
    hand edit since a trial failed supersedes that trial in the same study), less what a trial overrides
    or never measures.
    """
    stage = str(largest_stage_config(ctx))
    entry = next(c for c in ctx.output(ConfigPatchOutputs).configs if c.config == stage)
    patches = [(r.path, r.new) for r in entry.patches
               if not any(r.path == p or r.path.startswith(p + ".") for p in _UNMEASURED)]
    parts = {k: v for k, v in _inputs(ctx).items() if k != "config_patch"}
    return {**parts, "trial config": {"template": file_digest(Path(entry.template)), "patches": patches}}


PHASE = AutotunePhase()
