"""Child processes that outlive the engine: launch detached, check liveness truthfully, stop in steps.

A launch starts its own session (so it has its own process group and survives the engine's death),
with stdout and stderr appended to a log file. Liveness is the pid *and* its start time: a pid the
kernel reused for another program is never taken for our trainer. Stopping sends SIGINT to the
whole group, then SIGTERM, then SIGKILL after timeouts.
"""

from __future__ import annotations

import json
import os
import select
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil

from ltx_pipeline.env_names import HEARTBEAT_ENV, HOST_ID_ENV

__all__ = ["Launched", "exit_record", "heartbeat_grace_s", "heartbeat_interval_s", "is_alive", "launch_detached",
           "pause_unless_exit", "stop_group", "wait_exit"]

_START_TIME_TOLERANCE_S = 0.05


@dataclass(frozen=True)
class Launched:
    """What identifies a launched process: pid, its start time and the host."""

    pid: int
    create_time: float
    host: str


#: A supervisor on a shared store says it is alive this often; a heartbeat older than the timeout is lost.
HEARTBEAT_TIMEOUT_S = 60.0
DEFAULT_HEARTBEAT_S = 10.0


def heartbeat_interval_s() -> float:
    """How often a live process says so on a shared store (``LTX_PIPELINE_HEARTBEAT_S``, default 10 s)."""
    try:
        value = float(os.environ.get(HEARTBEAT_ENV, "") or DEFAULT_HEARTBEAT_S)
    except ValueError:
        value = DEFAULT_HEARTBEAT_S
    return value if value > 0 else DEFAULT_HEARTBEAT_S


def heartbeat_grace_s() -> float:
    """How old a heartbeat may be before its owner counts as lost: ``HEARTBEAT_TIMEOUT_S`` at the default
    interval, the same six missed beats when ``LTX_PIPELINE_HEARTBEAT_S`` shortens it (tests)."""
    return HEARTBEAT_TIMEOUT_S * heartbeat_interval_s() / DEFAULT_HEARTBEAT_S


def host_id() -> str:
    """This host's name as processes and locks record it (``LTX_PIPELINE_HOST_ID`` overrides the hostname)."""
    return os.environ.get(HOST_ID_ENV) or socket.gethostname()


def heartbeat_fresh(heartbeat_at: Any, now: float | None = None) -> bool:
    """Whether a recorded heartbeat (a datetime) is within ``HEARTBEAT_TIMEOUT_S`` of now."""
    if heartbeat_at is None:
        return False
    stamp = heartbeat_at.timestamp() if hasattr(heartbeat_at, "timestamp") else float(heartbeat_at)
    return (time.time() if now is None else now) - stamp <= HEARTBEAT_TIMEOUT_S


def launch_detached(argv: Sequence[str], *, cwd: Path, env_overrides: Mapping[str, str], log_path: Path,
                    exit_file: Path) -> Launched:
    """Start ``argv`` under the supervisor in a new session, output appended to ``log_path``.

    The supervisor writes the exit status to ``exit_file`` when the command ends (see
    ``ltx_pipeline.engine.supervise``); the returned pid is the supervisor's, the leader of the group.
    """
    log_path.parent.mkdir(parents=True, exist_ok=True)
    exit_file.unlink(missing_ok=True)
    env = {**os.environ, **env_overrides}
    supervised = [sys.executable, "-m", "ltx_pipeline.engine.supervise", str(exit_file), "--", *argv]
    with open(log_path, "ab") as log:  # the child keeps its own descriptor
        proc = subprocess.Popen(  # noqa: S603 - argv list from a backend, never a shell string
            supervised, cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
            start_new_session=True, close_fds=True)
    try:
        created = psutil.Process(proc.pid).create_time()
    except psutil.NoSuchProcess:  # it already exited: its record still names it
        created = time.time()
    _REAPERS[proc.pid] = (proc, created)  # keep the Popen so the engine reaps it (no zombie) while it runs
    return Launched(proc.pid, created, host_id())


