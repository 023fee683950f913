"""Which checkpoint an export takes: ``--step N``, ``last`` (the default) or ``best`` (lowest holdout loss).

``best`` is a figure, not a judgement: the checkpoint whose total holdout loss in ``outputs/holdout-loss.json``
(the evaluate phase's fixed-noise flow-matching loss, ``[{"step", "checkpoint", "holdout": {"video", "audio",
"total"}, "train": {...}}]``) is lowest, the earlier step on a tie. Without that file ``best`` is refused;
nothing is guessed. Pure but for reading that one file.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from ltx_pipeline.errors import BadInput, BadRequest
from ltx_pipeline.outputs.holdout_figures import CheckpointLoss, FiguresUnreadable, lowest, read_figures

__all__ = ["Candidate", "Chosen", "StepSpec", "choose", "parse_step", "read_holdout"]

StepSpec = int | Literal["last", "best"]


@dataclass(frozen=True)
class Candidate:
    """A weights file of the run's last trained stage, with the step in its name."""

    step: int
    weights: Path


@dataclass(frozen=True)
class Chosen:
    """The checkpoint to export, how it was chosen, and its holdout figure when one was measured."""

    step: int
    weights: Path
    chosen_by: str  # "--step N", "last" or "best"
    figure: CheckpointLoss | None


def parse_step(text: str) -> StepSpec:
    """``--step``'s value: a step number, ``last`` or ``best``.

    Raises:
        BadRequest: anything else.
    """
    value = text.strip().lower()
    if value in ("last", "best"):
        return "last" if value == "last" else "best"
    if value.isdigit():
        return int(value)
    raise BadRequest(f"--step {text!r} is neither a step number, last nor best", where="--step",
                     fix="pass a checkpoint's step (see `ltx-pipeline status`), last or best")


def read_holdout(path: Path) -> list[CheckpointLoss] | None:
    """The figures in ``holdout-loss.json``, or None when the file is absent.

    Raises:
        BadInput: the file is there but not in its format.
    """
    try:
        return read_figures(path)
    except FiguresUnreadable as exc:
        raise BadInput(str(exc), where=str(path),
                       fix="the evaluate phase wrote it in this format: restore it, or pass --step last or a "
                           "checkpoint's step number") from exc


def choose(candidates: list[Candidate], spec: StepSpec, figures: list[CheckpointLoss] | None,
           figures_file: Path) -> Chosen:
    """The checkpoint ``spec`` names among ``candidates`` (ascending steps), with its holdout figure.

    Raises:
        BadRequest: no checkpoint of that step; ``best`` without measured figures.
    """
    by_step = {c.step: c for c in candidates}
    if spec == "best":
        return _best(by_step, figures, figures_file)
    candidate = candidates[-1] if spec == "last" else by_step.get(spec)
    if candidate is None:
        steps = ", ".join(str(s) for s in by_step)
        raise BadRequest(f"The run has no checkpoint at step {spec}", where="--step",
                         fix=f"pass one of its checkpoints' steps: {steps} (or last, or best)")
    figure = next((f for f in figures or [] if f.step == candidate.step), None)
    return Chosen(candidate.step, candidate.weights, "last" if spec == "last" else f"--step {spec}", figure)


def _best(by_step: dict[int, Candidate], figures: list[CheckpointLoss] | None, figures_file: Path) -> Chosen:
    if not figures:
        raise BadRequest(f"--step best needs the holdout loss per checkpoint, and {figures_file} "
                         f"{'lists no checkpoint' if figures is not None else 'does not exist'}", where="--step best",
                         fix="measure it (a run with a holdout measures it in its evaluate phase), or pass "
                             "--step last or a step number")
    # Step 0 is the base model, which has no weights to export.
    measured = [f for f in figures if f.step in by_step]
    if not measured:
        raise BadRequest(f"None of the checkpoints measured in {figures_file} is among the run's weights files "
                         f"(steps {', '.join(str(s) for s in by_step)})", where="--step best",
                         fix="pass --step last or one of those steps")
    best = lowest(measured)
    if best is None:
        raise BadRequest(f"No checkpoint in {figures_file} has a holdout total", where="--step best",
                         fix="pass --step last or a checkpoint's step number")
    return Chosen(best.step, by_step[best.step].weights, "best", best)
