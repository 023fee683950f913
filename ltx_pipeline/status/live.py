"""The live-training section of ``status``: read-only, from the store, the files and the OS.

For a run with recorded train processes: stage k/N, the trainer's liveness checked here (pid plus
start time, never a "running" row on trust: a trainer that is gone without a recorded exit is
**crashed**, shown with its last log line), step/total, last losses, ETA from steady-state step
times only ("measuring step time..." until two clean samples exist), GPU utilisation and memory
now (nvidia-smi, best effort, short timeout, omitted when absent), latest checkpoint and sample,
W&B URL, and "stalled" when the log has not grown for the stall threshold. The engine knows no
trainer: the caller hands in what reads the trainer's side, ``log_summary``
(``ltx_pipeline.training.follow.log_summary``) for the log's tail, ``weights_files``
(``ltx_pipeline.checkpoints.discovery.weights_files``) for the checkpoints on disk and ``gpus``
(``ltx_pipeline.probing.nvidia_smi.gpu_now``) for the GPUs now; without them, the figures come
from what the store recorded (metrics, checkpoints) and no GPU line is shown.

Only a running trainer has an ETA. One that ended (finished, failed, stopped or crashed) has
``eta`` None and a measured ``duration`` instead, with its ``duration_source``: the trainer's
statistics block when the log summary gives its total time (``total_time_s`` or
``total_time_minutes``), else the trainer process's own start to its end (the supervisor's exit
file, else the log's last write for a trainer killed with its group, else the
recorded end), which includes model loading and validation.
"""

from __future__ import annotations

import os
import statistics
import time
from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ltx_pipeline.engine.processes import exit_record, heartbeat_fresh, host_id, is_alive
from ltx_pipeline.env_names import STALL_SECONDS_ENV
from ltx_pipeline.slurm import queue as slurm
from ltx_pipeline.status.stored import planned_steps, stage_count, stage_finished, stage_output_dirs
from ltx_pipeline.store.rows import saved_id
from ltx_pipeline.store.states import ProcessState

if TYPE_CHECKING:  # the reader and the full store answer the same queries
    from ltx_pipeline.store import PhaseRun, Process, Run, Store
    from ltx_pipeline.store.reader import Record, StoreReader

__all__ = ["GpuReader", "LogSummary", "WeightsFiles", "live_training"]

LogSummary = Callable[[Path], dict[str, Any]]  # a trainer log -> its tail, summarised
WeightsFiles = Callable[[Path], list[tuple[int, str]]]  # a checkpoints folder -> (step, path) of each weights file
GpuReader = Callable[[str | None], list[dict[str, Any]]]  # the run's --nvidia-smi -> each GPU's use right now
_SAMPLES = (".mp4", ".png", ".wav", ".gif")


