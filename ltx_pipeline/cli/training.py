"""CLI pieces for a training: the ``stop`` command, the live progress bar, the status section.

``stop`` works with no driver running and while one follows the trainer: ``driving.stop`` marks the
process as stopped by the user, then sends SIGINT to the trainer's process group, SIGTERM and SIGKILL
after timeouts; a follower that sees the end reads the mark and records a stop, not a failure.
``TrainingProgressBar`` is the ``on_progress`` callback the train phase feeds while following
(step/total, loss, s/step, ETA). ``render_live`` prints ``status``'s live-training dict.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from ltx_pipeline.cli import Ending
from ltx_pipeline.cli.console import out

if TYPE_CHECKING:
    from rich.console import Console
    from rich.progress import TaskID

    from ltx_pipeline.training.follow import Snapshot

__all__ = ["TrainingProgressBar", "render_live", "stop"]


def stop(workspace: Annotated[Path | None, typer.Option("--workspace", "-w", help="Workspace folder.")] = None,
         run_name: Annotated[str | None, typer.Option("--run", "-r", help="Run name.")] = None,
         interrupt_timeout: Annotated[float, typer.Option(help="Seconds to wait after SIGINT.")] = 30.0,
         terminate_timeout: Annotated[float, typer.Option(help="Seconds to wait after SIGTERM.")] = 15.0) -> Ending:
    """Stop the run's training: SIGINT to its process group, then SIGTERM, then SIGKILL (a SLURM job: scancel)."""
    from ltx_pipeline.driving import stop as stop_run
    from ltx_pipeline.driving import stop_target

    target = stop_target(workspace, run_name)
    handle, name, resume = target.handle, target.run, f"ltx-pipeline resume --workspace {target.workspace} --run"
    if handle is None:
        out.print(f"No trainer of run {name} is running; nothing to stop.", markup=False)
        return Ending.DONE
    if target.kind == "training" and handle.slurm_job is not None:
        out.print(f"Cancelling SLURM job {handle.slurm_job} (stage {handle.stage} of run {name}) with scancel...",
                  markup=False)
    elif target.kind == "training":
        out.print(f"Stopping stage {handle.stage} of run {name} (pid {handle.pid}): SIGINT, then SIGTERM after "
                  f"{interrupt_timeout:g} s, SIGKILL after {terminate_timeout:g} s more...", markup=False)
    stopped = stop_run(target, interrupt_timeout=interrupt_timeout, terminate_timeout=terminate_timeout)
    if target.kind == "render":
        out.print(f"Stopped the evaluation render of run {name} (pid {handle.pid}). `{resume} {name}` renders what "
                  "is missing.", markup=False)
    elif stopped.ended_on_its_own:  # the signal was on its way (or the trainer ignored it): say so
        out.print(f"The trainer exited 0 before the stop took effect: it ended on its own. `{resume} {name}` checks "
                  "that it finished and completes the run.", markup=False)
    else:
        out.print(f"Stopped ({stopped.how}). Continue from the newest checkpoint with: {resume} {name}", markup=False)
    return Ending.DONE


class TrainingProgressBar:
    """A rich progress bar fed by the train phase's follower snapshots; ``close()`` when done."""

    def __init__(self, console: Console | None = None) -> None:
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

        # markup=False: a description or info never loses bracketed words to Rich markup.
        self.progress = Progress(TextColumn("{task.description}", markup=False), BarColumn(bar_width=40),
                                 MofNCompleteColumn(), TextColumn("{task.fields[info]}", markup=False),
                                 # Redrawn when the follower reports a change, never by a timer thread: a
                                 # step logged every 20 s needs no redraw in between (Rich's 10 Hz burns CPU).
                                 console=console or out, transient=False, auto_refresh=False)
        self.tasks: dict[int, TaskID] = {}
        self.started = False

    def __call__(self, snapshot: Snapshot) -> None:
        if not self.started:
            self.progress.start()
            self.started = True
        task = self.tasks.get(snapshot.stage)
        if task is None:
            task = self.progress.add_task(f"stage {snapshot.stage}/{snapshot.stages}", total=snapshot.total,
                                          info="starting...")
            self.tasks[snapshot.stage] = task
        # A trainer logs steps every N steps; its statistics block says every step ran, so the bar ends full.
        done = snapshot.total if snapshot.finished and snapshot.total else snapshot.step or 0
        self.progress.update(task, completed=done, total=snapshot.total, info=_info(snapshot), refresh=True)

    def close(self) -> None:
        if self.started:
            self.progress.stop()
            self.started = False


def _info(snapshot: Snapshot) -> str:
    parts = [f"loss {snapshot.loss:.4f}" if snapshot.loss is not None else "loss -"]
    if snapshot.step_time_s:
        parts.append(f"{snapshot.step_time_s:.2f} s/step")
    elif snapshot.alive:
        parts.append("measuring step time...")
    if snapshot.eta_s is not None and snapshot.alive:  # an ended trainer has no time left to estimate
        minutes, seconds = divmod(int(snapshot.eta_s), 60)
        parts.append(f"ETA {minutes // 60}h {minutes % 60:02d}m" if minutes >= 60 else f"ETA {minutes}m {seconds:02d}s")
    if snapshot.stalled:
        parts.append("STALLED")
    if snapshot.finished:
        parts.append("finished")
    elif not snapshot.alive:
        parts.append("trainer ended")
    return " | ".join(parts)


def render_live(console: Console, live: dict[str, Any] | None) -> None:
    """The compact live-training block of ``status`` (five lines, as the skill reports it)."""
    if not live:
        return
    state = "STALLED (no log output)" if live["stalled"] else live["state"].upper()
    if live.get("process_ended"):
        state += f" (its trainer was {live['process_ended']} after the final checkpoint)"
    step = (f"step {live['step']}/{live['total']} ({live['percent']}%)" if live["total"]
            else f"step {live['step'] if live['step'] is not None else '-'}")
    losses = ", ".join(f"{loss:.4f}" for loss in live["last_losses"]) or "-"
    job = live.get("slurm")
    who = f"slurm job {job['job_id']}" if job else f"pid {live['pid']}"
    lines = [f"  training stage {live['stage']}/{live['stages']}: {state} ({who}); {step}; last losses: {losses}"]
    if job:
        lines.append(f"  slurm job {job['job_id']}: {job['text']}")
    gpus = "; ".join(f"GPU {g['index']} {g['utilization_pct']}% {g['memory_used_mib']}/{g['memory_total_mib']} MiB"
                     for g in live.get("gpus") or [])
    if live["state"] == "running":
        lines.append(f"  ETA: {live['eta']}" + (f"; {gpus}" if gpus else ""))
    elif live["state"] in ("queued", "unknown"):
        lines.append("  waiting for its nodes in the SLURM queue" if live["state"] == "queued" else
                     "  its state cannot be read here: run `ltx-pipeline status` where squeue and sacct are on PATH")
    else:  # finished, failed, stopped or crashed: what it took, never an estimate
        took = (f"{live['duration']} ({live['duration_source']})" if live.get("duration")
                else "not measured (no trainer statistics and no process times)")
        lines.append(f"  duration: {took}" + (f"; {gpus}" if gpus else ""))
    lines.append(f"  latest checkpoint: {live['latest_checkpoint'] or '-'}")
    lines.append(f"  latest sample: {live['latest_sample'] or '-'}")
    lines.append(f"  W&B: {live['wandb_url'] or '-'}")
    if live.get("last_log_line"):
        lines.append(f"  last log line: {live['last_log_line']}")
    for line in lines:
        console.print(line, markup=False, highlight=False)
