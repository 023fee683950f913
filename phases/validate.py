"""Validate phase: prove each stage's config will be accepted, fix what has one right answer, build the launch.

First every path each config names: a template placeholder (``/path/to/...``) anywhere, or a model
file, data folder or validation medium that is missing or unreadable, is a problem naming its key and
value, so nothing heavy (no preprocessing) starts on it. The schema goes through the backend (the
trainer's own validator when its environment is synced, else the mirror). Paths are checked strictly,
except the preprocessed-data folder that autotune and train will create (and a chained stage's
warm-start weights): those are re-validated strictly right before each launch. Then the rules
the trainer only meets at runtime (or never): geometry, modalities, buckets vs batch size, zero
batches, the keep_last_n bug, checkpoints without state, quantization in full mode, small
/dev/shm; on the ltx backend also what the real trainer needs of the model files (the Gemma text
encoder matching the checkpoint's generation, the Gemma folder's files, 8-bit Gemma only with CUDA,
``validation.stg_blocks`` within the checkpoint's blocks). Rules with one safe fix are patched
through the config-patch mechanism and recorded; anything else stops the run with every finding
and its fix. The launch command is built and stored here; nothing is launched.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from ltx_pipeline.engine import PhaseResult
from ltx_pipeline.errors import BadConfig, BadRequest
from ltx_pipeline.ltx.config_patch import Patch, apply_patches
from ltx_pipeline.ltx.launch_checks import device_problem, fixes_for
from ltx_pipeline.ltx.launch_plan import LaunchShape, distributed_mode, launch_shape
from ltx_pipeline.ltx.model_files import model_file_fixes
from ltx_pipeline.ltx.trainer_config.view import load_config_view
from ltx_pipeline.outputs.config_patch import ConfigPatchOutputs
from ltx_pipeline.outputs.data_check import DataCheckOutputs, DataStage
from ltx_pipeline.outputs.plan import PlanOutputs
from ltx_pipeline.outputs.probe import ProbeOutputs
from ltx_pipeline.outputs.validate import OtherNode, PatchRecordOutputs, ValidatedStage, ValidateOutputs
from ltx_pipeline.phase_context import LtxContext
from ltx_pipeline.training.nodes import node_launch_printable, rank_zero
from ltx_pipeline.training.resume import refuse_incompatible_checkpoints
from ltx_pipeline.training.validation import (
    LaunchTarget,
    StageValidation,
    runtime_checks,
    stage_launch_target,
    validate_stage,
)
from ltx_pipeline.workspace import atomic_write

__all__ = ["PHASE", "distributed_mode"]


class ValidatePhase:
    name = "validate"
    heavy = False
    outputs_type = ValidateOutputs

    def fingerprint(self, ctx: LtxContext) -> dict[str, Any]:
        # The configs as config_patch wrote them (its outputs), not the live files: validate's own safe
        # fixes and autotune's winner change the files afterwards, and must not make the next resume
        # re-run validate and autotune. Whatever is in a file at launch is validated then.
        parts = {"config_patch": ctx.output_digest("config_patch"), "data_check": ctx.output_digest("data_check"),
                 "gpus": ctx.output(ProbeOutputs).gpu_count, "processes": ctx.request.processes,
                 "backend": ctx.request.backend}
        if ctx.request.nodes > 1:  # absent for one node: every earlier run's fingerprint stays as it was
            parts.update(nodes=ctx.request.nodes, main_ip=ctx.request.main_ip, main_port=ctx.request.main_port)
        return parts

    def run(self, ctx: LtxContext) -> PhaseResult[ValidateOutputs]:
        ctx.narrate("Validating every stage's config against the trainer's schema and the rules it only meets at "
                    "runtime, then building the launch command. Nothing is launched.")
        probe, data = ctx.output(ProbeOutputs), ctx.output(DataCheckOutputs)
        shape = _launch_shape(ctx)
        # More processes than visible GPUs: ranks past the last GPU fail, or pile onto GPU 0 (issue 34).
        if problem := device_problem(backend=ctx.request.backend, slurm=ctx.request.slurm,
                                     processes_per_node=shape.processes, gpu_count=probe.gpu_count,
                                     cuda_visible_devices=os.environ.get("CUDA_VISIBLE_DEVICES")):
            raise BadRequest(*problem)
        # The batch rules count every process of every node; the command is rank 0's (this machine's).
        processes, distributed = shape.total, shape.distributed
        nodes = rank_zero(ctx.request)
        stages: list[ValidatedStage] = []
        problems: list[str] = []
        patches: list[PatchRecordOutputs] = []
        for entry, stage in zip(ctx.output(ConfigPatchOutputs).configs, data.stages, strict=True):
            config = Path(entry.config)
            target = stage_launch_target(probe, data, stage, processes)
            patches += _apply_safe_fixes(ctx, config, target, stage)
            result = _validate(ctx, config, target, stage)
            problems += [f"stage {entry.stage}: {line}" for line in result.problems]
            for check in result.warnings:
                ctx.warn(check.text())
            if not ctx.options.restart_training and entry.output_dir:  # (a record older than it: none)
                _refuse_unresumable(config, Path(entry.output_dir))
            launch = ctx.backend.train_command(config, num_processes=shape.processes, distributed=distributed,
                                               nodes=nodes)
            stages.append(ValidatedStage.model_validate({
                "stage": entry.stage, "config": str(config), "launch": launch.to_record(),
                "checks": [c.line() for c in result.checks],
                "strict_data_root": Path(stage.preprocessed_root).is_dir(), "validator": result.validator,
                "config_sha256": result.validated.sha256 if result.validated else None}))
        if problems:
            report = ctx.paths.root / "validate.md"
            validators = sorted({s.validator for s in stages})
            atomic_write(report, "# Validation\n\nValidated by " + "; ".join(validators) + ".\n\n"
                         + "\n".join(f"- {p}" for p in problems) + "\n", root=ctx.workspace)
            raise BadConfig(f"{len(problems)} config problem(s), first: {problems[0]}", where=str(report),
                            fix="correct run.yaml (or the named field) and run `ltx-pipeline resume`",
                            errors=[(p, p) for p in problems])
        # Several nodes: rank 0's rendezvous and what each other node runs (absent for one node).
        return PhaseResult(ValidateOutputs(
            stages=stages, patches=patches, num_processes=processes, distributed=distributed, launch=shape.words(),
            nodes=nodes.count if nodes else None, processes_per_node=shape.processes if nodes else None,
            main_ip=nodes.main_ip if nodes else None, main_port=nodes.main_port if nodes else None,
            other_nodes=[OtherNode(rank=rank, command=node_launch_printable(ctx.workspace, ctx.run_name, rank, nodes))
                         for rank in range(1, nodes.count)] if nodes else None))

    def summary(self, outputs: ValidateOutputs) -> str:
        fixed = f", {len(outputs.patches)} safe fix(es) patched" if outputs.patches else ""
        validators = sorted({s.validator for s in outputs.stages})
        across = f" on {outputs.node_count} nodes" if outputs.node_count > 1 else ""
        return (f"{len(outputs.stages)} config(s) valid{fixed} (validated by {'; '.join(validators)}); "
                f"launch: {outputs.distributed} x {outputs.num_processes} process(es){across}")


def _launch_shape(ctx: LtxContext) -> LaunchShape:
    """The launch the plan stated (computed once, there); a plan stored before it kept the launch
    (schema version 0) gets it from the same rule, as the plan did then."""
    plan = ctx.output(PlanOutputs)
    if plan.launch is not None:
        return plan.launch
    return launch_shape(backend=ctx.request.backend, gpu_count=ctx.output(ProbeOutputs).gpu_count,
                        requested=ctx.request.processes, training_mode=plan.recipe.training_mode,
                        nodes=ctx.request.nodes)


def _refuse_unresumable(config: Path, output_dir: Path) -> None:
    """A stage with checkpoints it could not resume from is refused here, before any heavy phase."""
    steps = load_config_view(config).optimization.steps
    refuse_incompatible_checkpoints(config, output_dir / "checkpoints", steps)


def _validate(ctx: LtxContext, config: Path, target: LaunchTarget, stage: DataStage) -> StageValidation:
    """Strict when the data folder exists; otherwise relaxed plus strict checks of the model files."""
    return validate_stage(ctx.backend, config, target, strict=Path(stage.preprocessed_root).is_dir(),
                          warm_start_pending=_warm_start_pending(config, stage))


def _warm_start_pending(config: Path, stage: DataStage) -> bool:
    return stage.index > 1 and load_config_view(config).checkpoints.no_resume


def _apply_safe_fixes(ctx: LtxContext, config: Path, target: LaunchTarget,
                      stage: DataStage) -> list[PatchRecordOutputs]:
    checks = runtime_checks(config, target, warm_start_pending=_warm_start_pending(config, stage),
                            model_files=ctx.backend.capabilities.runs_real_trainer)
    fixes = fixes_for(checks) + model_file_fixes(checks)
    if not fixes:
        return []
    text, records = apply_patches(config.read_text(encoding="utf-8"),
                                  [Patch(path, value, f"validate: {reason}") for path, value, reason in fixes])
    atomic_write(config, text, root=ctx.workspace)
    for record in records:
        ctx.warn(f"{config.name}: patched {record.path} {record.old} -> {record.new} ({record.reason})")
    return [PatchRecordOutputs.model_validate(r.to_dict()) for r in records]


PHASE = ValidatePhase()
