"""The comparison's typed results: frozen dataclasses, turned into one plain dict for ``--json`` and the page.

A ``Figure`` is one measured number as a run's files or the store hold it: its value, where it was read
(``source``), and, when the run lacks it, ``why`` (its value is then None and it prints as "-").
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

__all__ = ["Comparison", "ConfigDifference", "Figure", "HoldoutPoint", "PatchValue", "PromptRenders",
           "RequestChoice", "RunFigures"]

JsonValue = Any  # a YAML value of a trainer config or a request field: any JSON shape


@dataclass(frozen=True)
class Figure:
    """One measured figure: ``value`` as read from ``source``, or None and ``why`` the run has none."""

    value: float | int | None
    source: str
    why: str | None = None
    step: int | None = None  # the step the figure belongs to (a final loss, the lowest holdout loss)
    detail: dict[str, JsonValue] = field(default_factory=dict)  # parts read beside it (video/audio, total...)

    @classmethod
    def missing(cls, source: str, why: str) -> Figure:
        return cls(None, source, why)


@dataclass(frozen=True)
class HoldoutPoint:
    """One entry of ``outputs/holdout-loss.json``: a checkpoint's holdout (and train-subset) total loss."""

    step: int
    holdout: float | None
    train: float | None


@dataclass(frozen=True)
class RunFigures:
    """What one run measured, each figure read as written; ``stage`` is the stage they are of (the last trained)."""

    run: str
    state: str
    stage: int | None
    steps: Figure
    seconds_per_step: Figure
    peak_memory_gb: Figure
    final_train_loss: Figure
    lowest_holdout_loss: Figure
    samples_trained_on: Figure
    loss_curve: tuple[tuple[int, float | None], ...] = ()  # (step, loss) of the stage, as the store holds them
    holdout_curve: tuple[HoldoutPoint, ...] = ()
    notes: tuple[str, ...] = ()  # stored outputs that could not be read, each one line

    FIGURES = ("steps", "seconds_per_step", "peak_memory_gb", "final_train_loss", "lowest_holdout_loss",
               "samples_trained_on")

    def figure(self, name: str) -> Figure:
        value = getattr(self, name)
        assert isinstance(value, Figure)
        return value


@dataclass(frozen=True)
class PatchValue:
    """What one run set a config field to: a recorded patch (its new value and reason), or the file's own value."""

    value: JsonValue
    patched: bool
    reason: str | None  # the patch's reason; None for a field the run did not patch
    by: str | None  # the phase that recorded the patch (config_patch, autotune)
    old: JsonValue = None  # the template's value the patch replaced
    present: bool = True  # False: the run's config has no such field (and no patch set one)


@dataclass(frozen=True)
class ConfigDifference:
    """One config field that some run patched: each run's value, and whether they differ.

    ``differs`` compares values with each run's own folder written as ``<run>``: output and data paths
    inside the run folders differ by name only, which is no difference in what was trained.
    """

    stage: int
    path: str
    values: dict[str, PatchValue]
    differs: bool


@dataclass(frozen=True)
class RequestChoice:
    """One request field that shapes training, as each run's request stored it (None: the default)."""

    field: str
    values: dict[str, JsonValue]
    differs: bool


@dataclass(frozen=True)
class PromptRenders:
    """One evaluation prompt and each run's render of it (None: that run has no render of this prompt)."""

    prompt: str
    category: str
    files: dict[str, str | None]


@dataclass(frozen=True)
class Comparison:
    """Runs compared: the figures of each (in the order asked), the config differences, the renders by prompt."""

    workspace: str
    runs: tuple[RunFigures, ...]
    patches: tuple[ConfigDifference, ...]
    request: tuple[RequestChoice, ...]
    renders: tuple[PromptRenders, ...]

    @property
    def names(self) -> list[str]:
        return [r.run for r in self.runs]

    def to_dict(self) -> dict[str, Any]:
        """The plain dict ``--json`` prints and the dashboard reads (figures keep their ``why``)."""
        data = asdict(self)
        data["differences"] = {"patches": [d["path"] if d["stage"] == 1 else f"stage {d['stage']}: {d['path']}"
                                           for d in data["patches"] if d["differs"]],
                               "request": [c["field"] for c in data["request"] if c["differs"]]}
        return data
