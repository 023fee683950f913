"""Train phase: preprocess, re-check, launch each stage detached, follow it, judge how it ended.

Stages run in order (a chained stage only after the previous one completed); a stage whose final
checkpoint exists and whose last trainer exited 0 is skipped. A stage past the planned ones continues a
finished training (``--steps`` raised, ``ltx.recipe``): warm-started from the final weights with a fresh
schedule over the extra steps, said as "continuing from step X to N" at its launch. Before a launch: the full dataset is
preprocessed when data_check planned it, and what can change since validate is checked again
(strict schema now that the data exists, a chained stage's warm-start weights, free GPUs, W&B
credentials). A live trainer of the stage is re-attached, never launched twice into one output
dir; a dead one is resumed from its newest complete checkpoint pair. The launch survives the
engine; ``--detach`` returns right after it and Ctrl-C while following detaches. A non-zero exit
is classified and its proposed fix (an exact config diff) written to ``<run>/failure.md`` and
``failure.json``, which ``resume --apply-fix`` applies through the config-patch mechanism.

The phase is a thin front: each stage's work is the ``training`` room's (``training.supervise`` drives
``training.launch``, ``training.relaunch``, ``training.recheck`` and ``training.judge``).
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from ltx_pipeline.engine import PhaseResult
from ltx_pipeline.ltx.recipe import planned_stages
from ltx_pipeline.outputs.config_patch import ConfigPatchOutputs
from ltx_pipeline.outputs.data_check import DataCheckOutputs
from ltx_pipeline.outputs.plan import PlanOutputs
from ltx_pipeline.outputs.train import PendingStage, TrainedStage, TrainOutputs
from ltx_pipeline.outputs.validate import ValidateOutputs
from ltx_pipeline.phase_context import LtxContext
from ltx_pipeline.preprocessing.processes import preprocess_span
from ltx_pipeline.training.stage import TrainingStage, stage_log
from ltx_pipeline.training.supervise import supervise

__all__ = ["PHASE", "stage_log"]


class TrainPhase:
    name = "train"
    heavy = True
    outputs_type = TrainOutputs

    def gpu_span(self, ctx: LtxContext) -> tuple[int, int]:
        """Its preprocessing's ranks on every free GPU, then the trainer's processes (the rest given back); only
        the trainer's when a trainer it launched still runs (``resume`` follows it: nothing is preprocessed)."""
        processes = ctx.output(ValidateOutputs).per_node
        if ctx.journal.live("train") is not None:
            return processes, processes
        return preprocess_span(ctx, processes)

    def fingerprint(self, ctx: LtxContext) -> dict[str, Any]:
        # Upstream outputs only: the train phase's own patches (load_checkpoint, --apply-fix) change the
        # config files, and each launch validates the file as it is then.
        parts = {"validate": ctx.output_digest("validate"), "data_check": ctx.output_digest("data_check")}
        if ctx.has_output("autotune"):
            parts["autotune"] = ctx.output_digest("autotune")
        return parts

    def run(self, ctx: LtxContext) -> PhaseResult[TrainOutputs]:
        validate, patch = ctx.output(ValidateOutputs), ctx.output(ConfigPatchOutputs)
        data_stages = ctx.output(DataCheckOutputs).stages
        total = len(validate.stages)
        recipe_stages = {s.index: s for s in ctx.output(PlanOutputs).recipe.stages}
        planned = planned_stages([asdict(s) for s in recipe_stages.values()])
        results: list[TrainedStage | PendingStage] = []
        restart = ctx.options.restart_training  # for the first unfinished stage only
        for entry, config_entry, data_stage in zip(validate.stages, patch.configs, data_stages, strict=True):
            stage = TrainingStage.of(ctx, entry, config_entry, data_stage, total, restart=restart,
                                     recipe_stage=recipe_stages.get(entry.stage), planned=planned)
            result = supervise(stage)
            restart = restart and not stage.restarted  # a finished stage passes it on to the next one
            results.append(result)
            if isinstance(result, PendingStage):
                return PhaseResult(TrainOutputs(stages=results, stage_count=total), pending=True)
        return PhaseResult(TrainOutputs(stages=results, stage_count=total))

    def summary(self, outputs: TrainOutputs) -> str:
        stages = outputs.stages
        if stages and isinstance(last := stages[-1], PendingStage):
            who = f"SLURM job {last.slurm_job}" if last.slurm_job else f"pid {last.pid}"
            return f"stage {last.stage}/{outputs.stage_count} training detached ({who}); log {last.log}"
        finals = ", ".join(f"stage {s.stage}: step {s.final_step}"
                           + (f" (run step {s.run_final_step})" if s.start_step else "")
                           for s in outputs.trained)
        return f"{len(stages)} stage(s) trained ({finals})"


PHASE = TrainPhase()
