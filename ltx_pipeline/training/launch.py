"""Launching a stage's trainer: settle the last attempt, prepare this one, then start it detached or submit it.

Owns ``launch``: earlier attempts that ended unseen are settled and their log lines caught up; then, in
order, ``--apply-fix``'s diff, the full dataset's preprocessing (a backend that uses real files), the
rechecks (``training.recheck``), the resume, restart or continuation (``training.relaunch``), and last a
strict validation of the config exactly as it is launched, whose digest travels with the launch. The
trainer runs detached on this machine (rank 0 of several nodes says what each other node runs) or as a
SLURM job (``--slurm``: its sbatch script written and submitted, node 0's log followed). Each launch marks
its start in its append-only log and records the offset its own lines begin at.
"""

from __future__ import annotations

import os
import time
from dataclasses import replace
from pathlib import Path

from ltx_pipeline.backends.base import Nodes
from ltx_pipeline.engine.journal import ConfigChangedSinceValidation, ProcessHandle, ValidatedConfig
from ltx_pipeline.errors import Refused
from ltx_pipeline.ltx.audio_choice import preprocess_flags, trained_mode
from ltx_pipeline.ltx.buckets import parse_buckets
from ltx_pipeline.ltx.config_values import config_value
from ltx_pipeline.ltx.hub import require_token
from ltx_pipeline.ltx.modes import get_mode
from ltx_pipeline.outputs.config_patch import ConfigPatchOutputs
from ltx_pipeline.outputs.data_check import DataCheckOutputs
from ltx_pipeline.outputs.plan import PlanOutputs
from ltx_pipeline.outputs.probe import ProbeOutputs
from ltx_pipeline.outputs.validate import ValidateOutputs
from ltx_pipeline.preprocessing.run import preprocess
from ltx_pipeline.slurm import script_path, stage_job, submit_script, write_script
from ltx_pipeline.training.nodes import node_launch_printable, rank_zero
from ltx_pipeline.training.recheck import recheck
from ltx_pipeline.training.relaunch import apply_fix, prepare_resume
from ltx_pipeline.training.stage import TrainingStage, stage_log
from ltx_pipeline.training.validation import stage_launch_target, validate_stage
from ltx_pipeline.yaml_io import load_yaml

__all__ = ["launch"]


def launch(stage: TrainingStage) -> tuple[int | None, ProcessHandle]:
    """Launch (or submit) the stage's trainer once everything before it is done.

    Returns:
        The step a resume continues from (None: from the start or a warm start), and the launch's handle
        with the offset its own log lines start at.

    Raises:
        Refused: the config changed between its validation and the launch.
    """
    ctx, journal = stage.ctx, stage.ctx.journal
    previous = stage.launches()
    for old in previous:
        if old.status == "running":
            record = old.exit()
            how = f"exit code {record['exit_code']}" if record else "killed: no exit record"
            ctx.narrate(f"The stage {stage.index} trainer left detached (pid {old.pid}) ended without finishing "
                        f"({how}): relaunching it.")
            journal.settle(old)
    stage.catch_up(previous)
    if previous and ctx.options.apply_fix:
        apply_fix(stage)
    if stage.data_stage.source == "preprocess" and ctx.backend.capabilities.uses_real_files:
        _preprocess(stage)
    recheck(stage)
    _require_hub_token(stage)
    resumed_from = prepare_resume(stage, retried=bool(previous))
    # Last: every patch (autotune's winner, --apply-fix, load_checkpoint) is in the file now.
    validated = _validate_for_launch(stage)
    attempt = len(previous) + 1
    stage.log = stage_log(ctx.paths.logs, stage.index, stage.planned, attempt=attempt)
    if ctx.request.slurm:
        return resumed_from, _submit(stage, validated, attempt)
    validate = ctx.output(ValidateOutputs)
    nodes = rank_zero(ctx.request)  # several nodes: this machine is rank 0, the others join it
    spec = ctx.backend.train_command(stage.config, distributed=validate.distributed, nodes=nodes,
                                     num_processes=validate.per_node)
    journal.narrow(validate.per_node)  # preprocessing may have used more GPUs than the trainer's processes
    offset = _log_boundary(stage, attempt)
    try:
        launched = journal.launch("train", stage.index, spec, stage.log, validated)
    except ConfigChangedSinceValidation as exc:
        raise _changed(stage, exc) from None
    journal.set_offset(launched, offset)
    ctx.narrate(f"Stage {stage.index}/{stage.total} launched (pid {launched.pid}), log {stage.log}: "
                f"{launched.printable}")
    if nodes is not None:
        _announce_nodes(stage, nodes)
    return resumed_from, replace(launched, log_offset=offset)


