"""The drive loop: run the phases in order, skip what is unchanged, stop at the approval gate.

For each phase: build its context from the request and the stored upstream outputs, take its
fingerprint, and either skip it (finished before with the same fingerprint and nothing upstream
re-ran) or run it, saying why. Each attempt's row and the run's state are committed together.
A phase that yields an approval subject (the plan) stops the drive until that exact subject is
approved; changing anything it depends on produces a new subject, which voids the approval.
The runner imports no phase and no backend: the CLI hands it both.
"""

from __future__ import annotations

import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from enum import Enum
from typing import Any, Protocol

from ltx_pipeline.engine.context import RunContext
from ltx_pipeline.engine.fingerprint import FINGERPRINT_SCHEMA, SCHEMA_KEY, digest, rerun_reasons
from ltx_pipeline.engine.gates import current_gate
from ltx_pipeline.engine.journal import RunJournal
from ltx_pipeline.engine.lock import DriverLock
from ltx_pipeline.engine.machine import RunLifecycle
from ltx_pipeline.engine.options import RunOptions
from ltx_pipeline.engine.outputs import StoredOutputs
from ltx_pipeline.engine.phase import Phase, PhaseResult
from ltx_pipeline.engine.reporting import Reporter, SilentReporter
from ltx_pipeline.errors import ApprovalRefused, GateStopped, LtxPipelineError, PhaseFailed, split_line
from ltx_pipeline.store import PhaseRun, PhaseState, ProcessState, Run, RunState, Store, saved_id
from ltx_pipeline.workspace import Workspace

__all__ = ["DriveReport", "GpuClaim", "Outcome", "Runner", "approve_plan"]

EventSink = Callable[[str, str, str | None], None]  # (message, level, phase)


class GpuClaim(Protocol):
    """The run's GPUs, as the driving layer hands them in (``ltx_pipeline.gpus.RunGpus``)."""

    def claim(self, ctx: RunContext[Any, Any], span: tuple[int, int] | None = None) -> None: ...

    def release(self) -> None: ...


class Outcome(Enum):
    FINISHED = "finished"
    AWAITING_APPROVAL = "awaiting_approval"
    DETACHED = "detached"  # a phase left work running outside the engine (resume re-attaches)


@dataclass
class DriveReport:
    """What one drive did."""

    outcome: Outcome
    run_name: str
    ran: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    approval_subject: str | None = None
    approval_blockers: list[str] = field(default_factory=list)
    approval_phase: str | None = None  # the phase whose result waits for approval (plan, prepare)


@dataclass
class _Drive:
    """What one drive carries from phase to phase."""

    report: DriveReport
    frozen: dict[str, str]  # phases whose outputs a live later process was launched from -> what runs
    upstream: dict[str, StoredOutputs] = field(default_factory=dict)
    reran: str | None = None  # the last phase that ran and came to new outputs
    subject: str | None = None  # the approval subject met so far: phases past it run approved

    def ran(self, name: str, previous: PhaseRun | None, stored: StoredOutputs) -> None:
        self.upstream[name] = stored
        self.report.ran.append(name)
        if previous is not None and (previous.outputs is None or digest(stored.data) != digest(previous.outputs)):
            # Only new outputs make the phases after it run again: a phase that ran (a changed
            # environment, an upgrade) and came to the same result leaves their work standing. A phase
            # running a first time after later ones ran is one a new release added: those later phases
            # judge by their own parts whether its outputs concern them (a prepare that skipped does not).
            self.reran = name


