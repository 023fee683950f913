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
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

from ltx_pipeline.backends.base import Nodes
from ltx_pipeline.checkpoints.files import final_weights_name, resume_restores
from ltx_pipeline.engine import PhaseResult
from ltx_pipeline.engine.journal import ConfigChangedSinceValidation, ValidatedConfig
from ltx_pipeline.errors import BadInput, Refused, RunFailed
from ltx_pipeline.ltx.audio_choice import trained_mode
from ltx_pipeline.ltx.buckets import parse_buckets
from ltx_pipeline.ltx.config_patch import Patch, apply_patches
from ltx_pipeline.ltx.config_values import config_value
from ltx_pipeline.ltx.modes import get_mode
from ltx_pipeline.ltx.recipe import Stage as RecipeStage
from ltx_pipeline.ltx.recipe import planned_stages
from ltx_pipeline.outputs.config_patch import ConfigPatchOutputs, StageConfig
from ltx_pipeline.outputs.data_check import DataCheckOutputs, DataStage
from ltx_pipeline.outputs.plan import PlanOutputs
from ltx_pipeline.outputs.probe import ProbeOutputs
from ltx_pipeline.outputs.train import PendingStage, TrainedStage, TrainOutputs
from ltx_pipeline.outputs.validate import ValidatedStage, ValidateOutputs
from ltx_pipeline.phase_context import LtxContext
from ltx_pipeline.preprocessing.run import preprocess
from ltx_pipeline.probing import wandb_credentials_resolve
from ltx_pipeline.probing.gpus import cuda_present
from ltx_pipeline.probing.nvidia_smi import nvidia_smi_command
from ltx_pipeline.slurm import job_end_fix, require_queue, script_path, stage_job, submit_script, write_script
from ltx_pipeline.trainer_log import canonical_kind
from ltx_pipeline.training.follow import TrainingFollower, log_summary, stop_requested
from ltx_pipeline.training.nodes import node_launch_printable, rank_zero
from ltx_pipeline.training.resume import (
    check_compatible,
    check_same_settings,
    failure_report,
    latest_pair,
    patch_resume,
    restore_planned_start,
    set_aside,
)
from ltx_pipeline.training.validation import stage_launch_target, validate_stage
from ltx_pipeline.workspace import atomic_write
from ltx_pipeline.yaml_io import load_yaml

__all__ = ["PHASE", "stage_log"]


def stage_log(logs: Path, stage: int, stages: int, attempt: int = 1) -> Path:
    """``logs/train.log`` (chained: ``train.stage-K.log``) for a stage's first launch; a later attempt
    gets its own ``train.attempt-N.log`` (``train.stage-K.attempt-N.log``), so no log is ever rewritten.
    ``stages`` counts the planned stages: one past them continues a finished training (``train.continue-N``)."""
    if stage > stages:
        name = f"train.continue-{stage - stages}"
    else:
        name = "train" if stages == 1 else f"train.stage-{stage}"
    return logs / (f"{name}.log" if attempt <= 1 else f"{name}.attempt-{attempt}.log")


class TrainPhase:
    name = "train"
    heavy = True
    outputs_type = TrainOutputs

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
        results: list[TrainedStage | PendingStage] = []
        restart = ctx.options.restart_training  # for the first unfinished stage only
        for entry, config_entry, data_stage in zip(validate.stages, patch.configs, data_stages, strict=True):
            stage = _Stage(ctx, entry, config_entry, data_stage, total, restart=restart,
                           recipe_stage=recipe_stages.get(entry.stage),
                           planned=planned_stages([asdict(s) for s in recipe_stages.values()]))
            result = stage.run()
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


