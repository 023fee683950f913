"""A SLURM job's state, read from the queue (``squeue``) or, once it left it, from accounting (``sacct``).

A training submitted with ``--slurm`` is recorded as a process whose host is ``slurm:<job id>`` and
whose pid is the job id; its liveness is the queue's word, never a pid on this host. A job in the
queue in any state but a final one (pending, running, requeued, suspended...) is alive; once it left
the queue, ``sacct`` says how it ended: ``COMPLETED`` with exit ``0:0`` is success, anything else
(``FAILED``, ``CANCELLED``, ``TIMEOUT``, ``NODE_FAIL``, ``OUT_OF_MEMORY``...) a failure named by its
state. When neither tool is on ``PATH`` the state is unknown, and said so (``note``), never guessed.
Standard library only, with short timeouts: ``status`` reads it. Answers are cached for a few seconds
(``LTX_PIPELINE_SLURM_POLL_S``, default 10) so a follower's liveness checks do not hammer the controller.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from ltx_pipeline.env_names import SLURM_POLL_ENV as POLL_ENV

__all__ = ["ALIVE_STATES", "HOST_PREFIX", "WAITING_STATES", "JobState", "Submitted", "cancel_job", "job_host",
           "job_id_of", "parse_sacct", "query_job", "queue_tools"]

HOST_PREFIX = "slurm:"
#: States of a job that has not ended: it may still (or again) run. Anything else in the queue is ending.
ALIVE_STATES = frozenset({"PENDING", "RUNNING", "REQUEUED", "REQUEUE_HOLD", "REQUEUE_FED", "CONFIGURING",
                          "COMPLETING", "RESIZING", "SUSPENDED", "SIGNALING", "STAGE_OUT", "STOPPED",
                          "RESV_DEL_HOLD", "SPECIAL_EXIT", "POWER_UP_NODE"})
#: Alive states in which the job has no nodes yet (or again): nothing runs, no log grows.
WAITING_STATES = frozenset({"PENDING", "REQUEUED", "REQUEUE_HOLD", "REQUEUE_FED", "CONFIGURING", "SUSPENDED",
                            "RESV_DEL_HOLD", "POWER_UP_NODE"})
_TIMEOUT_S = 5.0


@dataclass(frozen=True)
class JobState:
    """What the cluster says about one job now.

    ``alive`` is None when it cannot be told (no ``squeue``/``sacct`` here, or they failed): ``note``
    says why. ``exit_code``/``signal`` are set once accounting shows the job ended; a job that ended in
    any state but ``COMPLETED`` never has exit code 0 (a ``TIMEOUT`` is ``0:0`` to SLURM, a failure here).
    """

    job_id: int
    state: str | None
    alive: bool | None
    source: str | None  # squeue, sacct, or None
    exit_code: int | None = None
    signal: int | None = None
    note: str | None = None

    def describe(self) -> str:
        """``RUNNING`` / ``FAILED (exit 1)`` / the note: one phrase for ``status``."""
        if self.state is None:
            return self.note or "unknown"
        if self.alive or self.exit_code is None:
            return self.state
        how = f"exit {self.exit_code}" + (f", signal {self.signal}" if self.signal else "")
        return f"{self.state} ({how})"


def job_host(job_id: int) -> str:
    """The ``host`` recorded for a submitted job."""
    return f"{HOST_PREFIX}{job_id}"


def job_id_of(host: str | None) -> int | None:
    """The job id of a ``slurm:<id>`` host, or None for a process on a host."""
    if not host or not host.startswith(HOST_PREFIX):
        return None
    digits = host[len(HOST_PREFIX):]
    return int(digits) if digits.isdigit() else None


def queue_tools() -> dict[str, str | None]:
    """Where ``squeue``, ``sacct`` and ``scancel`` are on ``PATH`` (None: absent)."""
    return {name: shutil.which(name) for name in ("squeue", "sacct", "scancel")}


_CACHE: dict[int, tuple[float, JobState]] = {}


def query_job(job_id: int, *, timeout_s: float = _TIMEOUT_S, fresh: bool = False) -> JobState:
    """The job's state: from ``squeue -h -j ID -o %T`` while queued, else ``sacct``; cached briefly."""
    now = time.monotonic()
    cached = _CACHE.get(job_id)
    if cached is not None and not fresh and now - cached[0] < _poll_s():
        return cached[1]
    state = _query(job_id, timeout_s)
    _CACHE[job_id] = (now, state)
    return state