class Runner:
    """Drives one run through ``phases`` against ``store``."""

    def __init__(self, store: Store, workspace: Workspace, phases: Sequence[Phase[Any]], *, backend: Any = None,
                 on_event: EventSink | None = None, options: RunOptions | None = None,
                 reporter: Reporter | None = None, gpus: GpuClaim | None = None) -> None:
        self.store = store
        self.workspace = workspace
        self.phases = tuple(phases)
        self.backend = backend
        self.on_event = on_event
        self.options = options or RunOptions()
        self.reporter: Reporter = reporter or SilentReporter()
        self.gpus = gpus  # the run's GPUs (``ltx_pipeline.gpus.RunGpus``): held from the first heavy phase run

    def drive(self, run: Run, request: Any) -> DriveReport:
        """Run every phase that needs to run, under the run's driver lock.

        Raises:
            RunLocked: another process drives this run.
            BadInput / GateStopped: a phase rejected its input or stopped at a hardware gate.
            PhaseFailed: a phase raised an unexpected error (traceback in the engine log).
        """
        paths = self.workspace.run(run.name)
        with DriverLock(paths.lock_file, run.name, store=self.store):
            for phase_name in self.store.interrupt_running(saved_id(run)):
                self._emit(run, f"{phase_name} was interrupted last time; it runs again (what it launched and "
                           "is still alive is re-attached, never launched twice)", "warning", phase_name)
            try:
                return self._drive_locked(run, request)
            finally:  # every exit path gives the GPUs back (a live launched trainer keeps them)
                if self.gpus is not None:
                    self.gpus.release()

    def _drive_locked(self, run: Run, request: Any) -> DriveReport:
        run = self.store.get_run(run.name) or run
        run_id = saved_id(run)
        lifecycle = RunLifecycle([p.name for p in self.phases], run.state)
        latest = self.store.latest_phase_runs(run_id)
        drive = _Drive(DriveReport(Outcome.FINISHED, run.name), self._frozen_phases(run_id, latest))
        for phase in self.phases:
            lifecycle.reach(phase.name)  # run or skipped, every phase is passed in order
            ctx = self._context(run, request, drive.upstream, phase.name, approved=drive.subject is not None)
            previous = latest.get(phase.name)
            parts, fingerprint_error = self._fingerprint(phase, ctx)
            fingerprint = digest(parts)
            reason = (_why(previous, fingerprint, parts, drive.reran, _request_defaults(request),
                           self.options.replan) if fingerprint_error is None else "inputs unreadable")
            if self._not_owed(run, phase, reason):
                drive.report.skipped.append(phase.name)
                continue
            reason = self._unless_frozen(run, phase.name, reason, previous, drive.frozen)
            if reason is None:
                assert previous is not None
                gate = self._skip(run, phase.name, previous, drive)
            else:
                if phase.heavy and drive.subject is None:
                    raise PhaseFailed(phase.name, 0, "a heavy phase is registered before any approval point")
                if phase.heavy and self.gpus is not None:
                    # take the GPUs this phase can use, wait in the queue, or refuse in one line
                    self.gpus.claim(ctx, phase.gpu_span(ctx) if hasattr(phase, "gpu_span") else None)
                lifecycle.approval_ok = drive.subject is not None
                lifecycle.enter_phase(phase.name, after_approval_point=drive.subject is not None)
                row = self.store.begin_phase(run_id, phase.name, reason=reason, fingerprint=fingerprint,
                                             parts=parts, run_state=lifecycle.state)
                self._emit(run, f"{phase.name} runs: {reason}", "info", phase.name)
                result, stored = self._run_phase(run, phase, ctx, row, lifecycle, fingerprint_error)
                drive.ran(phase.name, previous, stored)
                if result.pending:
                    drive.report.outcome = Outcome.DETACHED
                    return drive.report
                gate = (result.approval_subject, result.approval_blockers)
            if self._stops_for_approval(run_id, phase.name, gate, lifecycle, drive):
                return drive.report
        lifecycle.finish_drive()
        self.store.set_state(run_id, lifecycle.state, "all phases finished")
        return drive.report

    def _not_owed(self, run: Run, phase: Phase[Any], reason: str | None) -> bool:
        """An optional phase a later release added (an evaluation), met in a run that finished without it:
        the run's work stands as it is; new work is not owed to it, `resume --replan` asks for it."""
        if not (reason == "first run" and run.state == RunState.FINISHED and getattr(phase, "optional_extra", False)
                and not self.options.replan):
            return False
        self._emit(run, f"{phase.name} is new since this run finished; not run (`ltx-pipeline resume "
                   f"--workspace {self.workspace.root} --run {run.name} --replan` runs it)", "info", phase.name)
        return True

    def _unless_frozen(self, run: Run, name: str, reason: str | None, previous: PhaseRun | None,
                       frozen: dict[str, str]) -> str | None:
        """``reason``, or None while a live process of a later phase was launched from this phase's outputs:
        changing them now would describe a run that is not the one running. Report, apply once it has ended."""
        if reason is None or name not in frozen or previous is None:
            return reason
        self._emit(run, f"{name}: {reason}, since {frozen[name]} was launched; not applied "
                   "while it runs. Stop it (`ltx-pipeline stop`) or let it finish, then `ltx-pipeline "
                   "resume` applies the change.", "warning", name)
        return None

    def _skip(self, run: Run, name: str, previous: PhaseRun, drive: _Drive) -> tuple[str | None, list[str]]:
        """Pass a phase whose result stands: its stored outputs go downstream; returns its approval gate."""
        drive.upstream[name] = StoredOutputs(previous.outputs, previous.outputs_version)
        drive.report.skipped.append(name)
        self._emit(run, f"{name} unchanged, skipping ({previous.summary})", "info", name)
        return previous.approval_subject, previous.approval_blockers

    def _stops_for_approval(self, run_id: int, name: str, gate: tuple[str | None, list[str]],
                            lifecycle: RunLifecycle, drive: _Drive) -> bool:
        """Note the phase's approval point, if it has one; True when the drive stops to wait for approval."""
        subject, blockers = gate
        if not subject:
            return False
        drive.subject = subject
        drive.report.approval_subject = subject
        drive.report.approval_blockers = list(blockers)
        drive.report.approval_phase = name
        if self.store.approval_for(run_id, subject) is not None:
            return False
        lifecycle.wait_for_approval()
        self.store.set_state(run_id, lifecycle.state, f"waiting for approval of plan {subject}")
        drive.report.outcome = Outcome.AWAITING_APPROVAL
        return True

    def _frozen_phases(self, run_id: int, latest: dict[str, PhaseRun]) -> dict[str, str]:
        """Phases upstream of a phase whose launched process is still alive, each with what runs.

        Liveness is the journal's evidence (pid, start time, the supervisor's command line).
        """
        order = [p.name for p in self.phases]
        live = [row for row in self.store.processes(run_id) if row.status == ProcessState.RUNNING
                and RunJournal.handle(row).alive() and row.phase in order]
        if not live:
            return {}
        owner = min(live, key=lambda row: order.index(row.phase))
        what = f"{owner.kind} (pid {owner.pid}) of {owner.phase}"
        return {name: what for name in order[: order.index(owner.phase)] if name in latest}

    def _run_phase(self, run: Run, phase: Phase[Any], ctx: RunContext[Any, Any], row: PhaseRun, lifecycle: RunLifecycle,
                   fingerprint_error: LtxPipelineError | None) -> tuple[PhaseResult[Any], StoredOutputs]:
        row_id = saved_id(row)
        try:
            if fingerprint_error is not None:
                raise fingerprint_error
            result = phase.run(ctx)
            stored = _stored(phase, result)
        except GateStopped as exc:
            lifecycle.stop_phase_at_gate()
            self.store.finish_phase(row_id, status=PhaseState.GATE_STOPPED, run_state=lifecycle.state,
                                    error=exc.line())
            raise
        except LtxPipelineError as exc:
            lifecycle.fail_phase()
            self.store.finish_phase(row_id, status=PhaseState.FAILED, run_state=lifecycle.state, error=exc.line())
            raise
        except Exception as exc:
            log_path = self._log_traceback(run, phase.name, row.attempt)
            lifecycle.fail_phase()
            cause = f"{type(exc).__name__}: {exc}"
            self.store.finish_phase(row_id, status=PhaseState.FAILED, run_state=lifecycle.state, error=cause)
            raise PhaseFailed(phase.name, row.attempt, cause, log_path) from exc
        summary = phase.summary(result.outputs)
        self.store.finish_phase(row_id, status=PhaseState.DETACHED if result.pending else PhaseState.SUCCEEDED,
                                run_state=lifecycle.state, outputs=stored.data, outputs_version=stored.version,
                                summary=summary, approval_subject=result.approval_subject,
                                approval_blockers=result.approval_blockers)
        if self.on_event:
            self.on_event(summary, "result", phase.name)
        return result, stored

    def _fingerprint(self, phase: Phase[Any],
                     ctx: RunContext[Any, Any]) -> tuple[dict[str, Any], LtxPipelineError | None]:
        try:
            return {**phase.fingerprint(ctx), SCHEMA_KEY: FINGERPRINT_SCHEMA}, None
        except LtxPipelineError as exc:  # recorded as a failed attempt of this phase
            return {"error": exc.line()}, exc

    def _context(self, run: Run, request: Any, upstream: dict[str, StoredOutputs], phase: str,
                 approved: bool) -> RunContext[Any, Any]:
        def narrate(message: str, level: str) -> None:
            self._emit(run, message, level, phase)

        return RunContext(run_name=run.name, workspace=self.workspace.root, paths=self.workspace.run(run.name),
                          request=request, upstream=dict(upstream), backend=self.backend, approved=approved,
                          _narrator=narrate, phase=phase, journal=RunJournal(self.store, saved_id(run), phase),
                          options=self.options, reporter=self.reporter)

    def _emit(self, run: Run, message: str, level: str, phase: str | None) -> None:
        self.store.record_event(saved_id(run), message, phase=phase, level=level)
        if self.on_event:
            self.on_event(message, level, phase)

    def _log_traceback(self, run: Run, phase: str, attempt: int) -> str:
        log = self.workspace.run(run.name).engine_log
        log.parent.mkdir(parents=True, exist_ok=True)
        with log.open("a", encoding="utf-8") as handle:  # append-only log, not a data file
            handle.write(f"--- {phase} attempt {attempt}\n{traceback.format_exc()}\n")
        return str(log)


