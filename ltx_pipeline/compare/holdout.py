"""A run's holdout loss per checkpoint, as ``outputs/holdout-loss.json`` holds it (the evaluate phase writes it).

The file is a list of ``{"step": N, "checkpoint": path, "holdout": {"video", "audio", "total"}, "train": {...}}``,
one entry per measured checkpoint (step 0: the base). This reads it and nothing else: the lowest holdout
total is the smallest ``holdout.total`` the file holds, with its step and its video/audio parts as written.
A missing or unreadable file is a figure with a reason, never an error.
"""

from __future__ import annotations

from pathlib import Path

from ltx_pipeline.compare.records import Figure, HoldoutPoint
from ltx_pipeline.outputs.holdout_figures import FIGURES_FILE, CheckpointLoss, FiguresUnreadable, lowest, read_figures

__all__ = ["HOLDOUT_FILE", "holdout_curve", "lowest_holdout"]

HOLDOUT_FILE = FIGURES_FILE


def holdout_curve(outputs: Path) -> tuple[tuple[HoldoutPoint, ...], str | None]:
    """Each entry's step and holdout/train totals, by step; or () and why there are none."""
    rows, why = _rows(outputs)
    if not rows:
        return (), why or f"{outputs / HOLDOUT_FILE} holds no checkpoint entry"
    return tuple(HoldoutPoint(r.step, r.holdout.total, r.train.total if r.train else None) for r in rows), None


def lowest_holdout(outputs: Path) -> Figure:
    """The smallest holdout total in the file, its step, and that entry's video and audio parts as written."""
    source = str(outputs / HOLDOUT_FILE)
    rows, why = _rows(outputs)
    best = lowest(rows)
    if best is None:
        return Figure.missing(source, why or f"{HOLDOUT_FILE} holds no holdout total")
    return Figure(best.holdout.total, source, step=best.step,
                  detail={"video": best.holdout.video, "audio": best.holdout.audio, "checkpoint": best.checkpoint})


def _rows(outputs: Path) -> tuple[list[CheckpointLoss], str | None]:
    """The file's rows by step, or [] and why."""
    path = outputs / HOLDOUT_FILE
    try:
        rows = read_figures(path)
    except FiguresUnreadable as exc:
        return [], str(exc)
    if rows is None:
        return [], f"no {HOLDOUT_FILE}: the holdout loss was not measured for this run"
    return rows, None
