"""Driving a run through the engine: the backend its request names, the phase registry, and the gates.

``drive`` hands the engine ``phases.PHASES`` (read when called, so a test's registry is the one driven)
and the backend built from the run's request, drives the run, and, when asked to (``run --approve``,
the demo, a benchmark), approves each gate it reaches once and drives on. It returns how the drive ended
(``engine.Outcome``) and, at a gate, which one; errors are the project's (``RunLocked``, ``PhaseFailed``,
``BadInput``...). Nothing here prints: the caller watches through ``DriveHooks``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from ltx_pipeline.backends import make_backend
from ltx_pipeline.backends.base import TrainerBackend
from ltx_pipeline.driving.gates import Approval, Gate, gate_of
from ltx_pipeline.engine import Outcome, Phase, Runner, approve_plan
from ltx_pipeline.engine.options import RunOptions
from ltx_pipeline.engine.reporting import Reporter
from ltx_pipeline.gpus import RunGpus
from ltx_pipeline.request import RunRequest
from ltx_pipeline.store import Run, Store, saved_id
from ltx_pipeline.workspace import Workspace

__all__ = ["DriveHooks", "Driven", "backend_for", "drive", "phases_through"]

EventSink = Callable[[str, str, str | None], None]  # (message, level, phase), as the runner emits them


@dataclass(frozen=True)
class DriveHooks:
    """How a caller watches a drive: the runner's events, its progress reporter, and each gate approved."""

    on_event: EventSink | None = None
    reporter: Reporter | None = None
    on_approved: Callable[[Approval], None] | None = None


@dataclass(frozen=True)
class Driven:
    """How a drive ended: finished, detached (work goes on without the driver), or at ``gate``."""

    run: str
    outcome: Outcome
    gate: Gate | None = None  # set when the outcome is ``AWAITING_APPROVAL``


def backend_for(request: RunRequest) -> TrainerBackend:
    """The trainer backend the request names, built with the request's own settings for it."""
    return make_backend(request.backend, trainer_root=request.trainer_root, trainer_python=request.trainer_python,
                        surface=request.surface, assume_gpu=request.assume_gpu,
                        memory_scale=request.reference_memory_scale, nvidia_smi=request.nvidia_smi)


def phases_through(last: str | None = None) -> tuple[Phase[Any], ...]:
    """The registry (``phases.PHASES``), or its phases up to and including ``last`` (a benchmark's autotune)."""
    from phases import PHASES  # the registry is handed to the engine here, not imported by it

    names = [p.name for p in PHASES]
    if last is None:
        return tuple(PHASES)
    if last in names:
        return tuple(PHASES[: names.index(last) + 1])
    if last != "autotune":
        raise ValueError(f"no phase {last!r} in the registry")
    from phases.autotune import PHASE as AUTOTUNE  # a registry without it (a test's): it runs right after validate

    return (*PHASES[: names.index("validate") + 1], AUTOTUNE)


def drive(ws: Workspace, store: Store, run: Run, request: RunRequest, *, approve_as: str | None = None,
          options: RunOptions | None = None, hooks: DriveHooks | None = None,
          phases: Sequence[Phase[Any]] | None = None) -> Driven:
    """Drive ``run`` with ``request`` (saved as the request it was last driven with) until it finishes,
    detaches or stops at a gate.

    Args:
        approve_as: approve every gate reached, each once, recorded as approved by this name (None: stop there).
        options: the drive's options (``--detach``, ``--apply-fix``...).
        hooks: the caller's event sink, progress reporter and approval callback.
        phases: the phases to drive (default: the whole registry).

    Raises:
        RunLocked: another driver holds the run.
        BadInput / GateStopped / PhaseFailed: a phase refused its input, a hardware gate stopped, a phase failed.
        ApprovalRefused: ``approve_as`` met a gate that cannot be approved (a prerequisite is missing).
    """
    hooks = hooks or DriveHooks()
    store.update_request(saved_id(run), request.model_dump(mode="json"))
    options = options or RunOptions()
    gpus = RunGpus(store, saved_id(run), run.name, str(ws.root), queue=options.queue)
    runner = Runner(store, ws, phases_through() if phases is None else phases, backend=backend_for(request),
                    on_event=hooks.on_event, options=options, reporter=hooks.reporter, gpus=gpus)
    report = runner.drive(run, request)
    approved: set[str] = set()
    while report.outcome is Outcome.AWAITING_APPROVAL and approve_as and report.approval_subject not in approved:
        subject, new = approve_plan(store, run, approved_by=approve_as)
        approved.add(subject)
        if hooks.on_approved is not None:
            hooks.on_approved(Approval(run.name, gate_of(ws, run.name, report.approval_phase, subject), new))
        report = runner.drive(run, request)
    if report.outcome is not Outcome.AWAITING_APPROVAL:
        return Driven(run.name, report.outcome)
    gate = gate_of(ws, run.name, report.approval_phase, report.approval_subject or "", report.approval_blockers)
    return Driven(run.name, report.outcome, gate)