def _stored(phase: Phase[Any], result: PhaseResult[Any]) -> StoredOutputs:
    """What the store keeps of a phase's result: exactly the outputs type the phase declares.

    Raises:
        TypeError: a phase returned outputs of another type than it declares (a programming error).
    """
    if type(result.outputs) is not phase.outputs_type:
        raise TypeError(f"phase {phase.name} returned {type(result.outputs).__name__}, not its declared "
                        f"{phase.outputs_type.__name__}")
    return StoredOutputs.of(result.outputs)


def _request_defaults(request: Any) -> dict[str, Any]:
    """The request's field defaults by name (``RunRequest.field_defaults``), for parts an upgrade wrote."""
    defaults = getattr(request, "field_defaults", None)
    return dict(defaults()) if callable(defaults) else {}


def _why(previous: PhaseRun | None, fingerprint: str, parts: dict[str, Any], reran: str | None,
         defaults: dict[str, Any] | None = None, strict: bool = False) -> str | None:
    """Why a phase must run, or None when its finished result still stands (an upgrade's new parts included)."""
    if previous is None:
        return "first run"
    if previous.status == PhaseState.DETACHED:
        # The phase knows whether that work still runs (it follows it) or ended (it relaunches or collects it)
        # and says which; the engine knows only that it was left detached.
        return "it was left detached: followed if it still runs, else collected or relaunched"
    if previous.status != PhaseState.SUCCEEDED:
        return f"previous attempt {previous.attempt} {previous.status.replace('_', ' ')}{_ended_by(previous.error)}"
    if previous.fingerprint != fingerprint:
        # Parts an earlier version wrote are compared like with like: what it did not record is no change.
        reasons = rerun_reasons(previous.fingerprint_parts, parts, defaults=defaults, strict=strict)
        if reasons:
            return "; ".join(reasons)
    if reran is not None:
        return f"upstream {reran} re-ran"
    return None


