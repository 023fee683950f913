"""``RunJournal``: what a phase may record about the outside world, without seeing the store.

Phases launch processes, parse logs and find checkpoints; the journal is the one narrow door
through which those facts reach the store (processes with their pid and start time, log offsets,
step metrics in batches, checkpoint pairs). A launch is always supervised and detached, so it
survives the engine, and a live recorded process is re-attached instead of launched twice.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from ltx_pipeline.engine.processes import exit_record, is_alive, launch_detached, stop_group
from ltx_pipeline.store import Process, Store, saved_id
from ltx_pipeline.store.models import utcnow

__all__ = ["Launchable", "ProcessHandle", "RunJournal"]


class Launchable(Protocol):
    """A backend launch spec (``backends.base.LaunchSpec``): argv, cwd, env overrides, printable."""

    argv: tuple[str, ...]
    cwd: Path
    env: dict[str, str]

    @property
    def printable(self) -> str: ...

    def to_record(self) -> dict[str, Any]: ...


@dataclass(frozen=True)
class ProcessHandle:
    """A recorded process: enough to check it, stop it and read how it ended."""

    id: int
    kind: str
    stage: int
    pid: int
    create_time: float
    host: str
    log_path: Path
    log_offset: int
    status: str
    printable: str

    @property
    def exit_file(self) -> Path:
        return Path(f"{self.log_path}.exit")

    def alive(self) -> bool:
        return is_alive(self.pid, self.create_time, self.host)

    def exit(self) -> dict[str, Any] | None:
        """``{"exit_code", "signal"}``, or None while running or when it died without a record."""
        return exit_record(self.exit_file)

    @classmethod
    def of(cls, row: Process) -> ProcessHandle:
        return cls(saved_id(row), row.kind, row.stage, row.pid, row.create_time, row.host, Path(row.log_path),
                   row.log_offset, row.status, row.printable)


class RunJournal:
    """The records one phase of one run may write."""

    def __init__(self, store: Store, run_id: int, phase: str) -> None:
        self.store = store
        self.run_id = run_id
        self.phase = phase

    # -- processes ----------------------------------------------------------------------------
    def launch(self, kind: str, stage: int, spec: Launchable, log_path: Path) -> ProcessHandle:
        """Start ``spec`` detached under the supervisor and record it before returning."""
        exit_file = Path(f"{log_path}.exit")
        launched = launch_detached(spec.argv, cwd=spec.cwd, env_overrides=spec.env, log_path=log_path,
                                   exit_file=exit_file)
        record = spec.to_record()
        row = self.store.add_process(Process(
            run_id=self.run_id, phase=self.phase, kind=kind, stage=stage, pid=launched.pid,
            create_time=launched.create_time, host=launched.host, argv=record["argv"], cwd=record["cwd"],
            env=record["env"], printable=record["printable"], log_path=str(log_path)))
        return ProcessHandle.of(row)

    def processes(self, kind: str | None = None, stage: int | None = None) -> list[ProcessHandle]:
        rows = self.store.processes(self.run_id, kind)
        return [ProcessHandle.of(r) for r in rows if stage is None or r.stage == stage]

    def live(self, kind: str, stage: int | None = None) -> ProcessHandle | None:
        """A recorded process of this kind that is still running (pid and start time match)."""
        return next((h for h in reversed(self.processes(kind, stage)) if h.status == "running" and h.alive()), None)

    def settle(self, handle: ProcessHandle, *, stopped_by_user: bool = False) -> ProcessHandle:
        """Record how a process that is no longer alive ended: exited (with its code) or crashed."""
        if handle.alive():
            return handle
        record = handle.exit()
        if stopped_by_user:
            status = "stopped"
        else:
            status = "crashed" if record is None else "exited"
        row = self.store.update_process(handle.id, status=status, ended_at=utcnow(),
                                        exit_code=None if record is None else record["exit_code"],
                                        stopped_by_user=stopped_by_user)
        return ProcessHandle.of(row)

    def stop(self, handle: ProcessHandle, **timeouts: float) -> str:
        how = stop_group(handle.pid, handle.create_time, handle.host, **timeouts)
        self.settle(handle, stopped_by_user=True)
        return how

    def set_offset(self, handle: ProcessHandle, offset: int) -> None:
        self.store.update_process(handle.id, log_offset=offset)

    def wait(self, handle: ProcessHandle, poll_s: float = 0.2, timeout_s: float | None = None) -> ProcessHandle:
        """Block until the process ends (or the timeout passes); return its settled record."""
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        while handle.alive() and (deadline is None or time.monotonic() < deadline):
            time.sleep(poll_s)
        return self.settle(handle)

    def run_to_end(self, kind: str, stage: int, spec: Launchable, log_path: Path) -> ProcessHandle:
        """Re-attach to a live process of this kind and stage, or launch one; wait for its end."""
        handle = self.live(kind, stage) or self.launch(kind, stage, spec, log_path)
        return self.wait(handle)

    # -- metrics and checkpoints --------------------------------------------------------------
    def add_metrics(self, stage: int, rows: list[dict[str, Any]]) -> int:
        return self.store.add_metrics(self.run_id, stage, rows)

    def metrics(self, stage: int | None = None) -> list[dict[str, Any]]:
        return [{"stage": m.stage, "step": m.step, "loss": m.loss, "learning_rate": m.learning_rate,
                 "step_time_s": m.step_time_s, "clean": m.clean} for m in self.store.metrics(self.run_id, stage)]

    def add_checkpoint(self, stage: int, step: int, weights: str, state: str | None) -> bool:
        return self.store.add_checkpoint(self.run_id, stage, step, weights, state)

    def checkpoints(self, stage: int | None = None) -> list[dict[str, Any]]:
        return [{"stage": c.stage, "step": c.step, "weights": c.weights_path, "state": c.state_path}
                for c in self.store.checkpoints(self.run_id, stage)]

    def event(self, message: str, level: str = "info") -> None:
        self.store.record_event(self.run_id, message, phase=self.phase, level=level)
