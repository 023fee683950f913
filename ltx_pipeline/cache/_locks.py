"""Per-key locks of the latent cache: ``flock`` on a lock file, released by the kernel when its holder dies.

A lock file may be removed (``remove_idle``) while another process is about to lock it; a holder
therefore checks after locking that the path still names the file it locked, and retries otherwise, so
two processes never both believe they hold one key.
"""

from __future__ import annotations

import errno
import fcntl
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

__all__ = ["held", "remove_idle"]

_POLL_S = 0.05


def _try_lock(path: Path, mode: int, deadline: float | None) -> int | None:
    """An open descriptor holding ``mode`` on ``path``; None when ``deadline`` passed first (None: wait)."""
    while True:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o666)
        try:
            while True:
                try:
                    fcntl.flock(fd, mode | fcntl.LOCK_NB)
                    break
                except OSError as exc:
                    if exc.errno not in (errno.EAGAIN, errno.EWOULDBLOCK, errno.EACCES):
                        raise
                    if deadline is not None and time.monotonic() >= deadline:
                        os.close(fd)
                        return None
                    time.sleep(_POLL_S)
            try:
                if os.fstat(fd).st_ino == os.stat(path).st_ino:
                    return fd
            except FileNotFoundError:
                pass  # removed while we waited: lock the file now at that path
        except BaseException:
            os.close(fd)
            raise
        os.close(fd)


@contextmanager
def held(path: Path, *, exclusive: bool = True, timeout: float | None = None) -> Iterator[bool]:
    """Hold the lock at ``path`` for the block: yields True once held, False if ``timeout`` passed first.

    ``timeout`` None waits as long as it takes; 0 tries once. Shared holders exclude exclusive ones only.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    deadline = None if timeout is None else time.monotonic() + timeout
    fd = _try_lock(path, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH, deadline)
    try:
        yield fd is not None
    finally:
        if fd is not None:
            os.close(fd)  # closing the descriptor releases the lock


def remove_idle(path: Path) -> bool:
    """Remove the lock file at ``path`` if nobody holds it; True when removed."""
    try:
        fd = os.open(path, os.O_RDWR)
    except FileNotFoundError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        return False
    try:
        if os.fstat(fd).st_ino == os.stat(path).st_ino:
            path.unlink()
            return True
        return False
    except FileNotFoundError:
        return False
    finally:
        os.close(fd)
