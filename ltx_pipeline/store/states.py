"""The states the store keeps, as ``str`` enums whose values are exactly the strings stored ever since.

A member is its value: it compares, hashes, formats and serialises as that string (rq's
``JobStatus(str, Enum)``), so rows written before these enums existed, and the ``status --json`` output,
read the same. The columns stay plain text (no migration): the enums name the values the engine writes
and compares, and a row read back holds the plain string.

- ``RunState``: ``runs.state`` when a run is not inside a phase. Between phases it holds the name of the
  phase the drive last entered (``engine/machine.py``), which no enum can list.
- ``PhaseState``: ``phase_runs.status``, one attempt of one phase.
- ``ProcessState``: ``processes.status``, a child process as the engine last recorded it (its liveness is
  checked, never trusted: see ``status/live.py``).

The module imports only the standard library: ``status`` reads it without paying for SQLAlchemy.
"""

from __future__ import annotations

from enum import Enum

__all__ = ["PhaseState", "ProcessState", "RunState"]


class _Stored(str, Enum):
    """A stored string: ``str()`` and f-strings give the value (not ``Class.MEMBER``) on every Python."""

    def __str__(self) -> str:
        return str(self.value)


class RunState(_Stored):
    """Where a run stands outside a phase: new, or how its last drive ended."""

    NEW = "new"
    AWAITING_APPROVAL = "awaiting_approval"
    GATE_STOPPED = "gate_stopped"
    FAILED = "failed"
    FINISHED = "finished"


class PhaseState(_Stored):
    """How one attempt of one phase stands or ended."""

    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    INTERRUPTED = "interrupted"  # its driver died while it ran; it re-runs
    GATE_STOPPED = "gate_stopped"  # stopped at the VRAM gate
    DETACHED = "detached"  # it left work running outside the engine (a resume re-attaches)


class ProcessState(_Stored):
    """A launched child process as last recorded: running until its end is recorded."""

    RUNNING = "running"
    EXITED = "exited"  # its exit code is recorded
    CRASHED = "crashed"  # gone without an exit record
    STOPPED = "stopped"  # stopped by the engine or the user
