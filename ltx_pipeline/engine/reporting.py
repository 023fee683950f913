"""What a phase shows while it works, apart from the record: the ``Reporter`` a drive is handed.

Narration (``ctx.narrate``) is the record: events in the store, shown by ``status``. A reporter is
only the display the user watches meanwhile (the CLI's progress bars): counts of long loops
(reading clips, scene cuts, captioning) and the training follower's ``Snapshot``. Nothing a
reporter is told is stored, so a drive without one (tests, bench, the autotune worker) loses
nothing but the bars; ``shows_progress`` False tells a phase that nobody watches, so it narrates
milestones instead where that matters.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Protocol

__all__ = ["Reporter", "SilentReporter", "Snapshot"]


@dataclass
class Snapshot:
    """What a training progress display needs right now (all plain values)."""

    stage: int
    stages: int
    step: int | None
    total: int | None
    percent: float | None
    loss: float | None
    last_losses: list[float]
    step_time_s: float | None  # steady state (clean samples only); None: "measuring step time..."
    eta_s: float | None
    latest_checkpoint: str | None
    latest_sample: str | None
    wandb_url: str | None
    alive: bool
    stalled: bool = False
    extra: dict[str, Any] = field(default_factory=dict)
    finished: bool = False  # the trainer printed its end-of-training statistics: every step ran

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


class Reporter(Protocol):
    """The display a phase reports progress to (never the record)."""

    @property
    def shows_progress(self) -> bool:
        """Whether anyone watches (a progress bar on a terminal); False: narrate milestones instead."""
        ...

    def on_count(self, label: str, done: int, total: int) -> None:
        """``done`` of ``total`` items of the loop ``label`` (e.g. "reading clips") are through."""
        ...

    def on_progress(self, snapshot: Snapshot) -> None:
        """The training follower saw a change (a step, a checkpoint, the trainer's end)."""
        ...


class SilentReporter:
    """The reporter of a drive nobody watches: it shows nothing."""

    shows_progress = False

    def on_count(self, label: str, done: int, total: int) -> None:
        """Shows nothing."""

    def on_progress(self, snapshot: Snapshot) -> None:
        """Shows nothing."""
