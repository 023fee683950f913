"""One driver per run: an exclusive ``flock`` on ``<run>/.driver.lock``.

The kernel drops the lock when its holder dies, SIGKILL included, so a dead holder never blocks a
``resume``. The file also records the holder's pid, host and start time so a refused second
driver can name the process that holds the run.
"""

from __future__ import annotations

import fcntl
import json
import os
import socket
import time
from pathlib import Path
from types import TracebackType

from ltx_pipeline.errors import RunLocked

__all__ = ["DriverLock"]


class DriverLock:
    """Context manager holding the run's driver lock."""

    def __init__(self, path: Path, run_name: str) -> None:
        self.path = path
        self.run_name = run_name
        self._fd: int | None = None

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
        record = {"pid": os.getpid(), "host": socket.gethostname(), "since": time.strftime("%Y-%m-%d %H:%M:%S")}
        os.ftruncate(fd, 0)
        os.pwrite(fd, json.dumps(record).encode(), 0)
        self._fd = fd
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        if self._fd is not None:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None


def _read_holder(fd: int) -> str:
    try:
        data = json.loads(os.pread(fd, 4096, 0) or b"{}")
        return f"pid {data['pid']} on {data['host']} since {data['since']}"
    except (ValueError, KeyError, OSError):
        return "an unknown process"
