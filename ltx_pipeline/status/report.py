"""The status report: every run, its phases, approval and next command, as one plain dict.

Read-only over the store (no lock, no writes), so ``status`` works while a driver runs and with
no driver at all. A run whose state says a phase is running, with no live driver holding its lock,
is reported as interrupted, never as running: a "running" row is not trusted on its own.
"""

from __future__ import annotations

import json
import os
import re
import socket
from collections.abc import Iterable
from dataclasses import asdict
from typing import TYPE_CHECKING, Any, NamedTuple

from ltx_pipeline.cache.hits import read_hits
from ltx_pipeline.engine.gates import current_gate
from ltx_pipeline.engine.lock import driver_on_store
from ltx_pipeline.errors import split_line
from ltx_pipeline.gpus.board import gpu_board
from ltx_pipeline.ltx.modes import MODES, generated_media
from ltx_pipeline.status.holdout_loss import holdout_loss
from ltx_pipeline.status.live import GpuReader, LogSummary, WeightsFiles, live_training
from ltx_pipeline.status.stored import autotune_sweep, planned_audio, probe_findings
from ltx_pipeline.store.rows import saved_id
from ltx_pipeline.store.states import PhaseState, RunState
from ltx_pipeline.workspace import Workspace

if TYPE_CHECKING:  # the reader and the full store answer the same queries
    from ltx_pipeline.store import PhaseRun, Run, Store
    from ltx_pipeline.store.reader import Record, StoreReader

__all__ = ["driver_alive", "status_report"]


def status_report(store: Store | StoreReader | None, workspace: Workspace, run_name: str | None = None, *,
                  log_summary: LogSummary | None = None, weights_files: WeightsFiles | None = None,
                  gpus: GpuReader | None = None) -> dict[str, Any]:
    """All runs of the workspace (or one), ready for a table or ``--json``.

    ``log_summary``, ``weights_files`` and ``gpus`` read the trainer's side (its log's tail, its
    checkpoint files, the GPUs now): the CLI hands them in (``status.live`` says which), since the
    engine knows no log format, file name or nvidia-smi.
    """
    readers = _Readers(log_summary, weights_files, gpus)
    entries: list[dict[str, Any]] = []
    if store is not None:
        runs: list[Run | Record] = list(store.list_runs())
        if run_name is not None:
            runs = [r for r in runs if r.name == run_name]
        entries = [_run_entry(store, workspace, r, readers) for r in runs]
    board = gpu_board(store) if store is not None else {"holders": [], "queue": []}
    for entry in entries:  # a run's own GPUs and its place in the queue, beside the whole board
        entry["gpus_held"] = [h for h in board["holders"] if h["run"] == entry["name"]]
        entry["gpu_queue"] = place = next((q for q in board["queue"] if q["run"] == entry["name"]), None)
        if place is not None:  # approved and waiting for GPUs: its stored state is still the gate it passed
            entry["state"] = _QUEUED
            entry["next_command"] = None if place["engine"] == "waiting" else (
                f"ltx-pipeline resume --workspace {workspace.root} --run {entry['name']} (its place in the GPU "
                "queue is kept)")
    return {"workspace": str(workspace.root), "runs": entries, "gpus": board}


class _Readers(NamedTuple):
    log_summary: LogSummary | None
    weights_files: WeightsFiles | None
    gpus: GpuReader | None


