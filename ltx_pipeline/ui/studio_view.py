"""The run page's studio data: the open gate and what it shows, the actions possible now, the audit.

Added to the live view (``views.live_view``) so the page redraws its controls as the run moves: ``gate``
(kind, subject, the file to read), ``plan_markdown`` at the plan gate, ``captions`` at the captions gate
(each clip with its caption, a URL to play it and whether it is held out), ``actions`` (what the control
bar may offer now), ``trained_steps``, ``fix`` (the proposed fix of a failure) and ``audit`` (newest first).
Read-only, like every view.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from ltx_pipeline.errors import split_line
from ltx_pipeline.ui.run_state import caption_files, open_gate, read_rows, trained_steps
from ltx_pipeline.workspace import Workspace

if TYPE_CHECKING:
    from ltx_pipeline.store import Run, Store
    from ltx_pipeline.store.reader import Record, StoreReader

__all__ = ["studio_view"]


def studio_view(store: Store | StoreReader, workspace: Workspace, run: Run | Record, entry: dict[str, Any],
                data_roots: Sequence[Path] = ()) -> dict[str, Any]:
    """The studio's part of the live view of ``run`` (``entry``: its status entry)."""
    paths = workspace.run(run.name)
    gate = open_gate(store, run)
    trained = trained_steps(store, run)
    fix = _fix(entry)
    view: dict[str, Any] = {"gate": None, "trained_steps": trained, "fix": fix,
                            "actions": _actions(entry, trained, fix), "audit": _audit(store, run.name)}
    if gate is None:
        return view
    review = paths.plan_file if gate.kind == "plan" else caption_files(paths.dataset)[0]
    view["gate"] = {"kind": gate.kind, "subject": gate.subject,
                    "review": review.relative_to(workspace.root).as_posix()}
    if gate.kind == "plan":
        view["plan_markdown"] = paths.plan_file.read_text(encoding="utf-8") if paths.plan_file.exists() else ""
    else:
        view["captions"] = _captions(workspace.root, paths.dataset, data_roots)
    return view


def _actions(entry: dict[str, Any], trained: int | None, fix: str | None) -> list[str]:
    """What the control bar may offer now (each action checks again when asked)."""
    training = entry.get("training") or {}
    training_now = training.get("state") == "running"
    idle = entry.get("driver") is None and not training_now
    state = entry.get("state")
    actions = []
    if idle and state not in ("finished", "awaiting_approval"):
        actions.append("resume")
    if training_now:
        actions.append("stop")
    if idle and state == "finished" and trained is not None:
        actions.append("continue")
    if idle and fix and "--apply-fix" in fix:
        actions.append("apply_fix")
    if idle:
        actions.append("remove")
    return actions


def _fix(entry: dict[str, Any]) -> str | None:
    """The fix a failed phase's error proposes (its text after "Fix: "), if any."""
    failed = next((p for p in entry.get("phases", []) if p.get("status") == "failed" and p.get("error")), None)
    fix = split_line(str(failed["error"]))[1] if failed else None
    return f"{fix}." if fix else None  # shown as a sentence


def _audit(store: Store | StoreReader, run: str) -> list[dict[str, Any]]:
    return [{"at": row.at.isoformat(timespec="seconds"), "who": row.who, "action": row.action,
             "command": row.command, "outcome": row.outcome} for row in store.audit_rows(run)]


def _captions(root: Path, folder: Path, data_roots: Sequence[Path]) -> list[dict[str, Any]]:
    """Every prepared clip with its caption (the held-out ones last, marked), and a URL that plays it."""
    metadata, holdout = caption_files(folder)
    out = []
    for rows, held in ((read_rows(metadata), False), (read_rows(holdout), True)):
        for row in rows:
            clip = str(row.get("video") or row.get("media_path") or "")
            out.append({"clip": clip, "caption": str(row.get("caption") or ""),
                        "video": _video_url(root, folder / clip, data_roots), "holdout": held})
    return out


def _video_url(root: Path, clip: Path, data_roots: Sequence[Path]) -> str | None:
    """``/files/...`` for a clip inside the workspace, the studio's media route for one under a data root
    (prepared clips are links to the user's files), else None: nothing else is served."""
    try:
        real = clip.resolve()
    except OSError:
        return None
    if real.is_relative_to(root.resolve()):
        return "/files/" + quote(real.relative_to(root.resolve()).as_posix())
    if any(real.is_relative_to(r) for r in data_roots):
        return "/api/studio/media?path=" + quote(str(real), safe="")
    return None