class _Stage:
    """One stage's launch-or-re-attach, follow and judgement."""

    def __init__(self, ctx: LtxContext, entry: ValidatedStage, config_entry: StageConfig,
                 data_stage: DataStage, total: int, *, restart: bool = False,
                 recipe_stage: RecipeStage | None = None, planned: int | None = None) -> None:
        self.ctx, self.entry, self.data_stage, self.total = ctx, entry, data_stage, total
        self.restart, self.restarted = restart, False
        self.index = entry.stage
        self.planned = planned or total
        # A continuation of a finished training: the run's step its trainer's step 0 stands for (ltx.recipe).
        self.start_step = recipe_stage.start_step if recipe_stage else 0
        self.config = Path(entry.config)
        self.config_entry = config_entry
        self.output_dir = Path(str(config_entry.output_dir))  # (recorded by every config_patch that can train)
        launches = ctx.journal.processes("train", self.index)
        # The log of the newest launch (the one to follow or judge); a new launch gets the next name.
        self.log = Path(launches[-1].log_path) if launches else stage_log(ctx.paths.logs, self.index, self.planned)

    def values(self) -> dict[str, Any]:
        return load_yaml(self.config.read_text(encoding="utf-8")) or {}

    def run(self) -> TrainedStage | PendingStage:
        ctx, journal = self.ctx, self.ctx.journal
        launches = journal.processes("train", self.index)
        if launches and launches[-1].slurm_job is not None and launches[-1].status == "running":
            # Whether the job still runs decides between following it and submitting another: never guessed.
            require_queue(launches[-1].slurm_job, self._resume_command())
        if (done := self._completed()) is not None:
            ctx.narrate(f"Stage {self.index}/{self.total} already trained to step {done.final_step}; skipping.")
            return done
        handle = journal.live("train", self.index)
        resumed_from = None
        if handle is not None and handle.slurm_job is not None:
            ctx.narrate(f"Re-attaching to SLURM job {handle.slurm_job} of stage {self.index}, still in the queue; "
                        f"nothing is submitted. Following node 0's log {handle.log_path}.")
        elif handle is not None:
            ctx.narrate(f"Re-attaching to the stage {self.index} trainer that is still running (pid {handle.pid}); "
                        "nothing is launched.")
        else:
            resumed_from, handle = self._launch()
        if ctx.options.detach:
            ctx.narrate(f"Training goes on detached ({_who(handle)}); follow it with `ltx-pipeline resume`, "
                        "check it with `ltx-pipeline status`, stop it with `ltx-pipeline stop`.")
            return self._pending(handle)
        values = self.values()
        follower = TrainingFollower(journal, handle, stage=self.index, stages=self.total, output_dir=self.output_dir,
                                    validation_interval=(values.get("validation") or {}).get("interval"),
                                    checkpoint_interval=(values.get("checkpoints") or {}).get("interval"),
                                    on_progress=ctx.reporter.on_progress if ctx.reporter.shows_progress else None,
                                    warn=ctx.warn)
        if resumed_from is None:
            follower.seed(journal.metrics(self.index))
        try:
            follower.follow()
        except KeyboardInterrupt:
            ctx.narrate(f"Stopped following; stage {self.index} keeps training ({_who(handle)}). Re-attach with "
                        "`ltx-pipeline resume`, stop it with `ltx-pipeline stop`.")
            return self._pending(handle)
        return self._judge(handle, follower, resumed_from)

    # -- before the launch --------------------------------------------------------------------------

    def _launch(self) -> tuple[int | None, Any]:
        ctx, journal = self.ctx, self.ctx.journal
        previous = journal.processes("train", self.index)
        for old in previous:
            if old.status == "running":
                record = old.exit()
                how = f"exit code {record['exit_code']}" if record else "killed: no exit record"
                ctx.narrate(f"The stage {self.index} trainer left detached (pid {old.pid}) ended without finishing "
                            f"({how}): relaunching it.")
                journal.settle(old)
        self._catch_up(previous)
        if previous and ctx.options.apply_fix:
            self._apply_fix()
        if self.data_stage.source == "preprocess" and ctx.request.backend != "simulated":
            self._preprocess()
        self._recheck()
        resumed_from = self._prepare_resume(bool(previous))
        # Last: every patch (autotune's winner, --apply-fix, load_checkpoint) is in the file now.
        validated = self._validate_for_launch()
        validate = ctx.output(ValidateOutputs)
        self.log = stage_log(ctx.paths.logs, self.index, self.planned, attempt=len(previous) + 1)
        if ctx.request.slurm:
            return resumed_from, self._submit(validated, len(previous) + 1)
        nodes = rank_zero(ctx.request)  # several nodes: this machine is rank 0, the others join it
        spec = ctx.backend.train_command(self.config, distributed=validate.distributed, nodes=nodes,
                                         num_processes=validate.per_node)
        offset = self._log_boundary(self.log, len(previous) + 1)
        try:
            launched = journal.launch("train", self.index, spec, self.log, validated)
        except ConfigChangedSinceValidation as exc:
            raise self._changed(exc) from None
        journal.set_offset(launched, offset)
        ctx.narrate(f"Stage {self.index}/{self.total} launched (pid {launched.pid}), log {self.log}: "
                    f"{launched.printable}")
        if nodes is not None:
            self._announce_nodes(nodes)
        return resumed_from, replace(launched, log_offset=offset)

    def _announce_nodes(self, nodes: Nodes) -> None:
        """Rank 0 waits at the rendezvous for the others: say (and record) what each other node runs."""
        ctx = self.ctx
        ctx.narrate(f"Rank 0 of {nodes.count} nodes waits for the others at {nodes.main_ip}:{nodes.main_port}. "
                    "Start each other node now (same workspace path on every node):")
        for rank in range(1, nodes.count):
            ctx.narrate(f"  node {rank}: {node_launch_printable(ctx.workspace, ctx.run_name, rank, nodes)}")

    def _submit(self, validated: ValidatedConfig, attempt: int) -> Any:
        """Write this launch's sbatch script, submit it and record the job (``--slurm``); node 0's log is followed."""
        ctx = self.ctx
        nodes = ctx.request.nodes
        per_node = ctx.output(ValidateOutputs).per_node
        job = stage_job(workspace=ctx.workspace, run_root=ctx.paths.root, run=ctx.run_name, stage=self.index,
                        stages=self.total, log=self.log, nodes=nodes, gpus_per_node=per_node,
                        extra=tuple(ctx.request.slurm_args))
        script, kept = write_script(script_path(ctx.paths.root, self.log), job, workspace=ctx.workspace)
        if kept is not None:
            ctx.warn(f"{script.name} differed from the script this launch needs (never submitted): kept as {kept}")
        self.log = Path(str(job.node_log).replace("%n", "0"))
        offset = self._log_boundary(self.log, attempt)
        try:
            submitted = ctx.journal.submit("train", self.index, lambda: submit_script(
                script, resume_command=self._resume_command()), self.log, validated)
        except ConfigChangedSinceValidation as exc:
            raise self._changed(exc) from None
        ctx.journal.set_offset(submitted, offset)
        ctx.narrate(f"Stage {self.index}/{self.total} submitted to SLURM as job {submitted.slurm_job} ({nodes} "
                    f"node(s) x {per_node} GPU(s)); script {script}; following node 0's log {self.log}: "
                    f"{submitted.printable}")
        return replace(submitted, log_offset=offset)

    def _log_boundary(self, log: Path, attempt: int) -> int:
        """Mark a launch in its append-only log; returns the offset its own lines start at."""
        log.parent.mkdir(parents=True, exist_ok=True)
        with log.open("a", encoding="utf-8") as handle:
            handle.write(f"=== ltx-pipeline: launch {attempt} of stage {self.index} at "
                         f"{time.strftime('%Y-%m-%d %H:%M:%S')} ===\n")
        return log.stat().st_size

    def _changed(self, exc: Exception) -> Refused:
        return Refused(f"Stage {self.index} was not launched: {exc}", where=str(self.config),
                       fix="leave the run's config files alone while it runs; `ltx-pipeline resume` validates "
                           "the config again and launches")

    def _resume_command(self) -> str:
        return f"ltx-pipeline resume --workspace {self.ctx.workspace} --run {self.ctx.run_name}"

    def _catch_up(self, launches: list[Any]) -> None:
        """Record what earlier launches logged after their last follower stopped reading.

        A trainer nobody followed (launched by `resume --detach`, or followed by an engine that was
        killed) still wrote its steps; they are read from the stored offset before the next launch
        or the finished stage's result, so no step of any attempt is missing from the metrics.
        """
        for old in launches:
            if old.alive():
                continue
            TrainingFollower(self.ctx.journal, old, stage=self.index, stages=self.total,
                             output_dir=self.output_dir).poll()

    def _preprocess(self) -> None:
        ctx, stage = self.ctx, self.data_stage
        patch, data = ctx.output(ConfigPatchOutputs), ctx.output(DataCheckOutputs)
        mode = trained_mode(get_mode(ctx.request.mode), ctx.output(PlanOutputs).audio)  # video only: no audio gate
        preprocess(ctx, mode=mode, metadata_file=Path(str(stage.metadata_file)),  # (source "preprocess": set)
                   buckets=parse_buckets(stage.buckets), output_dir=Path(stage.preprocessed_root),
                   stage=self.index, model_path=patch.model_path, text_encoder_path=patch.text_encoder_path,
                   pairing=data.conditions_pairing.model_dump(mode="json") if data.conditions_pairing else None,
                   extra_flags=[])

    def _validate_for_launch(self) -> ValidatedConfig:
        """Validate the config exactly as it will be launched; its digest travels with the launch."""
        ctx = self.ctx
        target = stage_launch_target(ctx.output(ProbeOutputs), ctx.output(DataCheckOutputs), self.data_stage,
                                     ctx.output(ValidateOutputs).num_processes)
        result = validate_stage(ctx.backend, self.config, target, strict=True)
        validated = result.raise_if_failed(f"Stage {self.index}'s config as it would be launched")
        ctx.journal.event(f"validated {self.config.name} {validated.sha256[:19]}… by {validated.validator} "
                          f"for {target.processes} process(es)")
        return validated

    def _recheck(self) -> None:
        ctx, values = self.ctx, self.values()
        warm = (values.get("model") or {}).get("load_checkpoint")
        if self.index > 1 and (values.get("checkpoints") or {}).get("no_resume") and warm and not Path(warm).exists():
            raise RunFailed(f"Stage {self.index} warm-starts from {warm}, which does not exist",
                            where=str(self.config), fix="let the previous stage finish (`ltx-pipeline resume`)")
        if ctx.request.backend == "ltx" and not ctx.request.slurm:  # a job's GPUs are on its nodes, not here
            if cuda_present():
                _check_gpus_free(ctx.request.nvidia_smi)
            else:  # nothing to be busy; and the user should know the real trainer will not see the assumed GPU
                ctx.warn("No NVIDIA GPU on this machine: the trainer runs on the CPU (the plan's GPU was assumed "
                         "with --assume-gpu); expect it to be slow, and no GPU memory figure in its statistics.")
        if (values.get("wandb") or {}).get("enabled") and not wandb_credentials_resolve():
            raise BadInput("wandb.enabled is true but no W&B credentials resolve", where=str(self.config),
                           fix="run `wandb login` (or export WANDB_API_KEY), or set wandb.enabled: false")

    def _prepare_resume(self, retried: bool) -> int | None:
        if self.start_step and not retried and not self.restart:
            self._announce_continuation()
            return None
        if self.restart:
            kept = set_aside(self.output_dir, workspace=self.ctx.workspace)
            for record in restore_planned_start(self.config, self._planned_start(), workspace=self.ctx.workspace):
                self.ctx.narrate(f"{self.config.name}: {record['path']} {record['old']} -> {record['new']} "
                                 f"({record['reason']})")
            self.ctx.journal.forget_stage(self.index)  # its metrics and checkpoints are the old training's
            self.restarted = True
            if kept is not None:
                self.ctx.narrate(f"--restart-training: stage {self.index} trains again from step 0 into "
                                 f"{self.output_dir}; its previous outputs are kept in {kept}.")
            return None
        pair = latest_pair(self.output_dir / "checkpoints")
        if pair is None:
            if retried:
                self.ctx.narrate(f"Stage {self.index} has no complete checkpoint pair yet: relaunching from the start.")
            return None
        step = check_compatible(pair, self.values())
        if not self.ctx.options.apply_fix:  # a fix the user applied is a setting they chose to change
            check_same_settings(pair, self.values(), self.output_dir)
        for record in patch_resume(self.config, pair, workspace=self.ctx.workspace):
            self.ctx.narrate(f"{self.config.name}: {record['path']} {record['old']} -> {record['new']} "
                             f"({record['reason']})")
        self.ctx.narrate(f"Stage {self.index} resumes from its checkpoint at step {step} ({pair.weights.name}); "
                         + resume_restores((self.values().get("checkpoints") or {}).get("save_training_state")))
        return step

    def _planned_start(self) -> dict[str, Any]:
        """How config_patch made this stage start: its recorded warm start, else the template's values."""
        template = Path(self.config_entry.template)
        values = load_yaml(template.read_text(encoding="utf-8")) if template.is_file() else {}
        planned = {path: config_value(values or {}, path) for path in ("model.load_checkpoint",
                                                                       "checkpoints.no_resume")}
        for record in self.config_entry.patches:
            if record.path in planned:
                planned[record.path] = record.new
        return planned

    def _announce_continuation(self) -> None:
        """Say what a continuation's first launch does: the issue's words, and the trainer's own numbers."""
        values = self.values()
        steps = int((values.get("optimization") or {}).get("steps") or 0)
        rate = (values.get("optimization") or {}).get("learning_rate")
        warm = (values.get("model") or {}).get("load_checkpoint")
        self.ctx.narrate(f"Stage {self.index}/{self.total}: continuing from step {self.start_step} to "
                         f"{self.start_step + steps}, warm-started from {warm} with a fresh "
                         f"{(values.get('optimization') or {}).get('scheduler_type') or 'linear'} schedule over "
                         f"the {steps} extra steps from learning rate {rate} (the trainer counts them 1-{steps}).")

    def _apply_fix(self) -> None:
        ctx, record_file = self.ctx, self.ctx.paths.root / "failure.json"
        proposal = json.loads(record_file.read_text(encoding="utf-8")) if record_file.is_file() else None
        if proposal is None or proposal.get("stage") != self.index:
            ctx.narrate("--apply-fix: no proposed fix is recorded for this stage; retrying as is.")
            return
        if not proposal["diff"]:
            ctx.narrate(f"--apply-fix: the last failure ({canonical_kind(proposal['kind'])}) has no config diff; "
                        "retrying as is.")
        else:
            text, records = apply_patches(self.config.read_text(encoding="utf-8"),
                                          [Patch(c["path"], c["new"], f"fix: {canonical_kind(proposal['kind'])}")
                                           for c in proposal["diff"]])
            atomic_write(self.config, text, root=ctx.workspace)
            for record in records:
                ctx.warn(f"{self.config.name}: patched {record.path} {record.old} -> {record.new} ({record.reason})")
        record_file.unlink()

    # -- after the trainer ended --------------------------------------------------------------------

    def _completed(self) -> TrainedStage | None:
        """The stage's result when the evidence says it finished, whatever an earlier engine recorded.

        Finished: the final weights exist and the newest launch is not running, and either its
        supervisor's exit file says 0 or the complete checkpoint pair at the target step is on disk
        (a trainer killed after its last save has nothing left to train). A finished stage is never
        launched again.
        """
        values = self.values()
        steps = int((values.get("optimization") or {}).get("steps", 0))
        final = self.output_dir / "checkpoints" / final_weights_name(values)
        processes = self.ctx.journal.processes("train", self.index)
        if not processes or not final.is_file():
            return None
        last = processes[-1]
        if last.alive():
            return None  # still running: re-attach and follow it to its end
        record = last.exit()
        pair = latest_pair(self.output_dir / "checkpoints")
        if (record or {}).get("exit_code") == 0:
            last = self.ctx.journal.correct_to_exited(last)
        elif pair is None or pair.step < steps:
            return None
        self._catch_up(processes)
        return self._result(last, final, steps, None)

    def _judge(self, handle: Any, follower: TrainingFollower, resumed_from: int | None) -> TrainedStage:
        journal = self.ctx.journal
        by_user = stop_requested(handle)
        settled = journal.settle(handle, stopped_by_user=by_user)
        record = settled.exit()
        if by_user and (record or {}).get("exit_code") != 0:
            raise RunFailed(f"Training stage {self.index} was stopped by the user (exit "
                            f"{record['exit_code'] if record else 'unknown'})", where=str(self.log),
                            fix="`ltx-pipeline resume` continues from the newest checkpoint pair")
        stats = follower.progress.stats
        self.log = Path(handle.log_path)
        if record is not None and record["exit_code"] == 0:
            if stats is None and not log_summary(self.log)["finished"]:
                raise RunFailed(f"Training stage {self.index} exited 0 without its statistics block",
                                where=str(self.log), fix="read the log's end; `ltx-pipeline resume` retries")
            steps = int(self.values()["optimization"]["steps"])
            pair = latest_pair(self.output_dir / "checkpoints")
            final = pair.weights if pair else None
            (self.ctx.paths.root / "failure.json").unlink(missing_ok=True)
            return self._result(settled, final, pair.step if pair else steps, resumed_from)
        code = record["exit_code"] if record else 137  # vanished without a record: killed (SIGKILL)
        signal = record["signal"] if record else 9
        failure, proposal, report = failure_report(self.log, self.values(), code, signal, self.index)
        atomic_write(self.ctx.paths.root / "failure.md", report, root=self.ctx.workspace)
        atomic_write(self.ctx.paths.root / "failure.json", json.dumps(proposal, indent=2), root=self.ctx.workspace)
        diff = "; ".join(f"{c['path']}: {c['old']} -> {c['new']}" for c in proposal["diff"])
        fix = (f"`ltx-pipeline resume --apply-fix` applies {diff}; `ltx-pipeline resume` retries as is" if diff
               else f"{failure.fix[0].reason if failure.fix else 'see the log'}; then `ltx-pipeline resume`")
        job = ""
        if record and record.get("slurm_state"):
            job = f"SLURM job {handle.slurm_job} {record['slurm_state']}, "
            fix = job_end_fix(record["slurm_state"]) or fix  # the scheduler ended it: say what to change there
        raise RunFailed(f"Training stage {self.index} failed ({job}{failure.kind}, exit {code}): {failure.evidence}",
                        where=str(self.ctx.paths.root / "failure.md"), fix=fix)

    def _result(self, handle: Any, final: Path | None, step: int, resumed_from: int | None) -> TrainedStage:
        summary = log_summary(self.log, lines=60)
        return TrainedStage(
            stage=self.index, config=str(self.config), output_dir=str(self.output_dir), log=str(self.log),
            pid=handle.pid, launch=handle.printable, final_checkpoint=str(final) if final else None, final_step=step,
            resumed_from=resumed_from, start_step=self.start_step, peak_gpu_memory_gb=summary["peak_gpu_memory_gb"],
            wandb_url=summary["wandb_url"], steps_per_second=summary["steps_per_second"],
            # Where it ran: a CPU run's "Peak GPU memory: 0.00 GB" is no measurement (a job's GPUs are its nodes').
            on_gpu=bool(self.ctx.request.slurm or self.ctx.request.backend != "ltx" or cuda_present()))

    def _pending(self, handle: Any) -> PendingStage:
        return PendingStage(stage=self.index, pid=handle.pid, log=str(self.log), launch=handle.printable,
                            output_dir=str(self.output_dir), slurm_job=handle.slurm_job)