def _run_entry(store: Store | StoreReader, workspace: Workspace, run: Run | Record,
               readers: _Readers) -> dict[str, Any]:
    paths = workspace.run(run.name)
    # On a shared server the driver may be on another host: the server's advisory lock says who holds the run.
    driver = driver_on_store(store, run.name) if getattr(store, "is_postgres", False) else driver_alive(paths.lock_file)
    run_id = saved_id(run)
    latest = store.latest_phase_runs(run_id)
    state = run.state
    if state not in _BETWEEN_DRIVES and driver is None:  # in a phase, with no driver: told by that phase's row
        current = latest.get(state)
        detached = current is not None and current.status == PhaseState.DETACHED
        state = (PhaseState.DETACHED if detached else PhaseState.INTERRUPTED).value
    training = live_training(store, run, log_summary=readers.log_summary, weights_files=readers.weights_files,
                             gpus=readers.gpus)
    phases = [_phase_entry(row) for row in latest.values()]
    if state == PhaseState.DETACHED and training is not None and training["state"] in _ENDED_TRAINER:
        # "detached" means a trainer works on its own; once it ended unfollowed, the run and its phase are
        # interrupted and `resume` relaunches it: one state, one story, in the table and in --json (#43).
        state = PhaseState.INTERRUPTED.value
        for phase in phases:
            if phase["status"] == PhaseState.DETACHED:
                phase["status"] = PhaseState.INTERRUPTED.value
                phase["summary"] = (f"stage {training['stage']}'s trainer (pid {training['pid']}) ended without "
                                    f"finishing ({training['state']}); `resume` relaunches it from its newest "
                                    "checkpoint")
    if _stopped_by_user(state, training, latest):
        state = _STOPPED
    subject_row = current_gate(store, run_id)
    approval = _approval(store, run, subject_row)
    findings = probe_findings(latest.get("probe"))
    warnings = _settled_warnings([e for e in store.events(run_id) if e.level == "warning"], latest, state)
    return {
        "name": run.name,
        "state": state,
        "driver": driver,
        "request": run.request,
        "generates": _generates(run.request, latest.get("plan")),
        "created_at": run.created_at.isoformat(timespec="seconds"),
        "updated_at": run.updated_at.isoformat(timespec="seconds"),
        "phases": phases,
        "approval": approval,
        "findings": findings,
        "training": training,
        "autotune": _autotune(latest.get("autotune")),
        "cache_hits": [{**asdict(hit), "label": hit.label} for hit in read_hits(paths.root)],  # from the cache
        "holdout_loss": holdout_loss(paths.outputs),  # the figures file as evaluate wrote it (#45)
        "warnings": warnings[-10:],
        "next_command": _next_command(workspace, run.name, state, approval, _failure(latest.values(), state)),
    }


# A run's state between drives; any other state is the name of the phase a drive is (or was left) in.
_BETWEEN_DRIVES = frozenset(state.value for state in RunState)

# A detached trainer's liveness (``status.live``) once it ended without finishing. One that finished stays
# "detached" until a `resume` reads it back: nothing was lost, and nothing is relaunched.
_ENDED_TRAINER = ("crashed", "failed", "stopped", "lost")
# The state status shows for a run in the GPU queue (approved, its engine waiting or gone): not a stored state.
_QUEUED = "queued"
# The state status shows for a run whose trainer the user stopped (and nothing has run since): not a stored state.
_STOPPED = "stopped"
_STOPPABLE_STATES = (RunState.FAILED.value, PhaseState.INTERRUPTED.value, PhaseState.DETACHED.value)

def _stopped_by_user(state: str, training: dict[str, Any] | None, latest: dict[str, Any]) -> bool:
    """The user stopped its trainer (`ltx-pipeline stop`, the page's Stop) and nothing ran since: not a failure,
    whatever the train phase's row recorded (#43: one state, one story). A later phase's failure is its own."""
    if state not in _STOPPABLE_STATES or training is None or training["state"] != "stopped":
        return False
    return state != RunState.FAILED or latest.get("train") is not None and latest["train"].status == PhaseState.FAILED


# The warnings the engine records when it finds an attempt left running by a dead driver: true when written
# ("it will re-run"), stale once a later attempt ran. The store keeps what was said; status says what happened.
_INTERRUPTED_RE = re.compile(r"^(?P<phase>\S+) attempt (?P<attempt>\d+) was interrupted; it will re-run$")
_RUNS_AGAIN_RE = re.compile(r"^(?P<phase>\S+) was interrupted last time; it runs again\b")
_ENDED = {PhaseState.SUCCEEDED: "finished", PhaseState.FAILED: "failed",
          PhaseState.INTERRUPTED: "was interrupted too", PhaseState.GATE_STOPPED: "stopped at the VRAM gate",
          PhaseState.RUNNING: "was started", PhaseState.DETACHED: "trains detached"}


def _settled_warnings(events: list[Any], latest: dict[str, Any], state: str) -> list[str]:
    """Warning texts, an interrupted attempt's "it will re-run" told as what happened since.

    An interrupted attempt followed by a later attempt of its phase says how that one ended (its
    engine notice, "it runs again", then adds nothing and is left out); one the run finished without
    re-running says only that it was interrupted. One still to re-run keeps its text.
    """
    out: list[str] = []
    settled: dict[str, bool] = {}  # phase -> whether its latest interrupted attempt is told as settled
    for event in events:
        message = event.message
        if (found := _INTERRUPTED_RE.match(message)) is not None:
            phase, attempt = found["phase"], int(found["attempt"])
            row, settled[phase] = latest.get(phase), True
            if row is not None and row.attempt > attempt:
                ended = _ENDED.get(row.status, f"is {row.status}")
                message = f"{phase} attempt {attempt} was interrupted; it was re-run, and attempt {row.attempt} {ended}"
            elif state == RunState.FINISHED:
                message = f"{phase} attempt {attempt} was interrupted"
            else:
                settled[phase] = False
        elif (found := _RUNS_AGAIN_RE.match(message)) is not None and settled.get(found["phase"]):
            continue
        out.append(message)
    return out


