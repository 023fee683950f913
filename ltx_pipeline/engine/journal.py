"""``RunJournal``: what a phase may record about the outside world, without seeing the store.

Phases launch processes, parse logs and find checkpoints; the journal is the one narrow door
through which those facts reach the store (processes with their pid and start time, log offsets,
step metrics in batches, checkpoint pairs, what reading each media file found). A launch is always
supervised and detached, so it survives the engine, and a live recorded process is re-attached
instead of launched twice.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from ltx_pipeline.engine.processes import (
    exit_record,
    heartbeat_fresh,
    host_id,
    is_alive,
    launch_detached,
    pause_unless_exit,
    stop_group,
)
from ltx_pipeline.slurm import queue as slurm
from ltx_pipeline.slurm.queue import Submitted
from ltx_pipeline.store import Process, ProcessState, Store, saved_id
from ltx_pipeline.store.models import utcnow

__all__ = ["ConfigChangedSinceValidation", "Launchable", "ProcessHandle", "RunJournal", "Submitted",
           "ValidatedConfig", "config_sha256"]

# Kinds of launch that run a trainer on a config: each must carry the config as it was validated.
TRAINER_KINDS = ("train", "trial", "evaluate")


def config_sha256(path: Path) -> str:
    """``sha256:<hex>`` of a config file's bytes: what was validated, and what is launched."""
    return "sha256:" + hashlib.sha256(path.read_bytes()).hexdigest()


@dataclass(frozen=True)
class ValidatedConfig:
    """Proof that a config file passed validation: its path, its digest then, and who validated it.

    Only a validation step builds one; ``RunJournal.launch`` refuses a trainer launch without it, and
    refuses one whose file no longer has that digest.
    """

    path: Path
    sha256: str
    validator: str

    def check_unchanged(self) -> None:
        """Raise ``ConfigChangedSinceValidation`` when the file no longer has the digest that passed."""
        now = config_sha256(self.path)
        if now != self.sha256:
            raise ConfigChangedSinceValidation(
                f"{self.path} changed after it was validated ({self.sha256[:19]}… -> {now[:19]}…)")


class ConfigChangedSinceValidation(RuntimeError):
    """The config file changed between its validation and the launch that was to use it."""


class Launchable(Protocol):
    """A backend launch spec (``backends.base.LaunchSpec``, frozen): argv, cwd, env overrides, printable.

    Read-only members: the journal only reads a spec, and a frozen dataclass satisfies them.
    """

    @property
    def argv(self) -> tuple[str, ...]: ...

    @property
    def cwd(self) -> Path: ...

    @property
    def env(self) -> dict[str, str]: ...

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
    status: str  # a ProcessState value, as recorded
    printable: str
    heartbeat_at: Any = None
    config_sha256: str | None = None  # a trainer launch's config digest as validated (``ValidatedConfig``)
    argv: tuple[str, ...] = ()  # what was started (``run_to_end`` re-attaches only to the same command)

    @property
    def exit_file(self) -> Path:
        return Path(f"{self.log_path}.exit")

    @property
    def slurm_job(self) -> int | None:
        """The SLURM job id of a submitted training (host ``slurm:<id>``), else None."""
        return slurm.job_id_of(self.host)

    def alive(self) -> bool:
        if (job := self.slurm_job) is not None:
            # The queue's word; a state that cannot be told (no squeue here) is taken as alive, so a
            # job is never submitted twice (the train phase refuses to go on without the tools).
            return slurm.query_job(job).alive is not False
        if self.host != host_id():
            # On another host (a shared store): alive while its supervisor's heartbeat is fresh and no
            # exit record says it ended.
            return heartbeat_fresh(self.heartbeat_at) and exit_record(self.exit_file) is None
        # The supervisor's command line names its exit file: evidence that survives a clock shift.
        return is_alive(self.pid, self.create_time, self.host, marker=str(self.exit_file))

    def pause(self, seconds: float) -> None:
        """A follower's nap between polls: up to ``seconds``, ended early when a local supervisor exits."""
        if self.slurm_job is None and self.host == host_id():
            pause_unless_exit(self.pid, seconds)
        else:
            time.sleep(seconds)

    def waiting(self) -> bool:
        """Whether a SLURM job waits in the queue (pending, requeued): its log cannot grow yet."""
        job = self.slurm_job
        return job is not None and slurm.query_job(job).state in slurm.WAITING_STATES

    def exit(self) -> dict[str, Any] | None:
        """``{"exit_code", "signal"}``, or None while running or when it died without a record.

        A SLURM job's record is accounting's (``sacct``), with its final state as ``slurm_state``.
        """
        if (job := self.slurm_job) is not None:
            state = slurm.query_job(job)
            if state.alive is not False or state.exit_code is None:
                return None
            return {"exit_code": state.exit_code, "signal": state.signal, "slurm_state": state.state}
        return exit_record(self.exit_file)

    @classmethod
    def of(cls, row: Process) -> ProcessHandle:
        return cls(saved_id(row), row.kind, row.stage, row.pid, row.create_time, row.host, Path(row.log_path),
                   row.log_offset, row.status, row.printable, row.heartbeat_at, row.config_sha256, tuple(row.argv))