def _require_hub_token(stage: TrainingStage) -> None:
    """A stage that uploads at its end needs a token in this engine's environment, which the trainer inherits: a
    ``resume`` from a shell without one is refused before the launch, not after hours of training."""
    values = load_yaml(Path(stage.config).read_text(encoding="utf-8")) or {}
    if config_value(values, "hub.push_to_hub"):
        require_token(str(config_value(values, "hub.hub_model_id")), os.environ)


def _announce_nodes(stage: TrainingStage, nodes: Nodes) -> None:
    """Rank 0 waits at the rendezvous for the others: say (and record) what each other node runs."""
    ctx = stage.ctx
    ctx.narrate(f"Rank 0 of {nodes.count} nodes waits for the others at {nodes.main_ip}:{nodes.main_port}. "
                "Start each other node now (same workspace path on every node):")
    for rank in range(1, nodes.count):
        ctx.narrate(f"  node {rank}: {node_launch_printable(ctx.workspace, ctx.run_name, rank, nodes)}")


def _submit(stage: TrainingStage, validated: ValidatedConfig, attempt: int) -> ProcessHandle:
    """Write this launch's sbatch script, submit it and record the job (``--slurm``); node 0's log is followed."""
    ctx = stage.ctx
    nodes = ctx.request.nodes
    per_node = ctx.output(ValidateOutputs).per_node
    job = stage_job(workspace=ctx.workspace, run_root=ctx.paths.root, run=ctx.run_name, stage=stage.index,
                    stages=stage.total, log=stage.log, nodes=nodes, gpus_per_node=per_node,
                    extra=tuple(ctx.request.slurm_args))
    script, kept = write_script(script_path(ctx.paths.root, stage.log), job, workspace=ctx.workspace)
    if kept is not None:
        ctx.warn(f"{script.name} differed from the script this launch needs (never submitted): kept as {kept}")
    stage.log = Path(str(job.node_log).replace("%n", "0"))
    offset = _log_boundary(stage, attempt)
    try:
        submitted = ctx.journal.submit("train", stage.index, lambda: submit_script(
            script, resume_command=stage.resume_command()), stage.log, validated)
    except ConfigChangedSinceValidation as exc:
        raise _changed(stage, exc) from None
    ctx.journal.set_offset(submitted, offset)
    ctx.narrate(f"Stage {stage.index}/{stage.total} submitted to SLURM as job {submitted.slurm_job} ({nodes} "
                f"node(s) x {per_node} GPU(s)); script {script}; following node 0's log {stage.log}: "
                f"{submitted.printable}")
    return replace(submitted, log_offset=offset)


def _log_boundary(stage: TrainingStage, attempt: int) -> int:
    """Mark a launch in its append-only log; returns the offset its own lines start at."""
    stage.log.parent.mkdir(parents=True, exist_ok=True)
    with stage.log.open("a", encoding="utf-8") as handle:
        handle.write(f"=== ltx-pipeline: launch {attempt} of stage {stage.index} at "
                     f"{time.strftime('%Y-%m-%d %H:%M:%S')} ===\n")
    return stage.log.stat().st_size


def _changed(stage: TrainingStage, exc: Exception) -> Refused:
    return Refused(f"Stage {stage.index} was not launched: {exc}", where=str(stage.config),
                   fix="leave the run's config files alone while it runs; `ltx-pipeline resume` validates "
                       "the config again and launches")


def _preprocess(stage: TrainingStage) -> None:
    ctx, data_stage = stage.ctx, stage.data_stage
    patch, data = ctx.output(ConfigPatchOutputs), ctx.output(DataCheckOutputs)
    mode = trained_mode(get_mode(ctx.request.mode), ctx.output(PlanOutputs).audio)  # video only: no audio gate
    preprocess(ctx, mode=mode, metadata_file=Path(str(data_stage.metadata_file)),  # (source "preprocess": set)
               buckets=parse_buckets(data_stage.buckets), output_dir=Path(data_stage.preprocessed_root),
               stage=stage.index, model_path=patch.model_path, text_encoder_path=patch.text_encoder_path,
               pairing=data.conditions_pairing.model_dump(mode="json") if data.conditions_pairing else None,
               extra_flags=preprocess_flags(mode))


def _validate_for_launch(stage: TrainingStage) -> ValidatedConfig:
    """Validate the config exactly as it will be launched; its digest travels with the launch."""
    ctx = stage.ctx
    target = stage_launch_target(ctx.output(ProbeOutputs), ctx.output(DataCheckOutputs), stage.data_stage,
                                 ctx.output(ValidateOutputs).num_processes)
    result = validate_stage(ctx.backend, stage.config, target, strict=True)
    validated = result.raise_if_failed(f"Stage {stage.index}'s config as it would be launched")
    ctx.journal.event(f"validated {stage.config.name} {validated.sha256[:19]}… by {validated.validator} "
                      f"for {target.processes} process(es)")
    return validated
