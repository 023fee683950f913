"""How a stage's training ended, judged from evidence: finished, detached, stopped, or failed with a fix.

Owns ``completed`` (a stage the evidence says finished is never launched again, whatever an earlier engine
recorded), ``judge`` (a followed trainer's end: its result, or ``RunFailed`` with the failure classified
and its proposed fix written to ``<run>/failure.md`` and ``failure.json``), and the stage's stored
records (``TrainedStage``, ``PendingStage``).
"""

from __future__ import annotations

from pathlib import Path

from ltx_pipeline.checkpoints.discovery import latest_pair
from ltx_pipeline.checkpoints.files import weights_file_name
from ltx_pipeline.engine.journal import ProcessHandle
from ltx_pipeline.errors import RunFailed
from ltx_pipeline.outputs.train import PendingStage, TrainedStage
from ltx_pipeline.probing.gpus import cuda_present
from ltx_pipeline.slurm import job_end_fix
from ltx_pipeline.training.fixes import failure_report
from ltx_pipeline.training.follow import TrainingFollower, log_summary, stop_requested
from ltx_pipeline.training.stage import TrainingStage
from ltx_pipeline.workspace import atomic_write

__all__ = ["completed", "judge", "pending"]


def completed(stage: TrainingStage) -> TrainedStage | None:
    """The stage's result when the evidence says it finished, whatever an earlier engine recorded.

    Finished: the final weights exist and the newest launch is not running, and either its
    supervisor's exit file says 0 or the complete checkpoint pair at the target step is on disk
    (a trainer killed after its last save has nothing left to train). A finished stage is never
    launched again.
    """
    config = stage.view()
    steps = config.optimization.steps
    final = stage.checkpoints / weights_file_name(config.model.training_mode, steps)
    processes = stage.launches()
    if not processes or not final.is_file():
        return None
    last = processes[-1]
    if last.alive():
        return None  # still running: re-attach and follow it to its end
    record = last.exit()
    pair = latest_pair(stage.checkpoints)
    if record is not None and record.get("exit_code") == 0:
        last = stage.ctx.journal.correct_to_exited(last)
    elif pair is None or pair.step < steps:
        return None
    stage.catch_up(processes)
    return _result(stage, last, final, steps, None)


def judge(stage: TrainingStage, handle: ProcessHandle, follower: TrainingFollower,
          resumed_from: int | None) -> TrainedStage:
    """The followed trainer's end, settled in the journal: its result when it exited 0.

    Raises:
        RunFailed: the user stopped it, it exited 0 without its statistics, or it failed (classified, with
            its proposed fix in ``failure.md`` / ``failure.json``; a SLURM job's end says what to change there).
    """
    ctx = stage.ctx
    by_user = stop_requested(handle)
    settled = ctx.journal.settle(handle, stopped_by_user=by_user)
    record = settled.exit()
    if by_user and (record is None or record.get("exit_code") != 0):
        raise RunFailed(f"Training stage {stage.index} was stopped by the user (exit "
                        f"{record['exit_code'] if record else 'unknown'})", where=str(stage.log),
                        fix="`ltx-pipeline resume` continues from the newest checkpoint pair")
    stage.log = Path(handle.log_path)
    if record is not None and record["exit_code"] == 0:
        if follower.progress.stats is None and not log_summary(stage.log)["finished"]:
            raise RunFailed(f"Training stage {stage.index} exited 0 without its statistics block",
                            where=str(stage.log), fix="read the log's end; `ltx-pipeline resume` retries")
        pair = latest_pair(stage.checkpoints)
        (ctx.paths.root / "failure.json").unlink(missing_ok=True)
        step = pair.step if pair else stage.view().optimization.steps
        return _result(stage, settled, pair.weights if pair else None, step, resumed_from)
    code = record["exit_code"] if record else 137  # vanished without a record: killed (SIGKILL)
    signal = record["signal"] if record else 9
    failure, proposal, report = failure_report(stage.log, stage.values(), code, signal, stage.index)
    atomic_write(ctx.paths.root / "failure.md", report, root=ctx.workspace)
    atomic_write(ctx.paths.root / "failure.json", proposal.to_json(), root=ctx.workspace)
    diff = proposal.diff_line()
    fix = (f"`ltx-pipeline resume --apply-fix` applies {diff}; `ltx-pipeline resume` retries as is" if diff
           else f"{failure.fix[0].reason if failure.fix else 'see the log'}; then `ltx-pipeline resume`")
    job = ""
    if record and record.get("slurm_state"):
        job = f"SLURM job {handle.slurm_job} {record['slurm_state']}, "
        fix = job_end_fix(record["slurm_state"]) or fix  # the scheduler ended it: say what to change there
    raise RunFailed(f"Training stage {stage.index} failed ({job}{failure.kind}, exit {code}): {failure.evidence}",
                    where=str(ctx.paths.root / "failure.md"), fix=fix)


def _result(stage: TrainingStage, handle: ProcessHandle, final: Path | None, step: int,
            resumed_from: int | None) -> TrainedStage:
    ctx = stage.ctx
    summary = log_summary(stage.log, lines=60)
    # Where it ran: a CPU run's "Peak GPU memory: 0.00 GB" is no measurement (a job's GPUs are its nodes').
    on_gpu = bool(ctx.request.slurm or not ctx.backend.capabilities.needs_gpu or cuda_present())
    return TrainedStage(
        stage=stage.index, config=str(stage.config), output_dir=str(stage.output_dir), log=str(stage.log),
        pid=handle.pid, launch=handle.printable, final_checkpoint=str(final) if final else None, final_step=step,
        resumed_from=resumed_from, start_step=stage.start_step, peak_gpu_memory_gb=summary["peak_gpu_memory_gb"],
        wandb_url=summary["wandb_url"], steps_per_second=summary["steps_per_second"], on_gpu=on_gpu)


def pending(stage: TrainingStage, handle: ProcessHandle) -> PendingStage:
    """The record of a stage left training detached (``--detach``, or Ctrl-C while following)."""
    return PendingStage(stage=stage.index, pid=handle.pid, log=str(stage.log), launch=handle.printable,
                        output_dir=str(stage.output_dir), slurm_job=handle.slurm_job)
