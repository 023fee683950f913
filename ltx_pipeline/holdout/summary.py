"""run-summary.md's "Holdout loss" section: the measured figures per checkpoint, or why there are none.

Facts only: which step had the lowest holdout loss, each checkpoint's figures, what was measured and what it cost.
No advice on which checkpoint to ship.
"""

from __future__ import annotations

import json
from pathlib import Path

from ltx_pipeline.holdout.protocol import SEED, SIGMAS
from ltx_pipeline.outputs.holdout_loss import HoldoutLoss

__all__ = ["HEADING", "holdout_section"]

HEADING = "## Holdout loss"


def _figure(value: float | None) -> str:
    return "-" if value is None else f"{value:.4g}"


def holdout_section(record: HoldoutLoss) -> str:
    """The section's body (the heading is ``HEADING``)."""
    if not record.measured:
        return f"Not measured: {record.reason}.\n"
    assert record.file is not None
    rows = json.loads(Path(record.file).read_text(encoding="utf-8"))
    sigmas = ", ".join(f"{s:g}" for s in SIGMAS)
    lines = [f"The lowest holdout loss was measured at step {record.lowest_step} ({_figure(record.lowest_total)}).",
             "",
             f"The trainer's own flow-matching loss on {record.holdout_samples} held-out row(s) (never trained on) and "
             f"on {record.train_samples} training row(s), each at sigma {sigmas} with noise seeded from {SEED}: the "
             "same noise for every checkpoint, so the figures compare checkpoints. It is a loss on fixed noise, not "
             "a quality score. Step 0 is the base model.", "",
             "| Step | Holdout total | Holdout video | Holdout audio | Train total | Train video | Train audio |",
             "|---|---|---|---|---|---|---|"]
    for row in rows:
        held, train = row["holdout"], row["train"]
        lines.append(f"| {row['step']} | {_figure(held['total'])} | {_figure(held['video'])} | "
                     f"{_figure(held['audio'])} | {_figure(train['total'])} | {_figure(train['video'])} | "
                     f"{_figure(train['audio'])} |")
    lines += ["", f"- Figures: `{Path(record.file).name}`; plot: `{Path(str(record.plot)).name}`.",
              f"- Cost, measured: {record.seconds:.1f} s of forward passes over {record.checkpoints} checkpoint(s) "
              "(the model loaded once, apart)."]
    return "\n".join(lines) + "\n"
