"""``status --json``'s ``runs[].holdout_loss``: the run's measured holdout figures, read from their file.

Light on purpose (status imports no plotting, no torch): it reads ``outputs/holdout-loss.json`` as the evaluate
phase wrote it, and names the step with the lowest holdout total as a fact. None until something was measured.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ltx_pipeline.outputs.holdout_figures import FIGURES_FILE, FiguresUnreadable, lowest, read_figures

__all__ = ["FIGURES_FILE", "holdout_loss"]


def holdout_loss(outputs: Path) -> dict[str, Any] | None:
    """``{"file", "checkpoints": [rows as written], "lowest": {"step", "total"}}``, or None when no figures were
    written (or the file is not in its format: status reports, it does not fail)."""
    path = outputs / FIGURES_FILE
    try:
        figures = read_figures(path)
    except FiguresUnreadable:
        return None
    least = lowest(figures or [])
    if least is None:
        return None
    return {"file": str(path), "checkpoints": json.loads(path.read_text(encoding="utf-8")),
            "lowest": {"step": least.step, "total": least.holdout.total}}