_REAPERS: dict[int, tuple[subprocess.Popen[bytes], float]] = {}


def is_alive(pid: int, create_time: float, host: str, marker: str | None = None) -> bool:
    """True only when ``pid`` runs on this host and is the recorded process.

    The recorded process is recognised by its start time; when that differs (psutil derives it from
    the boot time, which a clock adjustment shifts between two engine processes) by ``marker``, a
    string only its command line holds (the supervisor's exit-file path). A pid reused by another
    program matches neither, so it is never taken for our trainer; our own trainer is never taken
    for dead because the clock moved.
    """
    if host != host_id():
        return False  # another host's process: only its heartbeat says anything (``heartbeat_fresh``)
    child = _REAPERS.get(pid)
    if child is not None and child[1] == create_time:
        # This engine's own child, unreaped: its pid cannot have been reused, so one waitpid(WNOHANG)
        # tells it all (a follower asks every round; the /proc reads below cost far more).
        return child[0].poll() is None
    try:
        process = psutil.Process(pid)
        if process.status() == psutil.STATUS_ZOMBIE:
            return False
        if abs(process.create_time() - create_time) <= _START_TIME_TOLERANCE_S:
            return True
        return marker is not None and any(marker == part for part in process.cmdline())
    except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
        return False


def exit_record(exit_file: Path) -> dict[str, Any] | None:
    """``{"exit_code", "signal"}`` as the supervisor recorded it, or None (still running, or killed)."""
    try:
        record: dict[str, Any] = json.loads(exit_file.read_text(encoding="utf-8"))
        return record
    except (OSError, ValueError):
        return None


def pause_unless_exit(pid: int, seconds: float) -> None:
    """Sleep up to ``seconds``, waking as soon as the local process ``pid`` ends.

    A follower polls a trainer's log between naps; with a pidfd (Linux 5.3+) the nap ends the moment
    the process exits, so a finished trainer is judged at once and not after the follower's back-off.
    Without one (or for a pid that is gone already) it is a plain sleep or no wait at all.
    """
    opener = getattr(os, "pidfd_open", None)
    if opener is None:
        time.sleep(seconds)
        return
    try:
        handle = opener(pid)
    except ProcessLookupError:
        return  # ended already: nothing to wait for
    except OSError:
        time.sleep(seconds)  # no pidfd here (old kernel, seccomp)
        return
    try:
        select.select([handle], [], [], seconds)
    finally:
        os.close(handle)


def wait_exit(pid: int, create_time: float, host: str, timeout: float, marker: str | None = None) -> bool:
    """Wait up to ``timeout`` seconds for the process to end; True when it did."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not is_alive(pid, create_time, host, marker):
            return True
        time.sleep(0.1)
    return not is_alive(pid, create_time, host, marker)


def stop_group(pid: int, create_time: float, host: str, *, interrupt_timeout: float = 30,
               terminate_timeout: float = 15, marker: str | None = None) -> str:
    """SIGINT the process group, then SIGTERM, then SIGKILL. Returns the signal that ended it."""
    for sig, timeout in ((signal.SIGINT, interrupt_timeout), (signal.SIGTERM, terminate_timeout),
                         (signal.SIGKILL, 5.0)):
        if not is_alive(pid, create_time, host, marker):
            return "already exited"
        try:
            os.killpg(pid, sig)
        except ProcessLookupError:
            return "already exited"
        if wait_exit(pid, create_time, host, timeout, marker):
            _reap(pid)
            return signal.Signals(sig).name
    return "still running"


def _reap(pid: int) -> None:
    """Collect a child this process launched, so a stopped supervisor is never left <defunct>."""
    child = _REAPERS.pop(pid, None)
    if child is not None:
        try:
            child[0].wait(timeout=5)
        except subprocess.TimeoutExpired:
            pass
    else:
        try:
            os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            pass  # not our child: init reaps it
