"""One driver per run: an exclusive ``flock`` on ``<run>/.driver.lock`` (and, on a shared PostgreSQL
store, an advisory lock on the server).

The kernel drops the lock when its holder dies, SIGKILL included, so a dead holder never blocks a
``resume``. The file also records the holder's pid, host and start time so a refused second
driver can name the process that holds the run.
"""

from __future__ import annotations

import fcntl
import json
import os
import time
from pathlib import Path
from types import TracebackType
from typing import Any

from ltx_pipeline.engine.processes import host_id
from ltx_pipeline.errors import RunLocked

__all__ = ["DriverLock", "driver_on_store", "host_id"]


class DriverLock:
    """Context manager holding the run's driver lock.

    On a store shared by several hosts (PostgreSQL), the run is also locked on the server with an
    advisory lock held on a connection of this engine's own, so a driver on another host is refused
    too, naming the holder's host, pid and start time.
    """

    def __init__(self, path: Path, run_name: str, store: Any = None) -> None:
        self.path = path
        self.run_name = run_name
        self.store = store if getattr(store, "is_postgres", False) else None
        self._fd: int | None = None
        self._connection: Any = None

    def __enter__(self) -> DriverLock:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _read_holder(fd)
            os.close(fd)
            raise RunLocked(
                f"Run {self.run_name} is being driven by another process ({holder})",
                where=str(self.path),
                fix="wait for it to finish, or stop that process, then try again",
            ) from None
        record = {"pid": os.getpid(), "host": host_id(), "since": time.strftime("%Y-%m-%d %H:%M:%S")}
        if self.store is not None:
            self._connection = self.store.hold_lock(_lock_name(self.run_name), record)
            if self._connection is None:
                owner: dict[str, Any] = self.store.lock_holder(_lock_name(self.run_name)) or {}
                fcntl.flock(fd, fcntl.LOCK_UN)
                os.close(fd)
                raise RunLocked(
                    f"Run {self.run_name} is being driven by another process (pid {owner.get('pid')} on "
                    f"{owner.get('host')} since {owner.get('since')})", where="the shared store",
                    fix="wait for it to finish, or stop that process, then try again")
        os.ftruncate(fd, 0)
        os.pwrite(fd, json.dumps(record).encode(), 0)
        self._fd = fd
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        if self._connection is not None and self.store is not None:
            self.store.release_lock(_lock_name(self.run_name), self._connection)
            self._connection = None
        if self._fd is not None:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None


def _lock_name(run_name: str) -> str:
    return f"driver:{run_name}"


def driver_on_store(store: Any, run_name: str) -> dict[str, Any] | None:
    """The driver of a run as a shared store knows it (pid, host, since), from any host; None if none."""
    holder: dict[str, Any] | None = store.lock_holder(_lock_name(run_name))
    return holder


def _read_holder(fd: int) -> str:
    try:
        data = json.loads(os.pread(fd, 4096, 0) or b"{}")
        return f"pid {data['pid']} on {data['host']} since {data['since']}"
    except (ValueError, KeyError, OSError):
        return "an unknown process"
