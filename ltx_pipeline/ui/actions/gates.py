"""Approve from the page: ``ltx-pipeline approve`` (the same ``driving.approve``), only for the gate the page drew.

The page sends the gate's kind and subject (the hash it was drawn with). The approval goes through only
while the run still waits at that gate with that subject; a plan or captions changed since (or already
approved) is a ``Conflict``: reload. Then the run goes on as ``ltx-pipeline resume --detach`` does, started
detached, so it trains on without the page or the server.
"""

from __future__ import annotations

from typing import Any

from ltx_pipeline.driving import approve, existing_run, find_workspace
from ltx_pipeline.errors import BadRequest
from ltx_pipeline.ui.actions.detached import shown
from ltx_pipeline.ui.actions.studio import Attempt, Conflict, Done, Studio
from ltx_pipeline.ui.run_state import captions_subject, open_gate

__all__ = ["approve_gate", "resume_args"]

STALE = "the plan changed since this page was drawn: reload"


def resume_args(studio: Studio, name: str, *extra: str) -> list[str]:
    return ["resume", "--workspace", studio.root, "--run", name, *extra]


def approve_gate(studio: Studio, attempt: Attempt, name: str, body: dict[str, Any]) -> Done:
    """Approve run ``name``'s open gate when it is the one the page drew, then resume the run detached.

    Raises:
        BadRequest: no such run, or the body lacks the gate or its subject.
        Conflict: the run waits at no gate, or at another one (or another subject) than the page's.
        ApprovalRefused: the plan's prerequisites are missing.
    """
    kind, subject = body.get("gate"), body.get("subject")
    if kind not in ("plan", "captions") or not isinstance(subject, str) or not subject:
        raise BadRequest("Approve needs the gate ('plan' or 'captions') and the subject shown on the page",
                         where="approve", fix="reload the run's page and press Approve again")
    resume = resume_args(studio, name, "--detach")
    attempt.command = f"{shown(['approve', '--workspace', studio.root, '--run', name])} && {shown(resume)}"
    ws, found = find_workspace(studio.workspace.root)
    store, run = existing_run(ws, found, name)
    gate = open_gate(store, run)
    if gate is None:
        raise Conflict(f"Run {name} waits at no gate now", where=f"run {name}", fix="reload the page")
    on_disk = captions_subject(ws.run(name).dataset) if gate.kind == "captions" else gate.subject
    if (gate.kind, gate.subject) != (kind, subject) or on_disk != subject:
        # The store's gate lags a caption edit until the resume it started re-runs prepare: what is approved must
        # also be the captions on disk, or a page drawn before the edit would approve text no longer there.
        raise Conflict(STALE.replace("plan", "captions") if gate.kind == "captions" == kind else STALE,
                       where=f"run {name}", fix=f"reload the page and read the {gate.kind} again")
    approval = approve(ws, store, run, approved_by=f"dashboard ({studio.who})")
    studio.launcher.launch(resume, ws.run(name).logs / "studio.log")
    return Done(name, attempt.command,
                f"Approved the {approval.gate.name.lower()} of run {name}; it goes on detached.")