class RunJournal:
    """The records one phase of one run may write."""

    def __init__(self, store: Store, run_id: int, phase: str) -> None:
        self.store = store
        self.run_id = run_id
        self.phase = phase
        self.pinned: tuple[int, ...] | None = None  # the GPUs the run holds for this phase (None: no lease)
        self._narrow: Callable[[int], Sequence[int]] | None = None

    def pin(self, indices: Sequence[int], narrow: Callable[[int], Sequence[int]] | None = None) -> None:
        """Launch every process of this phase on the GPUs ``indices`` (nvidia-smi's), unless its own spec names
        some (an autotune trial runs on one of them); empty: nothing to pin (no GPU here, or a SLURM run).
        ``narrow(count)`` gives back all but the first ``count`` of them and returns those kept."""
        self.pinned = tuple(indices) or None
        self._narrow = narrow

    def narrow(self, count: int) -> None:
        """Keep only the first ``count`` pinned GPUs, giving the others back (a trainer launched after its
        preprocessing ran on every GPU held); nothing when nothing is pinned."""
        if self.pinned is not None and self._narrow is not None and count < len(self.pinned):
            self.pinned = tuple(self._narrow(count)) or None

    @staticmethod
    def handle(row: Process) -> ProcessHandle:
        """The handle of a stored process row (to check its liveness or read its exit)."""
        return ProcessHandle.of(row)

    # -- processes ----------------------------------------------------------------------------
    def launch(self, kind: str, stage: int, spec: Launchable, log_path: Path,
               validated: ValidatedConfig | None = None) -> ProcessHandle:
        """Start ``spec`` detached under the supervisor and record it before returning.

        Raises:
            ValueError: a trainer launch (``train``, ``trial``, ``evaluate``) without a validated config.
            ConfigChangedSinceValidation: the validated config's file no longer has its digest.
        """
        self._check_validated(kind, validated)
        exit_file = Path(f"{log_path}.exit")
        env = dict(spec.env)
        if self.pinned is not None and "CUDA_VISIBLE_DEVICES" not in env:
            env.update({"CUDA_DEVICE_ORDER": "PCI_BUS_ID", "CUDA_VISIBLE_DEVICES": ",".join(map(str, self.pinned))})
        launched = launch_detached(spec.argv, cwd=spec.cwd, env_overrides=env, log_path=log_path,
                                   exit_file=exit_file)
        record = spec.to_record()
        record["env"] = {**record["env"], **{k: env[k] for k in env.keys() - spec.env.keys()}}  # the pin, kept
        row = self.store.add_process(Process(
            run_id=self.run_id, phase=self.phase, kind=kind, stage=stage, pid=launched.pid,
            create_time=launched.create_time, host=launched.host, argv=record["argv"], cwd=record["cwd"],
            env=record["env"], printable=record["printable"], log_path=str(log_path),
            config_sha256=validated.sha256 if validated else None))
        return ProcessHandle.of(row)

    def submit(self, kind: str, stage: int, submit: Callable[[], Submitted], log_path: Path,
               validated: ValidatedConfig) -> ProcessHandle:
        """Submit a job through ``submit`` (``sbatch``) and record it: host ``slurm:<id>``, pid the job id.

        The config is checked against its validated digest first, as for a local launch, so a job is
        never submitted with a config that changed since it was validated.

        Raises:
            ConfigChangedSinceValidation: the validated config's file no longer has its digest.
        """
        self._check_validated(kind, validated)
        job = submit()
        row = self.store.add_process(Process(
            run_id=self.run_id, phase=self.phase, kind=kind, stage=stage, pid=job.job_id, create_time=time.time(),
            host=slurm.job_host(job.job_id), argv=list(job.argv), cwd=str(job.cwd), env={}, printable=job.printable,
            log_path=str(log_path), config_sha256=validated.sha256))
        return ProcessHandle.of(row)

    @staticmethod
    def _check_validated(kind: str, validated: ValidatedConfig | None) -> None:
        if kind in TRAINER_KINDS:
            if validated is None:
                raise ValueError(f"a {kind} launch needs the config as validated (ValidatedConfig)")
            validated.check_unchanged()

    def processes(self, kind: str | None = None, stage: int | None = None) -> list[ProcessHandle]:
        rows = self.store.processes(self.run_id, kind)
        return [ProcessHandle.of(r) for r in rows if stage is None or r.stage == stage]

    def live(self, kind: str, stage: int | None = None) -> ProcessHandle | None:
        """A recorded process of this kind that is still running (pid and start time match)."""
        return next((h for h in reversed(self.processes(kind, stage))
                     if h.status == ProcessState.RUNNING and h.alive()), None)

    def settle(self, handle: ProcessHandle, *, stopped_by_user: bool = False) -> ProcessHandle:
        """Record how a process that is no longer alive ended: exited (with its code) or crashed."""
        if handle.alive():
            return handle
        record = handle.exit()
        # A trainer that exited 0 finished on its own, even when a stop was asked for meanwhile
        # (a SIGINT that lands in a finaliser is swallowed by Python and the trainer runs on).
        if stopped_by_user and (record or {}).get("exit_code") != 0:
            status = ProcessState.STOPPED
        else:
            status = ProcessState.CRASHED if record is None else ProcessState.EXITED
        row = self.store.update_process(handle.id, status=status.value, ended_at=utcnow(),
                                        exit_code=None if record is None else record["exit_code"],
                                        stopped_by_user=stopped_by_user)
        return ProcessHandle.of(row)

    def correct_to_exited(self, handle: ProcessHandle) -> ProcessHandle:
        """Record what the supervisor's exit file says when an earlier engine recorded otherwise.

        An engine that died (or misjudged a live trainer) may have left ``running`` or ``crashed``;
        the exit file written by the supervisor when the trainer ended is the evidence that wins.
        """
        record = handle.exit()
        if record is None or handle.alive() or handle.status == ProcessState.EXITED:
            return handle
        row = self.store.update_process(handle.id, status=ProcessState.EXITED.value, exit_code=record["exit_code"],
                                        ended_at=utcnow())
        self.event(f"process {handle.id} (pid {handle.pid}) was recorded {handle.status}; its exit file says "
                   f"exit {record['exit_code']}: recorded as exited", level="warning")
        return ProcessHandle.of(row)

    def stop(self, handle: ProcessHandle, **timeouts: float) -> str:
        if (job := handle.slurm_job) is not None:
            how = slurm.cancel_job(job)  # SLURM signals every node's tasks, then kills them after KillWait
            self.wait(handle, poll_s=1.0, timeout_s=sum(timeouts.values()) or 45.0)
            self.settle(handle, stopped_by_user=True)
            return how
        how = stop_group(handle.pid, handle.create_time, handle.host, marker=str(handle.exit_file), **timeouts)
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

    def run_to_end(self, kind: str, stage: int, spec: Launchable, log_path: Path,
                   validated: ValidatedConfig | None = None) -> ProcessHandle:
        """Re-attach to the live process of this kind and stage that ran ``spec``, or launch it; wait for its end.

        Only a process started with the same argv is re-attached: a stage's cache fill runs several scripts,
        each into its own staging folder, and a resumed engine must never wait on one in place of another.
        A live one of this kind and stage with other arguments (left by an engine that died) is waited for
        first, as before: one process at a time appends to the log (and writes its exit file) and holds the GPU.
        """
        handle = None
        for live in reversed(self.processes(kind, stage)):
            if live.status != ProcessState.RUNNING or not live.alive():
                continue
            if handle is None and live.argv == tuple(spec.argv):
                handle = live
            else:
                self.wait(live)
        return self.wait(handle or self.launch(kind, stage, spec, log_path, validated))

    # -- media facts (workspace-wide cache, keyed by path, size and mtime) ------------------------
    def cached_media_facts(self, keys: list[tuple[str, int, int]]) -> dict[str, dict[str, Any]]:
        return self.store.media_facts(keys)

    def remember_media_facts(self, rows: list[tuple[str, int, int, dict[str, Any]]]) -> None:
        self.store.save_media_facts(rows)

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

    def forget_stage(self, stage: int) -> None:
        """Drop a stage's step metrics and checkpoint records: it trains again from step 0."""
        self.store.forget_stage(self.run_id, stage)

    def event(self, message: str, level: str = "info") -> None:
        self.store.record_event(self.run_id, message, phase=self.phase, level=level)
