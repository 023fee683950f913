"""The compare page's data: ``ltx_pipeline.compare``'s ``Comparison`` as a dict, plus what only the page draws.

The page overlays each run's loss curve (the same series as the run page: the store's steps, and the log's not
stored yet) and holdout curve (``outputs/holdout-loss.json``), and shows each evaluation prompt's renders in one
row, a column per run. Read-only, as every view: one store connection, files only read.
"""

from __future__ import annotations

from typing import Any

from ltx_pipeline.compare import compare_runs
from ltx_pipeline.errors import BadInput
from ltx_pipeline.ui.files import file_url
from ltx_pipeline.ui.series import training_series
from ltx_pipeline.ui.source import StoreSource

__all__ = ["compare_view"]


def compare_view(source: StoreSource, names: list[str]) -> dict[str, Any] | None:
    """The page's data for ``names``; with fewer than two, the run picker only. None: a name is no run here."""
    root = source.workspace.root
    with source.open() as store:
        runs = [r.name for r in store.list_runs()] if store is not None else []
        page: dict[str, Any] = {"workspace": str(root), "store": source.shown, "runs": runs, "chosen": names,
                                "comparison": None, "series": {}}
        if len(names) < 2:
            page["problem"] = "Choose two runs or more to compare." if names else None
            return page
        try:
            comparison = compare_runs(store, source.workspace, names)
        except BadInput:
            return None
        page["series"] = {name: training_series(store, run) for name in names
                          if store is not None and (run := store.get_run(name)) is not None}
    data = comparison.to_dict()
    for row in data["renders"]:
        row["urls"] = {name: file_url(root, file) for name, file in row["files"].items()}
    page["comparison"] = data
    page["figures"] = [{"key": key, "label": label} for key, label in _LABELS.items()]
    return page


_LABELS = {"steps": "Steps", "seconds_per_step": "Seconds per step", "peak_memory_gb": "Peak GPU memory (GiB)",
           "final_train_loss": "Final train loss", "lowest_holdout_loss": "Lowest holdout loss",
           "samples_trained_on": "Samples trained on"}
