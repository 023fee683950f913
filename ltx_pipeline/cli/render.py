"""Rendering for the CLI: narration lines, the status tables and ``--json``, all from plain dicts.

Nothing here opens the store or computes results; it only prints what it is handed. Nothing it is
handed is Rich markup: table cells and titles are ``Text`` (``_t``), lines are printed with
``markup=False``, so a message such as ``[zero-batches] ...`` keeps its brackets.
"""

from __future__ import annotations

import json
from typing import Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

__all__ = ["print_event", "print_json", "render_status"]

_STYLE = {"info": "", "warning": "yellow", "error": "red", "result": "green"}


def print_event(console: Console, message: str, level: str, phase: str | None) -> None:
    """One narration line: entering a phase, a warning, or what came out."""
    prefix = {"warning": "warning: ", "error": "error: ", "result": "-> "}.get(level, "")
    tag = f"[{phase}] " if phase else ""
    console.print(f"{tag}{prefix}{message}", style=_STYLE.get(level, ""), markup=False, highlight=False)


def _t(value: Any) -> Text:
    """A table cell or title as plain text: never parsed as markup, never highlighted."""
    return Text("" if value is None else str(value))


def print_json(console: Console, data: dict[str, Any]) -> None:
    console.print_json(json.dumps(data, default=str))


def render_status(console: Console, report: dict[str, Any]) -> None:
    """Tables: one line per run, then each run's phases, findings, approval and next command."""
    runs = report["runs"]
    if not runs:
        console.print(f"No runs in workspace {report['workspace']}.", markup=False)
        return
    overview = Table(title=_t(f"Runs in {report['workspace']}"), title_justify="left")
    for column in ("run", "state", "approval", "updated (UTC)"):
        overview.add_column(column)
    for run in runs:
        overview.add_row(_t(run["name"]), _t(run["state"]), _t(run["approval"]["state"]), _t(run["updated_at"]))
    console.print(overview)
    for run in runs:
        _render_run(console, run)


def _render_run(console: Console, run: dict[str, Any]) -> None:
    table = Table(title=_t(f"{run['name']} — {run['state']}"), title_justify="left")
    for column in ("phase", "status", "try", "seconds", "summary / error"):
        table.add_column(column, overflow="fold")
    for phase in run["phases"]:
        text = phase["summary"] or phase["error"] or ""
        if phase["status"] != "succeeded" and phase["error"]:
            text = phase["error"]
        seconds = "" if phase["seconds"] is None else f"{phase['seconds']:.1f}"
        table.add_row(_t(phase["phase"]), _t(phase["status"]), _t(phase["attempt"]), _t(seconds), _t(text))
    console.print(table)
    for phase in run["phases"]:
        if phase["reason"] and phase["reason"] != "first run":
            console.print(f"  {phase['phase']} ran because: {phase['reason']}", markup=False, highlight=False)
    if run["findings"]:
        findings = Table(title="Probe findings", title_justify="left")
        for column in ("item", "status", "detail", "next step"):
            findings.add_column(column, overflow="fold")
        for f in run["findings"]:
            findings.add_row(_t(f["item"]), _t(f["status"]), _t(f["detail"]), _t(f.get("next_step")))
        console.print(findings)
    for warning in run["warnings"]:
        console.print(f"  warning: {warning}", style="yellow", markup=False, highlight=False)
    approval = run["approval"]
    if approval["subject"]:
        line = f"  {approval.get('gate') or 'plan'} {approval['subject'][:19]}…: {approval['state']}"
        if approval["approved_at"]:
            line += f" at {approval['approved_at']}"
        console.print(line, markup=False, highlight=False)
    if run["driver"]:
        console.print(f"  driver: pid {run['driver']['pid']} since {run['driver']['since']}", markup=False,
                      highlight=False)
    if run.get("autotune"):
        _render_autotune(console, run["autotune"])
    if run.get("training"):
        from ltx_pipeline.cli.training import render_live

        render_live(console, run["training"])
    if run["next_command"]:
        console.print(f"  next: {run['next_command']}", markup=False, highlight=False)


def _render_autotune(console: Console, sweep: dict[str, Any]) -> None:
    """The sweep's figures as a table, then each reason on a line of its own, whole (never folded in a cell)."""
    table = Table(title=_t(f"Autotune ({sweep['study']})"), title_justify="left")
    for column in ("#", "knobs", "outcome", "s/step", "peak GB", "val. peak GB", "seconds"):
        table.add_column(column, overflow="fold")
    reasons: list[str] = []
    for t in sweep["trials"]:
        knobs = _knobs(t["knobs"])
        table.add_row(_t(t["number"]), _t(knobs), _t(t["outcome"]), _t(_num(t["step_time_s"], "not measured")),
                      _t(_memory(t.get("peak_vram_gb"), t.get("peak_source"))),
                      _t(_memory(t.get("validation_peak_vram_gb"), t.get("validation_peak_source"))),
                      _t(_num(t["seconds"])))
        if t.get("reason"):
            reasons.append(f"  trial {t['number']} ({t['outcome']}): {t['reason']}")
    for p in sweep["pruned"]:
        knobs = _knobs(p.get("knobs"))
        table.add_row(_t("-"), _t(knobs), _t("pruned"), _t(""), _t(""), _t(""), _t(""))
        if p.get("reason"):
            reasons.append(f"  pruned {knobs}: {p['reason']}")
    console.print(table)
    for line in reasons:
        console.print(line, markup=False, highlight=False)
    if sweep.get("winner"):
        console.print(f"  winner: {_knobs(sweep['winner'])} (changes: {sweep.get('deltas') or 'none'})",
                      markup=False, highlight=False)


def _knobs(knobs: dict[str, Any] | None) -> str:
    """q=int8 opt=adamw8bit b=1 ckpt=on: short enough for a table column."""
    if not knobs:
        return ""
    return (f"q={knobs.get('quantization') or 'null'} opt={knobs.get('optimizer_type')} b={knobs.get('batch_size')}"
            f" ckpt={'on' if knobs.get('enable_gradient_checkpointing') else 'off'}")


def _num(value: Any, missing: str = "") -> str:
    return missing if value is None else f"{value:.2f}"


def _memory(value: float | None, source: str | None = None) -> str:
    """A trial's memory figure: "not measured" when there is none (never 0.00), with its source when known."""
    if value is None or value <= 0:
        return "not measured"
    figure = f"{value:.2f}" if value >= 0.01 else f"{value * 1024:.1f} MiB"
    return f"{figure} ({source})" if source else figure
