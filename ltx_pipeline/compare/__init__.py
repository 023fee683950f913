"""Runs compared: what differs in their configs and what each measured, as typed results (issue #45).

The room's one door. ``compare_runs`` reads two or more runs of one workspace from the store (read-only)
and their run folders, and returns a ``Comparison``: the config differences (every recorded patch with
its reason, config_patch's and autotune's, and the request's choices) and the measured figures side by
side. Every figure is read from the store or a run file as it was written, never recomputed or guessed;
one a run lacks is ``Figure.value`` None with ``Figure.why``. ``ltx-pipeline compare`` renders it and the
dashboard's compare page draws it. Inside: ``records`` (the typed results), ``figures`` (one run's
measured figures), ``holdout`` (``outputs/holdout-loss.json``), ``config`` (patches and request choices
across runs) and ``runs`` (reading the runs and building the comparison).
"""

from ltx_pipeline.compare.records import (
    Comparison,
    ConfigDifference,
    Figure,
    HoldoutPoint,
    PatchValue,
    PromptRenders,
    RequestChoice,
    RunFigures,
)
from ltx_pipeline.compare.runs import compare_runs

__all__ = [
    "Comparison",
    "ConfigDifference",
    "Figure",
    "HoldoutPoint",
    "PatchValue",
    "PromptRenders",
    "RequestChoice",
    "RunFigures",
    "compare_runs",
]
