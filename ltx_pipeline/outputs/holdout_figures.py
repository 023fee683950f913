"""``outputs/holdout-loss.json``: its name, its rows as types, and the one reader every consumer uses.

The evaluate phase writes it (``holdout.measure``); ``status``, ``compare``, ``export`` and the evaluation grid
read it through ``read_figures``. A row is ``{"step": N, "checkpoint": path, "holdout": {"video": x, "audio":
y|null, "total": z}, "train": {...}|null}``; step 0 is the base model. Light on purpose (json only): ``status``
imports it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["FIGURES_FILE", "CheckpointLoss", "FiguresUnreadable", "LossParts", "lowest", "parse_figures",
           "read_figures"]

FIGURES_FILE = "holdout-loss.json"  # under the run's outputs/ (the last trained stage's output_dir)


class FiguresUnreadable(ValueError):
    """The file is there but not in its format (the message says where and what)."""


@dataclass(frozen=True)
class LossParts:
    """One loss figure: video and audio apart (None where that modality is not trained), and their total (None
    where the measurement could not compute it)."""

    video: float | None
    audio: float | None
    total: float | None


@dataclass(frozen=True)
class CheckpointLoss:
    """One measured checkpoint: its step, its weights file as written, the holdout figure and the training rows'."""

    step: int
    checkpoint: str | None  # None at step 0: the base model has no weights file of its own
    holdout: LossParts
    train: LossParts | None


def read_figures(path: Path) -> list[CheckpointLoss] | None:
    """The rows of ``path`` by step, or None when the file does not exist.

    Raises:
        FiguresUnreadable: the file cannot be read or a row is not in the format above.
    """
    try:
        rows = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        raise FiguresUnreadable(f"{path} cannot be read: {exc}") from exc
    return parse_figures(rows, path)


def parse_figures(rows: Any, path: Path) -> list[CheckpointLoss]:
    """``rows`` (the file's JSON, already read) by step.

    Raises:
        FiguresUnreadable: not a list of rows in the format above.
    """
    if not isinstance(rows, list):
        raise FiguresUnreadable(f"{path} is not a list of checkpoint rows")
    try:
        return sorted((_row(row) for row in rows), key=lambda r: r.step)
    except (TypeError, KeyError, ValueError) as exc:
        raise FiguresUnreadable(f"{path} holds a row that is not a checkpoint's figures ({exc!r})") from exc


def lowest(figures: list[CheckpointLoss]) -> CheckpointLoss | None:
    """The row with the smallest holdout total (the earlier step on a tie): a fact, not a recommendation."""
    measured = [(r.holdout.total, r.step, r) for r in figures if r.holdout.total is not None]
    return min(measured, key=lambda m: (m[0], m[1]))[2] if measured else None


def _row(row: Any) -> CheckpointLoss:
    step = row["step"]
    if not isinstance(step, int) or isinstance(step, bool):
        raise ValueError(f"step {step!r} is not an integer")
    train = row.get("train")
    checkpoint = row["checkpoint"]
    return CheckpointLoss(step, None if checkpoint is None else str(checkpoint), _parts(row["holdout"]),
                          _parts(train) if train else None)


def _parts(part: Any) -> LossParts:
    video, audio, total = (part.get(name) for name in ("video", "audio", "total"))
    if "total" not in part:
        raise KeyError("total")
    return LossParts(*(None if value is None else float(value) for value in (video, audio, total)))
