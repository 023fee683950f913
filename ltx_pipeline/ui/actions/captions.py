"""Edit one caption at the captions gate: saved atomically into the run's prepared files, then re-asked.

The clip is named as its row names it (``video``, or ``media_path``) in ``dataset.json`` or, for the held
out clips, ``holdout.jsonl``; the file is rewritten whole through ``workspace.atomic_write``, so a reader
never sees half of it. The gate's subject is the hash of those files, so it changes with the edit; then
``ltx-pipeline resume`` (detached) re-runs the prepare phase, which keeps the edit and asks again, as it
does for an edit made by hand. The new subject is returned: the one the page's next Approve must name.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ltx_pipeline.driving import existing_run, find_workspace
from ltx_pipeline.errors import BadRequest
from ltx_pipeline.ui.actions.detached import shown
from ltx_pipeline.ui.actions.gates import resume_args
from ltx_pipeline.ui.actions.studio import Attempt, Conflict, Done, Studio
from ltx_pipeline.ui.run_state import caption_files, captions_subject, open_gate, read_rows
from ltx_pipeline.workspace import atomic_write

__all__ = ["edit_caption"]


def edit_caption(studio: Studio, attempt: Attempt, name: str, body: dict[str, Any]) -> Done:
    """Save ``body["caption"]`` for ``body["clip"]`` in run ``name``'s captions, then resume it detached.

    Raises:
        BadRequest: no such run, a missing field, or no such clip in the prepared files.
        Conflict: the run does not wait at its captions gate.
    """
    clip, caption = body.get("clip"), body.get("caption")
    if not isinstance(clip, str) or not isinstance(caption, str) or not caption.strip():
        raise BadRequest("A caption edit needs the clip and a caption that is not empty", where="caption",
                         fix="write the caption, then Save")
    args = resume_args(studio, name)
    attempt.command = shown(args)
    ws, found = find_workspace(studio.workspace.root)
    store, run = existing_run(ws, found, name)
    gate = open_gate(store, run)
    if gate is None or gate.kind != "captions":
        raise Conflict(f"Run {name} does not wait at its captions gate", where=f"run {name}", fix="reload the page")
    metadata, holdout = caption_files(ws.run(name).dataset)
    if not (_save(metadata, clip, caption, ws.root) or _save(holdout, clip, caption, ws.root)):
        raise BadRequest(f"No clip {clip!r} in {metadata.name} or {holdout.name}", where=str(metadata),
                         fix="reload the page: the captions may have changed")
    subject = captions_subject(ws.run(name).dataset)
    studio.launcher.launch(args, ws.run(name).logs / "studio.log")
    return Done(name, attempt.command, f"Saved the caption of {clip}; the captions gate asks again.",
                {"subject": subject})


def _save(path: Path, clip: str, caption: str, root: Path) -> bool:
    """Set ``clip``'s caption in ``path`` (JSON list or JSONL), atomically; False when no row names it."""
    rows = read_rows(path)
    hits = [row for row in rows if clip in (row.get("video"), row.get("media_path"))]
    if not hits:
        return False
    for row in hits:
        row["caption"] = caption
    if path.suffix == ".jsonl":
        text = "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows)
    else:  # as the prepare phase writes it
        text = json.dumps(rows, indent=2, ensure_ascii=False) + "\n"
    atomic_write(path, text, root=root)
    return True
