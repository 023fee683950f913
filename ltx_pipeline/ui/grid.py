"""The run page's checkpoint grid: the same prompts and seeds at each chosen checkpoint, one row each.

Read from ``outputs/eval/grid.json`` (``evaluation.checkpoint_grid`` writes it beside ``grid.png``): a row per
checkpoint with its step, its measured holdout total (None when not measured) and why it was chosen, and a
render per prompt, each with a URL only where the file route serves it. The page plays a row's renders side by
side. Nothing here writes; a missing or unreadable ``grid.json`` is no grid.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ltx_pipeline.outputs.evaluate import EvaluateOutputs
from ltx_pipeline.ui.files import file_url

__all__ = ["checkpoint_grid"]

_KINDS = {".mp4": "video", ".webm": "video", ".png": "image", ".wav": "audio"}


def checkpoint_grid(root: Path, outputs: EvaluateOutputs | None) -> dict[str, Any] | None:
    """``{"picture", "note", "prompts": [...], "rows": [{"step", "holdout", "why", "items": [{"url", "kind",
    "name"}]}]}``, or None when the evaluation drew no grid."""
    if outputs is None or not outputs.grid:
        return None
    try:
        data = json.loads(Path(outputs.grid).with_name("grid.json").read_text(encoding="utf-8"))
        rows = [{"step": int(row["step"]), "holdout": row.get("holdout"), "why": row.get("why"),
                 "items": [_item(root, file) for file in row["renders"]]} for row in data["rows"]]
        prompts = [str(p["prompt"]) for p in data["prompts"]]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return {"picture": file_url(root, outputs.grid), "note": data.get("note"), "prompts": prompts, "rows": rows}


def _item(root: Path, file: str | None) -> dict[str, Any]:
    if not file:
        return {"url": None, "kind": None, "name": None}
    return {"url": file_url(root, file), "kind": _KINDS.get(Path(file).suffix.lower(), "video"),
            "name": Path(file).name}
