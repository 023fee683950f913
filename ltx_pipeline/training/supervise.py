"""One stage from start to end: skip it when finished, re-attach to a live trainer or launch one, follow, judge.

Owns ``supervise``, what the train phase does for each stage. A live trainer of the stage (a process, or a
SLURM job still in the queue) is re-attached, never launched twice into one output dir; whether a recorded
job still runs is asked of the queue, never guessed. ``--detach`` returns right after the launch, and
Ctrl-C while following detaches: the trainer keeps training either way.
"""

from __future__ import annotations

from ltx_pipeline.outputs.train import PendingStage, TrainedStage
from ltx_pipeline.slurm import require_queue
from ltx_pipeline.training.follow import TrainingFollower
from ltx_pipeline.training.judge import completed, judge, pending
from ltx_pipeline.training.launch import launch
from ltx_pipeline.training.stage import TrainingStage, who

__all__ = ["supervise"]


def supervise(stage: TrainingStage) -> TrainedStage | PendingStage:
    """Train one stage (or find it trained), returning its record; ``PendingStage`` while it trains detached.

    Raises:
        RunFailed: the training failed or was stopped (``training.judge``).
        Refused: the GPUs are busy, or the config changed since it was validated (``training.launch``).
    """
    ctx, journal = stage.ctx, stage.ctx.journal
    launches = stage.launches()
    if launches and launches[-1].slurm_job is not None and launches[-1].status == "running":
        # Whether the job still runs decides between following it and submitting another: never guessed.
        require_queue(launches[-1].slurm_job, stage.resume_command())
    if (done := completed(stage)) is not None:
        ctx.narrate(f"Stage {stage.index}/{stage.total} already trained to step {done.final_step}; skipping.")
        return done
    handle = journal.live("train", stage.index)
    resumed_from = None
    if handle is not None and handle.slurm_job is not None:
        ctx.narrate(f"Re-attaching to SLURM job {handle.slurm_job} of stage {stage.index}, still in the queue; "
                    f"nothing is submitted. Following node 0's log {handle.log_path}.")
    elif handle is not None:
        ctx.narrate(f"Re-attaching to the stage {stage.index} trainer that is still running (pid {handle.pid}); "
                    "nothing is launched.")
    else:
        resumed_from, handle = launch(stage)
    if ctx.options.detach:
        ctx.narrate(f"Training goes on detached ({who(handle)}); follow it with `ltx-pipeline resume`, "
                    "check it with `ltx-pipeline status`, stop it with `ltx-pipeline stop`.")
        return pending(stage, handle)
    config = stage.view()
    follower = TrainingFollower(journal, handle, stage=stage.index, stages=stage.total, output_dir=stage.output_dir,
                                total_steps=config.optimization.steps, validation_interval=config.validation.interval,
                                checkpoint_interval=config.checkpoints.interval,
                                on_progress=ctx.reporter.on_progress if ctx.reporter.shows_progress else None,
                                warn=ctx.warn)
    if resumed_from is None:
        follower.seed(journal.metrics(stage.index))
    try:
        follower.follow()
    except KeyboardInterrupt:
        ctx.narrate(f"Stopped following; stage {stage.index} keeps training ({who(handle)}). Re-attach with "
                    "`ltx-pipeline resume`, stop it with `ltx-pipeline stop`.")
        return pending(stage, handle)
    return judge(stage, handle, follower, resumed_from)