def live_training(store: Store | StoreReader, run: Run | Record, *, log_summary: LogSummary | None = None,
                  weights_files: WeightsFiles | None = None, gpus: GpuReader | None = None,
                  query_gpus: bool = True) -> dict[str, Any] | None:
    """The live-training dict for ``run``, or None when it never launched a trainer.

    Args:
        log_summary, weights_files, gpus: the trainer-side readers (see the module docstring).
        query_gpus: False never reads the GPUs, even with ``gpus`` given.
    """
    run_id = saved_id(run)
    processes = store.processes(run_id, "train")
    if not processes:
        return None
    latest = store.latest_phase_runs(run_id)
    process = processes[-1]
    stage = process.stage
    folder = stage_output_dirs(latest.get("config_patch")).get(stage) if stage is not None else None
    output_dir = Path(folder) if folder else None
    job = slurm.query_job(process.pid, fresh=True) if slurm.job_id_of(process.host) is not None else None
    state, exit_code = _liveness(process) if job is None else _job_liveness(process, job)
    ended = None
    if state != "running" and stage_finished(latest.get("train"), stage):
        # The train phase judged the stage finished from its final checkpoint pair: a stop or kill that
        # landed after the last save does not make it unfinished. Say how the process ended beside it.
        ended, state = (state if state != "finished" else None), "finished"
    log = Path(process.log_path)
    summary = log_summary(log) if log_summary else {}
    silent = time.time() - log.stat().st_mtime if log.exists() else None
    report: dict[str, Any] = {
        "stage": stage, "stages": max(stage_count(latest.get("config_patch")), stage), "pid": process.pid,
        "state": state, "exit_code": exit_code, "log": str(log),
        **_progress(store, run_id, process, summary, latest.get("plan"), running=state == "running"),
        "latest_checkpoint": _latest_checkpoint(store, run, stage, output_dir, weights_files),
        "latest_sample": _latest_sample(output_dir), "wandb_url": summary.get("wandb_url"),
        "stalled": state == "running" and silent is not None and silent >= _stall_seconds(),
    }
    if ended:
        report["process_ended"] = ended
    if job is not None:
        report["slurm"] = {"job_id": job.job_id, "state": job.state, "source": job.source, "note": job.note,
                           "exit_code": job.exit_code, "text": job.describe()}
    if state in ("crashed", "failed", "stopped"):
        report["last_log_line"] = summary.get("last_line") or _last_line(log)
    if gpus is not None and query_gpus and state == "running" and job is None:  # a job's GPUs are on its nodes
        now = gpus(run.request.get("nvidia_smi"))
        if now:
            report["gpus"] = now
    return report


def _progress(store: Store | StoreReader, run_id: int, process: Process | Record, summary: dict[str, Any],
              plan: PhaseRun | Record | None, *, running: bool) -> dict[str, Any]:
    """Step/total, last losses, step time, and the ETA (running) or the duration (ended), in report order.

    The log's summary first; without one, the metrics the store recorded for the process's stage.
    """
    metrics = [m for m in store.metrics(run_id, process.stage)]
    step = summary.get("step") if summary.get("step") is not None else (metrics[-1].step if metrics else None)
    total = summary.get("total") or planned_steps(plan)
    losses = summary.get("last_losses") or [m.loss for m in metrics[-5:] if m.loss is not None]
    step_time = summary.get("step_time_s") or _steady([m.step_time_s for m in metrics if m.clean])
    eta = (max(total - step, 0) * step_time) if (running and step_time and total and step is not None) else None
    duration, duration_source = (None, None) if running else _duration(process, summary)
    return {
        "step": step, "total": total, "percent": round(100.0 * step / total, 1) if step is not None and total else None,
        "last_losses": losses, "step_time_s": step_time,
        "eta": (_eta_text(eta) if eta is not None else "measuring step time...") if running else None,
        "duration_s": duration, "duration": _eta_text(duration) if duration is not None else None,
        "duration_source": duration_source,
    }


def _liveness(process: Process | Record) -> tuple[str, int | None]:
    """running / finished / failed / stopped / crashed / lost, from the OS (or, for a process on another host,
    its supervisor's heartbeat in the shared store) and the supervisor's exit record."""
    if process.status == ProcessState.STOPPED or (process.stopped_by_user and process.exit_code != 0):
        # A stop asked for while the trainer was ending by itself (exit 0) is no stop.
        return "stopped", process.exit_code
    record = exit_record(Path(f"{process.log_path}.exit"))
    if process.host != host_id() and record is None:
        # Another host's trainer (a shared store): its supervisor's heartbeat is the only evidence.
        return ("running" if heartbeat_fresh(process.heartbeat_at) else "lost"), None
    if is_alive(process.pid, process.create_time, process.host, marker=f"{process.log_path}.exit"):
        return "running", None
    if record is None:
        return "crashed", None  # gone, and its supervisor never wrote how: killed with its group
    return ("finished" if record["exit_code"] == 0 else "failed"), record["exit_code"]