def _ended_by(error: str | None) -> str:
    """": <what ended it>" from a recorded error's first line, its fix left out (a user's stop reads as one, not
    as a bare "failed"), at most 200 characters; "" with no error."""
    what = split_line((error or "").strip().split("\n", 1)[0])[0]
    return f": {what if len(what) <= 200 else what[:199] + '…'}" if what else ""


def approve_plan(store: Store, run: Run, approved_by: str) -> tuple[str, bool]:
    """Approve the run's current gate (``engine.gates``): the plan, then the prepared captions.

    Returns:
        (subject, newly_approved) — False when that subject was already approved.

    Raises:
        ApprovalRefused: no plan yet, the plan is out of date, or prerequisites are missing.
    """
    run_id = saved_id(run)
    row = current_gate(store, run_id)
    if row is None or row.approval_subject is None:
        raise ApprovalRefused(f"Run {run.name} has no plan to approve yet", where=f"run {run.name}",
                              fix=f"run `ltx-pipeline resume --run {run.name}` to write plan.md first")
    subject = row.approval_subject
    if row.status != PhaseState.SUCCEEDED:
        raise ApprovalRefused(f"The plan of run {run.name} is out of date ({row.phase} {row.status})",
                              fix=f"run `ltx-pipeline resume --run {run.name}` to rewrite it")
    if row.approval_blockers:
        raise ApprovalRefused(
            f"Plan cannot be approved while prerequisites are missing: {'; '.join(row.approval_blockers)}",
            where=f"run {run.name}", fix="provide them (plan.md lists each next step), then resume and approve")
    if store.approval_for(run_id, subject) is not None:
        return subject, False
    store.approve(run_id, subject, approved_by)
    return subject, True
