"""``HoldoutLoss``: what the evaluate phase stores of the holdout-loss measurement, or why there is none.

Measured: the figures file (``outputs/holdout-loss.json``), its plot, how many checkpoints were measured, the
step with the lowest holdout total (a fact, not a choice) and what it cost. Not measured: ``reason`` alone.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

__all__ = ["HoldoutLoss"]


class HoldoutLoss(BaseModel):
    """The holdout loss of a run's checkpoints, as the evaluate phase stores it."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    measured: bool
    reason: str | None = None  # why nothing was measured
    file: str | None = None  # outputs/holdout-loss.json
    plot: str | None = None  # outputs/holdout_loss.png
    checkpoints: int = 0  # measured, step 0 included
    lowest_step: int | None = None
    lowest_total: float | None = None
    holdout_samples: int = 0
    train_samples: int = 0
    seconds: float | None = None  # the forward passes' time over every checkpoint, as measured (model load apart)