def _job_liveness(process: Process | Record, job: slurm.JobState) -> tuple[str, int | None]:
    """A SLURM job's liveness: the queue's state, else accounting's end, else what the store recorded.

    With no ``squeue``/``sacct`` here nothing is guessed: a job recorded as submitted shows as
    "unknown" (the ``slurm`` entry's note says why), one the engine settled shows as recorded.
    """
    if process.status == ProcessState.STOPPED or (process.stopped_by_user and process.exit_code != 0):
        return "stopped", process.exit_code
    if job.alive:
        return ("queued" if job.state in slurm.WAITING_STATES else "running"), None
    if job.alive is False and job.exit_code is not None:
        return ("finished" if job.exit_code == 0 else "failed"), job.exit_code
    if process.status == ProcessState.EXITED:
        return ("finished" if process.exit_code == 0 else "failed"), process.exit_code
    if process.status == ProcessState.CRASHED or job.alive is False:
        return "crashed", None
    return "unknown", None


def _duration(process: Process | Record, summary: dict[str, Any]) -> tuple[float | None, str | None]:
    """How long an ended training took, and where that figure comes from."""
    seconds = summary.get("total_time_s")
    if seconds is None and summary.get("total_time_minutes") is not None:
        seconds = float(summary["total_time_minutes"]) * 60
    if seconds is not None and float(seconds) > 0:
        return float(seconds), "trainer statistics"
    start = process.create_time or _epoch(process.started_at)
    ends = ((_mtime(Path(f"{process.log_path}.exit")), "trainer process start to exit"),
            (_mtime(Path(process.log_path)), "trainer process start to its last log output"),
            (_epoch(process.ended_at), "trainer process start to its recorded end"))
    for end, source in ends:
        if start and end is not None and end >= start:
            return end - start, f"{source}, model load and validation included"
    return None, None


def _epoch(moment: datetime | None) -> float | None:
    if moment is None:
        return None
    if moment.tzinfo is None:  # the store keeps UTC; SQLite hands it back naive
        moment = moment.replace(tzinfo=timezone.utc)
    return moment.timestamp()


def _mtime(path: Path) -> float | None:
    try:
        return path.stat().st_mtime
    except OSError:
        return None


def _steady(samples: list[float | None]) -> float | None:
    clean = [s for s in samples if s is not None]
    return statistics.median(clean[-5:]) if len(clean) >= 2 else None


def _eta_text(seconds: float) -> str:
    hours, rest = divmod(int(seconds), 3600)
    return f"{hours}h {rest // 60:02d}m" if hours else f"{rest // 60}m {rest % 60:02d}s"


def _stall_seconds() -> float:
    try:
        return float(os.environ.get(STALL_SECONDS_ENV, "") or 900)
    except ValueError:
        return 900.0


def _latest_checkpoint(store: Store | StoreReader, run: Run | Record, stage: int, output_dir: Path | None,
                       weights_files: WeightsFiles | None) -> str | None:
    found: list[tuple[int, str]] = [(c.step, c.weights_path) for c in store.checkpoints(saved_id(run), stage)]
    if output_dir is not None and weights_files is not None:
        found.extend(weights_files(output_dir / "checkpoints"))
    return max(found)[1] if found else None


def _latest_sample(output_dir: Path | None) -> str | None:
    folder = output_dir / "samples" if output_dir else None
    if folder is None or not folder.is_dir():
        return None
    files = [p for p in folder.iterdir() if p.suffix in _SAMPLES]
    return str(max(files, key=lambda p: p.name)) if files else None


def _last_line(log: Path) -> str | None:
    try:
        with log.open("rb") as handle:
            handle.seek(max(0, log.stat().st_size - 4096))
            lines = [ln.strip() for ln in handle.read().decode("utf-8", "replace").splitlines() if ln.strip()]
    except OSError:
        return None
    return lines[-1] if lines else None
