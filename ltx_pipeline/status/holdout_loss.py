"""``status --json``'s ``runs[].holdout_loss``: the run's measured holdout figures, read from their file.

Light on purpose (status imports no plotting, no torch): it reads ``outputs/holdout-loss.json`` as the evaluate
phase wrote it, and names the step with the lowest holdout total as a fact. None until something was measured.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ltx_pipeline.outputs.holdout_figures import FIGURES_FILE, lowest, parse_figures

__all__ = ["FIGURES_FILE", "holdout_loss"]


def holdout_loss(outputs: Path) -> dict[str, Any] | None:
    """``{"file", "checkpoints": [rows as written], "lowest": {"step", "total"}}``, or None when no figures were
    written (or the file is not in its format: status reports, it does not fail)."""
    path = outputs / FIGURES_FILE
    try:  # read once: the rows as written go out as they are, their typed view names the lowest
        rows = json.loads(path.read_text(encoding="utf-8"))
        least = lowest(parse_figures(rows, path))
    except (OSError, ValueError):  # absent, unreadable, or not in its format (FiguresUnreadable is a ValueError)
        return None
    if least is None:
        return None
    return {"file": str(path), "checkpoints": rows, "lowest": {"step": least.step, "total": least.holdout.total}}
