"""``holdout_loss.png``: the holdout and the training rows' fixed-noise loss, by checkpoint step.

The figure says what it is: the axis and title name a fixed-noise flow-matching loss of the held-out rows and of
a fixed subset of training rows, every measured point is drawn with a marker (no smoothing: each point is one
checkpoint, measured), the lowest holdout point is labelled with its step, the video part is drawn apart when
audio is in the total (audio dominates LTX-2's total and would hide what video does), and one point alone is
annotated rather than passing for a flat line. The y axis is never cropped to the points.
"""

from __future__ import annotations

import io
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ltx_pipeline.workspace import atomic_write

__all__ = ["plot_holdout_loss"]


def plot_holdout_loss(rows: Sequence[dict[str, Any]], path: Path, *, workspace: Path) -> Path:
    """Draw ``holdout-loss.json``'s rows (``measure.figures``) into ``path``; returns it."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    fig, ax = plt.subplots(figsize=(9, 4.5))
    steps = [r["step"] for r in rows]
    has_audio = any(r["holdout"]["audio"] is not None for r in rows)
    for name, colour in (("holdout", "tab:red"), ("train", "tab:blue")):
        label = "held-out rows" if name == "holdout" else "training rows (fixed subset)"
        ax.plot(steps, [r[name]["total"] for r in rows], marker="o", color=colour,
                label=f"{label}, total" if has_audio else label)
        if has_audio:
            ax.plot(steps, [r[name]["video"] for r in rows], marker="x", linestyle="--", color=colour, alpha=0.7,
                    label=f"{label}, video part")
    lowest = min(rows, key=lambda r: (r["holdout"]["total"], r["step"]))
    ax.annotate(f"lowest holdout: {lowest['holdout']['total']:.4g} at step {lowest['step']}",
                (lowest["step"], lowest["holdout"]["total"]), textcoords="offset points", xytext=(8, 8), fontsize=9)
    ax.set_ylim(bottom=0)
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))  # steps are whole numbers
    ax.set_xlabel("checkpoint step (0: the base model)")
    ax.set_ylabel("flow-matching loss, fixed noise")
    ax.set_title(f"Holdout vs training loss per checkpoint ({len(rows)} measured; not a quality score)")
    ax.legend(loc="best", fontsize="small")
    buffer = io.BytesIO()
    fig.tight_layout()
    fig.savefig(buffer, format="png", dpi=110)
    plt.close(fig)
    atomic_write(path, buffer.getvalue(), root=workspace)
    return path
