"""Starting the CLI's own commands detached, as ``--detach`` leaves a trainer: they outlive the page and the server.

A command is an argv list run by this interpreter (``python -m ltx_pipeline.cli``: the console script
``ltx-pipeline`` by another name), never through a shell, in a new session (a Ctrl-C of the server does not
reach it), its output appended to a log in the run's ``logs/`` folder. The page shows it as the user would
type it (``shown``). Finished children are reaped on each launch, so none lingers as a zombie.
"""

from __future__ import annotations

import shlex
import subprocess
import sys
import threading
from collections.abc import Sequence
from pathlib import Path

__all__ = ["ENGINE", "Launcher", "shown"]

ENGINE = (sys.executable, "-m", "ltx_pipeline.cli")


def shown(args: Sequence[str]) -> str:
    """``args`` as the ``ltx-pipeline`` command a user would type (quoted for display only, never run)."""
    return shlex.join(["ltx-pipeline", *args])


class Launcher:
    """Starts commands detached and keeps their handles (to reap them, and for tests to wait on them)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.started: list[subprocess.Popen[bytes]] = []

    def launch(self, args: Sequence[str], log: Path) -> str:
        """Start ``ltx-pipeline args`` detached, its output appended to ``log``; the command as shown."""
        log.parent.mkdir(parents=True, exist_ok=True)
        with log.open("ab") as out:
            process = subprocess.Popen([*ENGINE, *args], stdin=subprocess.DEVNULL, stdout=out,  # noqa: S603
                                       stderr=subprocess.STDOUT, start_new_session=True, close_fds=True)
        with self._lock:
            self.started = [p for p in self.started if p.poll() is None]
            self.started.append(process)
        return shown(args)

    def wait(self, timeout: float) -> list[int]:
        """Wait for every command still running (tests); their exit codes."""
        with self._lock:
            running = list(self.started)
        return [p.wait(timeout=timeout) for p in running]
