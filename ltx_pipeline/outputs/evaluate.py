"""``EvaluateOutputs``: the evaluation renders of the final weights (or why there are none yet).

Three shapes share the model: skipped (``--skip-eval``: ``skipped`` and ``reason``), detached
(``pending``: the render goes on, ``resume`` collects it) and rendered (the listing).
"""

from __future__ import annotations

from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, JsonValue

from ltx_pipeline.engine.outputs import PhaseOutputs
from ltx_pipeline.outputs.holdout_loss import HoldoutLoss

__all__ = ["EvaluateOutputs", "Render"]

_FROZEN = ConfigDict(frozen=True, extra="forbid")


class Render(BaseModel):
    """One render as ``prompts.json`` lists it."""

    model_config = _FROZEN

    file: str | None  # None: the backend writes no render files
    category: str  # ``ltx.evaluation.CATEGORIES``
    prompt: str
    source: str
    conditions: list[dict[str, JsonValue]] = []  # the mode's conditions (media paths), as the trainer reads
    conditions_from: str | None = None
    video_dims: list[int] | None = None


class EvaluateOutputs(PhaseOutputs):
    PHASE: ClassVar[str] = "evaluate"
    SCHEMA_VERSION: ClassVar[int] = 1

    skipped: bool | None = None
    reason: str | None = None  # why it was skipped
    pending: bool = False  # the render goes on detached
    weights: str | None = None
    renders: list[Render] = []
    notes: dict[str, str] = {}  # category -> why it has no prompts
    contact_sheet: str | None = None
    retried_dims: list[int] | None = None
    eval_config: str | None = None
    prompts_file: str | None = None
    holdout_loss: HoldoutLoss | None = None  # measured before the renders (None: a run from before #45)
    grid: str | None = None  # outputs/eval/grid.png: checkpoints x prompts (evaluation.checkpoint_grid)

    def to_stored(self) -> dict[str, Any]:
        if self.pending:
            return {"pending": True}
        if self.skipped:
            held = {"holdout_loss": self.holdout_loss.model_dump(mode="json")} if self.holdout_loss else {}
            return {"skipped": True, "reason": self.reason, **held}
        data = self.model_dump(mode="json")
        if self.holdout_loss is None:
            data.pop("holdout_loss")
        if self.grid is None:
            data.pop("grid")
        data.pop("reason")
        data.pop("pending")
        return data
