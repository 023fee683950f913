"""``Store``: the only code that opens a database session.

Every write is an intent-named method that runs in one transaction, so a state change and its
record are committed together (a phase row and the run's state; an approval and its event). A
SIGKILL at any instant therefore loses nothing that was committed and leaves nothing half-done.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

from sqlalchemy import delete, event, func, text
from sqlalchemy.engine import Connection, Engine
from sqlmodel import Session, SQLModel, col, create_engine, select

from ltx_pipeline.store.audit import AuditMethods
from ltx_pipeline.store.leases import LeaseMethods
from ltx_pipeline.store.location import is_sqlite
from ltx_pipeline.store.migrate import upgrade
from ltx_pipeline.store.models import (
    Approval,
    Checkpoint,
    Event,
    GpuLease,
    GpuWaiter,
    MediaFacts,
    Metric,
    PhaseRun,
    Process,
    Run,
    utcnow,
)
from ltx_pipeline.store.states import PhaseState, RunState

__all__ = ["Store"]

_Row = TypeVar("_Row", bound=SQLModel)


_HOLDER_PREFIX = "ltx:"


def _lock_key(name: str) -> int:
    """A stable signed 64-bit advisory-lock key for a lock name (the same on every host)."""
    return int.from_bytes(hashlib.sha256(f"ltx-pipeline:{name}".encode()).digest()[:8], "big", signed=True)


def _configure_sqlite(dbapi_connection: Any, _record: Any) -> None:
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.execute("PRAGMA busy_timeout=30000")
    cursor.execute("PRAGMA synchronous=NORMAL")
    cursor.close()


def _get(session: Session, model: type[_Row], key: int) -> _Row:
    """The row of ``model`` with primary key ``key``.

    Raises:
        LookupError: no such row (the caller passed an id the store never handed out).
    """
    row = session.get(model, key)
    if row is None:
        raise LookupError(f"no {model.__name__} row with id {key} in the store")
    return row


class Store(LeaseMethods, AuditMethods):
    """The engine's SQLite store for one workspace (GPU leases and the queue: ``store.leases``; the dashboard's
    audit: ``store.audit``)."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    @classmethod
    def open(cls, target: Path | str) -> Store:
        """Open (creating if needed) and upgrade the database to the newest schema.

        ``target``: a SQLite file (the embedded default) or a SQLAlchemy URL (``store.location``), e.g.
        ``postgresql+psycopg://...`` for a store shared by several hosts. The same models and
        migrations run on both.
        """
        if isinstance(target, str) and not is_sqlite(target):
            engine = create_engine(target, pool_pre_ping=True)
        else:
            db_file = Path(target) if isinstance(target, Path) else Path(target[len("sqlite:///"):])
            db_file.parent.mkdir(parents=True, exist_ok=True)
            engine = create_engine(f"sqlite:///{db_file}", connect_args={"timeout": 30})
            event.listen(engine, "connect", _configure_sqlite)
        upgrade(engine)
        return cls(engine)

    @property
    def is_postgres(self) -> bool:
        return self.engine.dialect.name == "postgresql"

    # -- cross-host locks (PostgreSQL advisory locks) --------------------------------------------
    def hold_lock(self, name: str, holder: dict[str, Any]) -> Connection | None:
        """Take the session advisory lock ``name`` on a connection of its own, or None when it is held.

        The lock lives as long as the returned connection (``release_lock``) or the process holding it:
        PostgreSQL drops a dead session's locks. ``holder`` (pid, host, since) is carried as the
        connection's application_name, so another host can name who holds it (``lock_holder``).
        """
        connection = self.engine.connect()
        # application_name holds 63 bytes: pid and start time first, the host (cut if long) last.
        label = f"{_HOLDER_PREFIX}{holder.get('pid')}|{holder.get('since')}|{holder.get('host')}"
        connection.execute(text("SELECT set_config('application_name', :name, false)"),
                           {"name": label.encode()[:63].decode(errors="ignore")})
        taken = connection.execute(text("SELECT pg_try_advisory_lock(:key)"), {"key": _lock_key(name)}).scalar()
        connection.commit()
        if taken:
            return connection
        connection.close()
        return None

    @staticmethod
    def release_lock(name: str, connection: Connection) -> None:
        try:
            connection.execute(text("SELECT pg_advisory_unlock(:key)"), {"key": _lock_key(name)})
            connection.commit()
        finally:
            connection.close()

    def lock_holder(self, name: str) -> dict[str, Any] | None:
        """Who holds the advisory lock ``name`` (as ``hold_lock`` recorded it), from any host; None if nobody."""
        key = _lock_key(name)
        with self.engine.connect() as connection:
            found = connection.execute(text(
                "SELECT a.application_name FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid "
                "WHERE l.locktype = 'advisory' AND l.granted AND l.classid::bigint = :hi "
                "AND l.objid::bigint = :lo AND l.objsubid = 1"), {"hi": (key >> 32) & 0xFFFFFFFF,
                                                                  "lo": key & 0xFFFFFFFF}).scalar()
        if found is None:
            return None
        pid, since, host = (str(found).removeprefix(_HOLDER_PREFIX).split("|", 2) + ["unknown"] * 3)[:3]
        return {"pid": int(pid) if pid.isdigit() else None, "since": since, "host": host}

    def close(self) -> None:
        self.engine.dispose()

    @contextmanager
    def _session(self) -> Iterator[Session]:
        with Session(self.engine, expire_on_commit=False) as session, session.begin():
            yield session

    # -- runs ---------------------------------------------------------------------------------
    def create_run(self, name: str, request: dict[str, Any]) -> Run:
        with self._session() as s:
            run = Run(name=name, request=request, state=RunState.NEW.value)
            s.add(run)
            s.flush()
            return run

    def get_run(self, name: str) -> Run | None:
        with self._session() as s:
            return s.exec(select(Run).where(Run.name == name)).first()

    def list_runs(self) -> list[Run]:
        with self._session() as s:
            return list(s.exec(select(Run).order_by(col(Run.created_at), col(Run.id))))

    def delete_run(self, run_id: int) -> dict[str, int]:
        """Delete a run and every row that belongs to it, in one transaction; return the rows deleted per table.

        Media facts stay: they describe files (by path, size and mtime), not runs, and other runs read them.
        """
        counts: dict[str, int] = {}
        with self._session() as s:
            _get(s, Run, run_id)
            # Children first: the foreign keys are checked on each statement. One statement a table, so a
            # run of many metrics is deleted without loading them.
            for name, statement in (
                    ("events", delete(Event).where(col(Event.run_id) == run_id)),
                    ("approvals", delete(Approval).where(col(Approval.run_id) == run_id)),
                    ("gpu_leases", delete(GpuLease).where(col(GpuLease.run_id) == run_id)),
                    ("gpu_waiters", delete(GpuWaiter).where(col(GpuWaiter.run_id) == run_id)),
                    ("processes", delete(Process).where(col(Process.run_id) == run_id)),
                    ("metrics", delete(Metric).where(col(Metric.run_id) == run_id)),
                    ("checkpoints", delete(Checkpoint).where(col(Checkpoint.run_id) == run_id)),
                    ("phase_runs", delete(PhaseRun).where(col(PhaseRun.run_id) == run_id)),
                    ("runs", delete(Run).where(col(Run.id) == run_id))):
                counts[name] = s.exec(statement).rowcount
        return counts

    def update_request(self, run_id: int, request: dict[str, Any]) -> None:
        with self._session() as s:
            run = _get(s, Run, run_id)
            run.request = request
            run.updated_at = utcnow()

    def set_state(self, run_id: int, state: str, message: str | None = None, phase: str | None = None) -> None:
        """Persist a state change, with the event that explains it, in one transaction."""
        with self._session() as s:
            self._set_state(s, run_id, state)
            if message:
                s.add(Event(run_id=run_id, phase=phase, level="info", message=message))

    @staticmethod
    def _set_state(session: Session, run_id: int, state: str) -> None:
        run = _get(session, Run, run_id)
        run.state = state
        run.updated_at = utcnow()

    # -- phases -------------------------------------------------------------------------------
    def begin_phase(self, run_id: int, phase: str, *, reason: str, fingerprint: str,
                    parts: dict[str, Any], run_state: str) -> PhaseRun:
        """Open a new attempt of ``phase`` and move the run to ``run_state`` together."""
        with self._session() as s:
            previous = s.exec(
                select(func.max(PhaseRun.attempt)).where(PhaseRun.run_id == run_id, PhaseRun.phase == phase)
            ).one()
            row = PhaseRun(run_id=run_id, phase=phase, attempt=(previous or 0) + 1, status=PhaseState.RUNNING.value,
                           reason=reason, fingerprint=fingerprint, fingerprint_parts=parts)
            s.add(row)
            self._set_state(s, run_id, run_state)
            s.flush()
            return row

    def finish_phase(self, phase_run_id: int, *, status: PhaseState, run_state: str,
                     outputs: dict[str, Any] | None = None,
                     outputs_version: int = 0, summary: str = "", error: str | None = None,
                     approval_subject: str | None = None,
                     approval_blockers: list[str] | None = None) -> None:
        """Close an attempt with its outputs and move the run to ``run_state`` together."""
        stored = PhaseState(status).value  # the plain string, as a row read back holds it
        with self._session() as s:
            row = _get(s, PhaseRun, phase_run_id)
            row.status = stored
            row.finished_at = utcnow()
            row.outputs = outputs or {}
            row.outputs_version = outputs_version
            row.summary = summary
            row.error = error
            row.approval_subject = approval_subject
            row.approval_blockers = list(approval_blockers or [])
            self._set_state(s, row.run_id, run_state)
            s.add(Event(run_id=row.run_id, phase=row.phase,
                        level="info" if stored == PhaseState.SUCCEEDED else "error",
                        message=summary or error or stored))

    def interrupt_running(self, run_id: int) -> list[str]:
        """Mark attempts left 'running' by a dead driver as interrupted; return their phases."""
        with self._session() as s:
            rows = list(s.exec(select(PhaseRun).where(PhaseRun.run_id == run_id,
                                                      PhaseRun.status == PhaseState.RUNNING.value)))
            for row in rows:
                row.status = PhaseState.INTERRUPTED.value
                row.finished_at = utcnow()
                row.error = "the driver process died while this phase ran"
                s.add(Event(run_id=run_id, phase=row.phase, level="warning",
                            message=f"{row.phase} attempt {row.attempt} was interrupted; it will re-run"))
            return [r.phase for r in rows]

    def latest_phase_runs(self, run_id: int) -> dict[str, PhaseRun]:
        """The newest attempt of every phase of a run, by phase name."""
        with self._session() as s:
            rows = s.exec(select(PhaseRun).where(PhaseRun.run_id == run_id).order_by(col(PhaseRun.attempt)))
            return {row.phase: row for row in rows}

    def phase_attempts(self, run_id: int) -> list[PhaseRun]:
        with self._session() as s:
            return list(s.exec(select(PhaseRun).where(PhaseRun.run_id == run_id).order_by(col(PhaseRun.id))))

    # -- events and approvals -----------------------------------------------------------------
    def record_event(self, run_id: int, message: str, *, phase: str | None = None, level: str = "info") -> None:
        with self._session() as s:
            s.add(Event(run_id=run_id, phase=phase, level=level, message=message))

    def events(self, run_id: int) -> list[Event]:
        with self._session() as s:
            return list(s.exec(select(Event).where(Event.run_id == run_id).order_by(col(Event.id))))

    def approve(self, run_id: int, subject: str, approved_by: str) -> Approval:
        with self._session() as s:
            approval = Approval(run_id=run_id, subject=subject, approved_by=approved_by)
            s.add(approval)
            s.add(Event(run_id=run_id, level="info", message=f"plan {subject} approved ({approved_by})"))
            s.flush()
            return approval

    def approval_for(self, run_id: int, subject: str) -> Approval | None:
        with self._session() as s:
            return s.exec(
                select(Approval).where(Approval.run_id == run_id, Approval.subject == subject)
                .order_by(col(Approval.id).desc())
            ).first()

    # -- processes, metrics, checkpoints ------------------------------------------------------
    def add_process(self, process: Process) -> Process:
        with self._session() as s:
            s.add(process)
            s.add(Event(run_id=process.run_id, phase=process.phase, level="info",
                        message=f"launched {process.kind} (stage {process.stage}) as pid {process.pid}: "
                                f"{process.printable}"))
            s.flush()
            return process

    def update_process(self, process_id: int, **fields: Any) -> Process:
        with self._session() as s:
            row = _get(s, Process, process_id)
            for key, value in fields.items():
                setattr(row, key, value)
            return row

    def processes(self, run_id: int, kind: str | None = None) -> list[Process]:
        with self._session() as s:
            query = select(Process).where(Process.run_id == run_id)
            if kind is not None:
                query = query.where(Process.kind == kind)
            return list(s.exec(query.order_by(col(Process.id))))

    def add_metrics(self, run_id: int, stage: int, rows: list[dict[str, Any]]) -> int:
        """Insert step metrics once per (stage, step); a repeated step keeps its latest figures."""
        if not rows:
            return 0
        with self._session() as s:
            steps = [r["step"] for r in rows]
            existing = {m.step: m for m in s.exec(select(Metric).where(
                Metric.run_id == run_id, Metric.stage == stage, col(Metric.step).in_(steps)))}
            for row in rows:
                metric = existing.get(row["step"])
                if metric is None:
                    metric = Metric(run_id=run_id, stage=stage, step=row["step"])
                    existing[row["step"]] = metric
                    s.add(metric)
                for key in ("loss", "learning_rate", "step_time_s", "clean"):
                    if key in row:
                        setattr(metric, key, row[key])
            return len(rows)

    def metrics(self, run_id: int, stage: int | None = None) -> list[Metric]:
        with self._session() as s:
            query = select(Metric).where(Metric.run_id == run_id)
            if stage is not None:
                query = query.where(Metric.stage == stage)
            return list(s.exec(query.order_by(col(Metric.stage), col(Metric.step))))

    def add_checkpoint(self, run_id: int, stage: int, step: int, weights_path: str, state_path: str | None) -> bool:
        """Record a checkpoint pair once; returns False when it was already known."""
        with self._session() as s:
            found = s.exec(select(Checkpoint).where(Checkpoint.run_id == run_id, Checkpoint.stage == stage,
                                                    Checkpoint.step == step)).first()
            if found is not None:
                found.weights_path, found.state_path = weights_path, state_path
                return False
            s.add(Checkpoint(run_id=run_id, stage=stage, step=step, weights_path=weights_path,
                             state_path=state_path))
            return True

    def forget_stage(self, run_id: int, stage: int) -> None:
        """Delete one stage's metrics and checkpoint records in one transaction (a deliberate restart)."""
        with self._session() as s:
            for row in s.exec(select(Metric).where(Metric.run_id == run_id, Metric.stage == stage)):
                s.delete(row)
            for ckpt in s.exec(select(Checkpoint).where(Checkpoint.run_id == run_id, Checkpoint.stage == stage)):
                s.delete(ckpt)

    def checkpoints(self, run_id: int, stage: int | None = None) -> list[Checkpoint]:
        with self._session() as s:
            query = select(Checkpoint).where(Checkpoint.run_id == run_id)
            if stage is not None:
                query = query.where(Checkpoint.stage == stage)
            return list(s.exec(query.order_by(col(Checkpoint.stage), col(Checkpoint.step))))

    def media_facts(self, keys: Iterable[tuple[str, int, int]]) -> dict[str, dict[str, Any]]:
        """The stored facts of each ``(path, size, mtime_ns)`` that was read at exactly that size and mtime."""
        wanted = {path: (size, mtime) for path, size, mtime in keys}
        found: dict[str, dict[str, Any]] = {}
        paths = list(wanted)
        with self._session() as s:
            for start in range(0, len(paths), 500):  # SQLite caps the parameters of one statement
                chunk = paths[start:start + 500]
                for row in s.exec(select(MediaFacts).where(col(MediaFacts.path).in_(chunk))):
                    if (row.size, row.mtime_ns) == wanted[row.path]:
                        found[row.path] = dict(row.facts)
        return found

    def save_media_facts(self, rows: Iterable[tuple[str, int, int, dict[str, Any]]]) -> None:
        """Store (or replace) the facts read from each ``(path, size, mtime_ns)``, in one transaction."""
        by_path = {path: (size, mtime, facts) for path, size, mtime, facts in rows}
        if not by_path:
            return
        with self._session() as s:
            paths = list(by_path)
            existing: dict[str, MediaFacts] = {}
            for start in range(0, len(paths), 500):
                chunk = paths[start:start + 500]
                existing.update({row.path: row for row in s.exec(
                    select(MediaFacts).where(col(MediaFacts.path).in_(chunk)))})
            for path, (size, mtime, facts) in by_path.items():
                row = existing.get(path) or MediaFacts(path=path, size=size, mtime_ns=mtime)
                row.size, row.mtime_ns, row.facts, row.read_at = size, mtime, facts, utcnow()
                s.add(row)