def _generates(request: Any, plan: PhaseRun | Record | None) -> str | None:
    """What the run generates, in plan.md's words; None until a plan exists (nothing is decided before)."""
    mode = MODES.get(str(request.get("mode"))) if isinstance(request, dict) else None
    if mode is None or plan is None or plan.status not in (PhaseState.SUCCEEDED, PhaseState.DETACHED):
        return None
    return generated_media(mode, planned_audio(plan))


def _autotune(row: PhaseRun | Record | None) -> dict[str, Any] | None:
    """The sweep's trials and pruned configs, as the autotune phase stored them.

    A memory figure the trial did not measure is None (shown as "not measured"); its source, when
    the record names it, comes along (``peak_source``, ``validation_peak_source``).
    """
    return autotune_sweep(row)


def _phase_entry(row: PhaseRun | Record) -> dict[str, Any]:
    duration = (row.finished_at - row.started_at).total_seconds() if row.finished_at else None
    return {"phase": row.phase, "status": row.status, "attempt": row.attempt, "reason": row.reason,
            "started_at": row.started_at.isoformat(timespec="seconds"),
            "finished_at": row.finished_at.isoformat(timespec="seconds") if row.finished_at else None,
            "seconds": round(duration, 2) if duration is not None else None,
            "summary": row.summary, "error": row.error}


def _approval(store: Store | StoreReader, run: Run | Record, row: PhaseRun | Record | None) -> dict[str, Any]:
    if row is None or row.status != PhaseState.SUCCEEDED or row.approval_subject is None:
        return {"state": "no plan", "subject": None, "approved_at": None, "blockers": [], "gate": None}
    approval = store.approval_for(saved_id(run), row.approval_subject)
    return {"state": "approved" if approval else "awaiting approval", "subject": row.approval_subject,
            "approved_at": approval.approved_at.isoformat(timespec="seconds") if approval else None,
            "blockers": row.approval_blockers, "gate": "captions" if row.phase == "prepare" else "plan"}


def _failure(rows: Iterable[PhaseRun | Record], state: str) -> str | None:
    """The recorded error of the failed phase of a failed run (its one line: what, where, fix)."""
    if state != RunState.FAILED:
        return None
    return next((row.error for row in rows if row.status == PhaseState.FAILED and row.error), None)


def _next_command(workspace: Workspace, run: str, state: str, approval: dict[str, Any],
                  failure: str | None = None) -> str | None:
    target = f"--workspace {workspace.root} --run {run}"
    fix = split_line(failure)[1] if failure else None
    if fix:
        # A failure that says how to fix it repeats itself on a bare resume: the fix comes first.
        if "ltx-pipeline " in fix:  # the fix is itself a command (e.g. `resume --apply-fix`)
            return f"{fix} (with {target})"
        return f"{fix}; then: ltx-pipeline resume {target}"
    if state == RunState.FINISHED:
        return None
    if state == _STOPPED:
        return f"ltx-pipeline resume {target}"
    if state == RunState.AWAITING_APPROVAL:
        if approval["state"] == "approved":  # approved since the engine stopped at the gate: only resume is left
            return f"ltx-pipeline resume {target}"
        if approval["blockers"]:
            return f"provide the missing prerequisites (see plan.md), then: ltx-pipeline resume {target}"
        return f"ltx-pipeline approve {target} && ltx-pipeline resume {target}"
    if state == RunState.GATE_STOPPED:
        return f"ltx-pipeline resume {target} --accept-risk  (or abort)"
    if state not in (RunState.FAILED, PhaseState.INTERRUPTED, RunState.NEW, PhaseState.DETACHED) and state != "":
        return None  # a live driver is working on it
    return f"ltx-pipeline resume {target}"


def driver_alive(lock_file: os.PathLike[str] | str) -> dict[str, Any] | None:
    """The live driver recorded in a run's lock file, or None (no lock, dead pid, or another host)."""
    try:
        with open(lock_file, encoding="utf-8") as handle:
            record = json.loads(handle.read() or "{}")
        pid = int(record["pid"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if record.get("host") != socket.gethostname():
        return None
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return None
    except PermissionError:
        pass
    if not _holds_lock(lock_file):
        return None
    return {"pid": pid, "host": record["host"], "since": record.get("since")}


def _holds_lock(lock_file: os.PathLike[str] | str) -> bool:
    """True when some process holds the lock: test with a shared lock that is dropped at once."""
    import fcntl

    try:
        fd = os.open(lock_file, os.O_RDONLY)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    else:
        fcntl.flock(fd, fcntl.LOCK_UN)
        return False
    finally:
        os.close(fd)
