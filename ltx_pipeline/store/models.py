"""SQLModel tables of the engine's store, one SQLite file per workspace.

The schema is created and changed only by the numbered Alembic migrations in ``alembic/``;
a test checks that the migrations produce exactly this metadata. JSON columns hold phase outputs
and fingerprint parts; timestamps are UTC. State columns are plain text holding the values of the
``str`` enums in ``store/states.py`` (a row read back holds the string).
"""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

from sqlalchemy import JSON, BigInteger, Column, UniqueConstraint
from sqlmodel import Field, SQLModel

from ltx_pipeline.store.rows import saved_id
from ltx_pipeline.store.states import ProcessState, RunState

__all__ = ["Approval", "Checkpoint", "Event", "GpuLease", "GpuWaiter", "MediaFacts", "Metric", "PhaseRun", "Process",
           "Run", "UiAudit", "saved_id", "utcnow"]


def utcnow() -> datetime:
    return datetime.now(timezone.utc)


class Run(SQLModel, table=True):
    """One training run: its request (as saved in run.yaml) and its state-machine state."""

    __tablename__ = "runs"

    id: int | None = Field(default=None, primary_key=True)
    name: str = Field(index=True, unique=True)
    request: dict[str, Any] = Field(default_factory=dict, sa_column=Column(JSON, nullable=False))
    state: str = Field(default=RunState.NEW.value)  # a RunState, or the name of the phase last entered
    created_at: datetime = Field(default_factory=utcnow)
    updated_at: datetime = Field(default_factory=utcnow)


class PhaseRun(SQLModel, table=True):
    """One attempt at one phase of a run, with the fingerprint of what it read and what came out."""

    __tablename__ = "phase_runs"
    __table_args__ = (UniqueConstraint("run_id", "phase", "attempt", name="uq_phase_attempt"),)

    id: int | None = Field(default=None, primary_key=True)
    run_id: int = Field(foreign_key="runs.id", index=True)
    phase: str
    attempt: int
    status: str  # a PhaseState: running, succeeded, failed, interrupted, gate_stopped, detached
    reason: str = Field(default="")  # why it ran: first run, or what changed
    started_at: datetime = Field(default_factory=utcnow)
    finished_at: datetime | None = None
    fingerprint: str = Field(default="")
    fingerprint_parts: dict[str, Any] = Field(default_factory=dict, sa_column=Column(JSON, nullable=False))
    outputs: dict[str, Any] = Field(default_factory=dict, sa_column=Column(JSON, nullable=False))
    # The schema version of ``outputs`` (engine.outputs.PhaseOutputs.SCHEMA_VERSION); 0: written before
    # phase outputs were typed, read through each model's ``upgrade``.
    outputs_version: int = Field(default=0, sa_column_kwargs={"server_default": "0"})
    summary: str = Field(default="")
    error: str | None = None
    approval_subject: str | None = None
    approval_blockers: list[str] = Field(default_factory=list, sa_column=Column(JSON, nullable=False))


class Event(SQLModel, table=True):
    """Narration and warnings, in order, as the user saw them."""

    __tablename__ = "events"

    id: int | None = Field(default=None, primary_key=True)
    run_id: int = Field(foreign_key="runs.id", index=True)
    phase: str | None = None
    level: str = Field(default="info")  # info, warning, error
    message: str
    created_at: datetime = Field(default_factory=utcnow)


class Approval(SQLModel, table=True):
    """A user's approval of one plan, identified by its content hash."""

    __tablename__ = "approvals"

    id: int | None = Field(default=None, primary_key=True)
    run_id: int = Field(foreign_key="runs.id", index=True)
    subject: str
    approved_by: str = Field(default="")
    approved_at: datetime = Field(default_factory=utcnow)


class Process(SQLModel, table=True):
    """A child process the engine launched (trainer, preprocessing, autotune trial).

    Liveness is ``pid`` plus the process's own start time (``create_time``), so a reused pid is
    never mistaken for our trainer. ``log_offset`` is how far the monitor has parsed its log.
    ``config_sha256`` is the digest of the trainer config as validated right before the launch: the
    config a trainer ran with is always one that passed validation.
    """

    __tablename__ = "processes"

    id: int | None = Field(default=None, primary_key=True)
    run_id: int = Field(foreign_key="runs.id", index=True)
    phase: str
    kind: str  # train, preprocess, trial
    stage: int = Field(default=1)
    pid: int
    create_time: float
    host: str
    argv: list[str] = Field(default_factory=list, sa_column=Column(JSON, nullable=False))
    cwd: str
    env: dict[str, str] = Field(default_factory=dict, sa_column=Column(JSON, nullable=False))
    printable: str
    log_path: str
    log_offset: int = Field(default=0, sa_type=BigInteger)  # a log past 2 GiB: 64-bit on every database
    status: str = Field(default=ProcessState.RUNNING.value)  # a ProcessState: running, exited, crashed, stopped
    exit_code: int | None = None
    stopped_by_user: bool = Field(default=False)
    started_at: datetime = Field(default_factory=utcnow)
    heartbeat_at: datetime | None = None  # the supervisor's last heartbeat (a store shared by hosts)
    ended_at: datetime | None = None
    config_sha256: str | None = None