def _who(handle: Any) -> str:
    return f"SLURM job {handle.slurm_job}" if handle.slurm_job is not None else f"pid {handle.pid}"


def _check_gpus_free(executable: str | None) -> None:
    """Refuse to launch while another process holds GPU memory (more than a CUDA context's worth).

    Raises:
        Refused: a GPU is busy, named with its memory in use.
    """
    import subprocess

    exe = nvidia_smi_command(executable)
    try:
        done = subprocess.run([exe, "--query-gpu=index,memory.used", "--format=csv,noheader,nounits"],  # noqa: S603
                              capture_output=True, text=True, timeout=20, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise Refused(f"Cannot check that the GPUs are free: {exc}", where=exe,
                      fix="make nvidia-smi work (or pass --nvidia-smi), then `ltx-pipeline resume`") from None
    busy = []
    for line in done.stdout.splitlines():
        fields = [f.strip() for f in line.split(",")]
        if len(fields) == 2 and fields[1].isdigit() and int(fields[1]) > _BUSY_MIB:
            busy.append(f"GPU {fields[0]} has {fields[1]} MiB in use")
    if done.returncode != 0 or busy:
        raise Refused("The GPUs are not free: " + ("; ".join(busy) or done.stderr.strip()[:200]), where=exe,
                      fix="stop the other processes on them (see nvidia-smi), then `ltx-pipeline resume`")


_BUSY_MIB = 1024  # more than an idle CUDA context: someone else's model or a leftover trainer


PHASE = TrainPhase()
