"""Which checkpoints the evaluation renders: ``--eval-checkpoints last|best|all|N`` as a pure rule.

Owns the choice and its words, nothing else: given the kept checkpoints (step, weights) and the holdout figures
(``outputs/holdout-loss.json``, read by ``read_holdout_totals``), the steps to render, each with why it was chosen
and its measured holdout total. The rule never judges quality: "best" is the lowest measured holdout total among
the kept checkpoints, a fact; where nothing was measured it falls back to the last checkpoint and says why. The
last checkpoint (the final weights) is always among the choices except under ``best``.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ltx_pipeline.ltx.eval_checkpoints import NUMBER
from ltx_pipeline.outputs.holdout_figures import FiguresUnreadable, read_figures
from ltx_pipeline.reports.contact_sheet import choose_steps

__all__ = ["CheckpointChoice", "ChosenCheckpoint", "choose_checkpoints", "read_holdout_totals"]


@dataclass(frozen=True)
class ChosenCheckpoint:
    """One checkpoint to render: its step, weights, measured holdout total (None: not measured) and why."""

    step: int
    weights: Path
    holdout: float | None
    why: str


@dataclass(frozen=True)
class CheckpointChoice:
    """The checkpoints to render, by step, and a note when the rule fell back (None otherwise)."""

    checkpoints: list[ChosenCheckpoint]
    note: str | None = None


def read_holdout_totals(path: Path) -> dict[int, float] | None:
    """Step -> holdout total from ``holdout-loss.json``; None when the file is absent, unreadable or holds no
    figures. Rows without a total are left out (a row the measurement could not compute)."""
    try:
        rows = read_figures(path)
    except FiguresUnreadable:
        return None
    totals = {row.step: row.holdout.total for row in rows or [] if row.holdout.total is not None}
    return totals or None


def choose_checkpoints(choice: str | None, kept: list[tuple[int, Path]],
                       holdout: dict[int, float] | None) -> CheckpointChoice:
    """The checkpoints ``choice`` names among ``kept`` (step, weights; the last is the final weights).

    Args:
        choice: ``last``, ``best``, ``all``, a number as text, or None for the default: the last checkpoint and
            the one with the lowest holdout total when they differ.
        kept: every kept checkpoint, any order; must not be empty.
        holdout: step -> measured holdout total (``read_holdout_totals``), or None when nothing was measured.
    """
    ordered = sorted(dict(kept).items())
    last_step = ordered[-1][0]
    measured = {step: total for step, total in (holdout or {}).items() if step in dict(ordered)}
    lowest = min(measured, key=lambda step: (measured[step], step)) if measured else None
    note = None
    if choice == "all":
        steps = [step for step, _ in ordered]
    elif choice is not None and NUMBER.match(choice):
        wanted = int(choice)
        every = [step for step, _ in ordered]
        steps = [last_step] if wanted == 1 else choose_steps(every, wanted)
    elif choice == "best":
        steps = [lowest if lowest is not None else last_step]
        if lowest is None:
            note = _fallback(holdout)
    elif choice == "last":
        steps = [last_step]
    else:
        steps = sorted({last_step, *([lowest] if lowest is not None else [])})
    if lowest is not None and holdout and min(holdout.values()) < measured[lowest]:
        base = min(holdout, key=lambda step: holdout[step])
        note = (f"the lowest holdout total measured is at step {base} ({holdout[base]:.4g}), which is not a kept "
                f"checkpoint; among the kept ones it is step {lowest} ({measured[lowest]:.4g})")
    return CheckpointChoice([ChosenCheckpoint(step, dict(ordered)[step], measured.get(step),
                                              _why(step, last_step, lowest)) for step in steps], note)


def _why(step: int, last: int, lowest: int | None) -> str:
    reasons = (["last"] if step == last else []) + (["lowest holdout"] if step == lowest else [])
    return ", ".join(reasons) or "evenly spaced"


def _fallback(holdout: dict[int, float] | None) -> str:
    why = ("no holdout loss was measured (no outputs/holdout-loss.json)" if holdout is None else
           "no kept checkpoint has a measured holdout loss")
    return f"--eval-checkpoints best: {why}, so the last checkpoint is rendered"