class Metric(SQLModel, table=True):
    """One optimizer step's figures as the trainer logged them (deduplicated by step)."""

    __tablename__ = "metrics"
    __table_args__ = (UniqueConstraint("run_id", "stage", "step", name="uq_metric_step"),)

    id: int | None = Field(default=None, primary_key=True)
    run_id: int = Field(foreign_key="runs.id", index=True)
    stage: int = Field(default=1)
    step: int
    loss: float | None = None
    learning_rate: float | None = None
    step_time_s: float | None = None
    clean: bool = Field(default=True)  # False when the step also ran validation or a checkpoint save
    recorded_at: datetime = Field(default_factory=utcnow)


class Checkpoint(SQLModel, table=True):
    """A complete checkpoint pair found on disk: weights with the training state of the same step."""

    __tablename__ = "checkpoints"
    __table_args__ = (UniqueConstraint("run_id", "stage", "step", name="uq_checkpoint_step"),)

    id: int | None = Field(default=None, primary_key=True)
    run_id: int = Field(foreign_key="runs.id", index=True)
    stage: int = Field(default=1)
    step: int
    weights_path: str
    state_path: str | None = None
    discovered_at: datetime = Field(default_factory=utcnow)


class MediaFacts(SQLModel, table=True):
    """What reading one media file found (frames, fps, size, audio), kept while the file is unchanged.

    Workspace-wide, not per run: a resume or a new run on the same clips does not decode them again.
    A row counts only for the exact (size, mtime_ns) it was read at; a changed file is read again.
    """

    __tablename__ = "media_facts"

    id: int | None = Field(default=None, primary_key=True)
    path: str = Field(index=True, unique=True)
    size: int = Field(sa_type=BigInteger)  # bytes: past 2 GiB
    mtime_ns: int = Field(sa_type=BigInteger)  # nanoseconds since 1970: past 2**31 long ago
    facts: dict[str, Any] = Field(default_factory=dict, sa_column=Column(JSON, nullable=False))
    read_at: datetime = Field(default_factory=utcnow)


class GpuLease(SQLModel, table=True):
    """One GPU held by a run (or a trial, or a preprocessing job), while its holder lives.

    A row exists only while the GPU is held: releasing deletes it. ``(host, gpu_uuid)`` is unique, so two
    engines inserting the same GPU at once cannot both succeed (on SQLite and PostgreSQL alike); assumed GPUs
    (``ASSUMED-<n>``) are told apart by host. The holder is ``pid`` plus its start time (``create_time``): a
    lease whose process is dead, and whose run has no live launched process, is free (``ltx_pipeline.gpus``).
    """

    __tablename__ = "gpu_leases"
    __table_args__ = (UniqueConstraint("host", "gpu_uuid", name="uq_gpu_lease"),)

    id: int | None = Field(default=None, primary_key=True)
    run_id: int = Field(foreign_key="runs.id", index=True)
    kind: str = Field(default="run")  # run, trial, preprocess
    gpu_index: int
    gpu_uuid: str
    host: str
    pid: int
    create_time: float
    taken_at: datetime = Field(default_factory=utcnow)


class GpuWaiter(SQLModel, table=True):
    """A run waiting in the GPU queue: first come, first served by ``id`` (the order entries were made).

    The entry outlives its engine: ``resume`` re-attaches to the same row (its place kept) with its new pid.
    ``gpus`` lists the GPUs it may use as ``{"index", "uuid"}``; it waits for ``need`` of them.
    """

    __tablename__ = "gpu_waiters"

    id: int | None = Field(default=None, primary_key=True)
    run_id: int = Field(foreign_key="runs.id", index=True, unique=True)
    kind: str = Field(default="run")
    gpus: list[dict[str, Any]] = Field(default_factory=list, sa_column=Column(JSON, nullable=False))
    need: int | None = None  # how many of ``gpus`` it needs (None: all of them; entries before 0010)
    host: str
    pid: int
    create_time: float
    entered_at: datetime = Field(default_factory=utcnow)


class UiAudit(SQLModel, table=True):
    """One write action asked of the dashboard (the studio), accepted or refused: who, what, when, the outcome.

    ``run`` is the run's name, not a key: the record of a ``remove`` outlives the run it removed. ``who`` is the
    name the server was given for its token (``loopback`` when served without one), never the token itself.
    """

    __tablename__ = "ui_audit"

    id: int | None = Field(default=None, primary_key=True)
    at: datetime = Field(default_factory=utcnow)
    run: str | None = Field(default=None, index=True)
    who: str
    action: str
    command: str  # the CLI command it ran, shell-quoted for display only
    outcome: str  # "ok", or the one-line error
