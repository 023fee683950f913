"""``ltx-pipeline compare RUN RUN [...]``: runs side by side, the config differences and the measured figures.

The command opens the store read-only (as ``status`` does), asks ``ltx_pipeline.compare`` for the
``Comparison`` and prints it: a table of figures (each as recorded; "-" where a run has none, with why
below the table), the patched config fields that differ with each run's value and reason, the request
choices that differ, and the patches every run shares. ``--json`` prints ``Comparison.to_dict()``.
Module level holds only the signature; the rest is imported when the command runs.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from ltx_pipeline.cli import Ending
from ltx_pipeline.cli.options import WorkspaceOpt

if TYPE_CHECKING:
    from rich.console import Console

    from ltx_pipeline.compare import Comparison, Figure, PatchValue
    from ltx_pipeline.store import Store
    from ltx_pipeline.store.reader import StoreReader
    from ltx_pipeline.workspace import Workspace

__all__ = ["compare"]

_LABELS = {"steps": "steps", "seconds_per_step": "seconds per step", "peak_memory_gb": "peak GPU memory",
           "final_train_loss": "final train loss", "lowest_holdout_loss": "lowest holdout loss",
           "samples_trained_on": "samples trained on"}


def compare(runs: Annotated[list[str], typer.Argument(metavar="RUN RUN [...]", help="Two or more runs of the "
                                                      "workspace.", show_default=False)],
            workspace: WorkspaceOpt = None,
            as_json: Annotated[bool, typer.Option("--json", help="Print JSON for scripts.")] = False) -> Ending:
    """Compare runs: every config patch that differs, with its reason, and the measured figures side by side."""
    from ltx_pipeline.cli.console import out
    from ltx_pipeline.cli.render import print_json
    from ltx_pipeline.compare import compare_runs
    from ltx_pipeline.workspace import Workspace

    ws = Workspace.at(workspace)
    store = _open_store(ws)
    comparison = compare_runs(store, ws, list(runs))
    if as_json:
        print_json(out, comparison.to_dict())
    else:
        render_comparison(out, comparison)
    return Ending.DONE


def _open_store(ws: Workspace) -> Store | StoreReader | None:
    """The store read-only at the newest schema (the standard library's sqlite3), else the full one; None: no store."""
    from ltx_pipeline.store.reader import StoreReader

    target = ws.store
    reader = StoreReader.open(target) if isinstance(target, Path) else None
    if reader is not None:
        return reader
    if not ws.has_store():
        return None
    from ltx_pipeline.store import Store

    return Store.open(ws.store)


def render_comparison(console: Console, comparison: Comparison) -> None:
    """The figures table, why each "-", the differing patches and request choices, then the shared patches."""
    names = comparison.names
    _write(console, f"Runs compared in {comparison.workspace}: {', '.join(names)}")
    rows = [[_LABELS[key], *(_figure(run.figure(key)) for run in comparison.runs)] for key in _LABELS]
    _table(console, "\nMeasured (each figure as the run recorded it)", ("figure", *names), rows)
    missing = [f"  {run.run}, {_LABELS[key]}: {run.figure(key).why}" for key in _LABELS for run in comparison.runs
               if run.figure(key).value is None]
    if missing:
        _write(console, '"-": the run has no such figure, because\n' + "\n".join(missing))
    differ = [d for d in comparison.patches if d.differs]
    title = f"\nConfig differences: {len(differ)} of {len(comparison.patches)} patched field(s) differ"
    if differ:
        _table(console, title, ("stage", "field", *names),
               [[d.stage, d.path, *(_patch(d.values[n]) for n in names)] for d in differ])
    else:
        _write(console, title + ".")
    choices = [c for c in comparison.request if c.differs]
    if choices:
        _table(console, "\nRequest choices that differ (run.yaml; empty: the default)", ("field", *names),
               [[c.field, *(_request(c.values[n]) for n in names)] for c in choices])
    same = [d for d in comparison.patches if not d.differs]
    if same:
        first = names[0]
        _table(console, "\nPatched alike in every run (the first run's value; run folders differ by name only)",
               ("stage", "field", "value", "why"),
               [[d.stage, d.path, _value(d.values[first]), d.values[first].reason or ""] for d in same])
    for run in comparison.runs:
        for note in run.notes:
            _write(console, f"note ({run.run}): {note}")


def _figure(figure: Figure) -> str:
    if figure.value is None:
        return "-"
    if isinstance(figure.value, float):
        text = f"{figure.value:.4g}"
    else:
        text = str(figure.value)
    if "total" in figure.detail and figure.detail["total"] is not None:
        text += f" of {figure.detail['total']}"
    parts = [f"step {figure.step}"] if figure.step is not None and "final_checkpoint" not in figure.detail else []
    parts += [f"{k} {v:.4g}" for k in ("video", "audio") if isinstance(v := figure.detail.get(k), (int, float))]
    return text + (f" ({', '.join(parts)})" if parts else "")


def _patch(value: PatchValue) -> str:
    if not value.present:
        return f"- ({value.reason})"
    if not value.patched:
        return f"{_value(value)} (not patched: its config's value)"
    return f"{_value(value)} ({value.by}: {value.reason})"


def _value(value: PatchValue) -> str:
    import json

    return json.dumps(value.value, ensure_ascii=False) if not isinstance(value.value, str) else value.value


def _request(value: Any) -> str:
    return "" if value is None else str(value)


def _table(console: Console, title: str, columns: tuple[str, ...], rows: list[list[Any]]) -> None:
    from ltx_pipeline.cli.text_table import table_lines

    console.file.write("\n".join(table_lines(title, columns, rows, console.width)) + "\n")


def _write(console: Console, text: str) -> None:
    console.file.write(text + "\n")