def _query(job_id: int, timeout_s: float) -> JobState:
    tools = queue_tools()
    notes: list[str] = []
    left_queue = False
    if tools["squeue"]:
        done = _run([tools["squeue"], "-h", "-j", str(job_id), "-o", "%T"], timeout_s)
        if done is None:
            notes.append("squeue did not answer")
        elif done[0] == 0 and done[1].split():
            state = done[1].split()[0].strip().upper()
            return JobState(job_id, state, state in ALIVE_STATES, "squeue")
        elif done[0] == 0 or "invalid job id" in done[1].lower():
            left_queue = True  # no line, or a controller that already forgot it: the job left the queue
        else:
            notes.append(f"squeue failed: {done[1].strip()[:200]}")
    else:
        notes.append("squeue is not on PATH")
    if tools["sacct"]:
        done = _run([tools["sacct"], "-n", "-P", "-X", "-j", str(job_id), "--format=State,ExitCode"], timeout_s)
        parsed = parse_sacct(done[1]) if done is not None and done[0] == 0 else None
        if parsed is not None:
            state, code, signal = parsed
            if state in ALIVE_STATES:  # accounting can answer while the queue does not
                return JobState(job_id, state, True, "sacct")
            return JobState(job_id, state, False, "sacct", code, signal)
        notes.append("sacct did not answer" if done is None else
                     "sacct has no record of it" if done[0] == 0 else f"sacct failed: {done[1].strip()[:200]}")
    else:
        notes.append("sacct is not on PATH")
    if left_queue:
        # The queue says the job is gone, and accounting cannot say how it ended.
        return JobState(job_id, None, False, "squeue", note="not in the queue; " + "; ".join(notes))
    return JobState(job_id, None, None, None, note="; ".join(notes))


def parse_sacct(text: str) -> tuple[str, int | None, int | None] | None:
    """``(state, exit code, signal)`` from ``sacct -n -P --format=State,ExitCode`` (the allocation's line).

    ``CANCELLED by 1000`` is ``CANCELLED``; ``ExitCode`` is ``code:signal``. A job that ended in any
    state but ``COMPLETED`` gets a non-zero code (128 + signal, else 1) even when SLURM says ``0:0``.
    """
    for line in text.splitlines():
        fields = line.strip().split("|")
        if len(fields) < 2 or not fields[0].strip():
            continue
        state = fields[0].split()[0].upper()
        code_text, _, signal_text = fields[1].partition(":")
        code = int(code_text) if code_text.strip().isdigit() else None
        signal = int(signal_text) if signal_text.strip().isdigit() else None
        if state in ALIVE_STATES:
            return state, None, None
        if state != "COMPLETED" and not code:
            code = 128 + signal if signal else 1
        return state, code, signal or None
    return None


def cancel_job(job_id: int, *, timeout_s: float = 10.0) -> str:
    """``scancel ID``; returns what happened in words."""
    scancel = queue_tools()["scancel"]
    if not scancel:
        return "scancel is not on PATH"
    done = _run([scancel, str(job_id)], timeout_s)
    _CACHE.pop(job_id, None)
    if done is None:
        return "scancel did not answer"
    return "scancel" if done[0] == 0 else f"scancel failed: {done[1].strip()[:200]}"


def _run(argv: list[str], timeout_s: float) -> tuple[int, str] | None:
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout_s, check=False)  # noqa: S603
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.returncode, done.stdout if done.returncode == 0 else done.stderr


def _poll_s() -> float:
    try:
        return float(os.environ.get(POLL_ENV, "") or 10.0)
    except ValueError:
        return 10.0


@dataclass(frozen=True)
class Submitted:
    """A job handed to a cluster scheduler (SLURM): its id and the exact submission command."""

    job_id: int
    argv: tuple[str, ...]
    cwd: Path
    printable: str
