"""Rendering for the CLI: narration lines, the status tables and ``--json``, all from plain dicts.

Nothing here opens the store or computes results; it only prints what it is handed.
"""

from __future__ import annotations

import json
from typing import Any

from rich.console import Console
from rich.table import Table

__all__ = ["print_event", "print_json", "render_status"]

_STYLE = {"info": "", "warning": "yellow", "error": "red", "result": "green"}


def print_event(console: Console, message: str, level: str, phase: str | None) -> None:
    """One narration line: entering a phase, a warning, or what came out."""
    prefix = {"warning": "warning: ", "error": "error: ", "result": "-> "}.get(level, "")
    tag = f"[{phase}] " if phase else ""
    console.print(f"{tag}{prefix}{message}", style=_STYLE.get(level, ""), markup=False, highlight=False)


def print_json(console: Console, data: dict[str, Any]) -> None:
    console.print_json(json.dumps(data, default=str))


def render_status(console: Console, report: dict[str, Any]) -> None:
    """Tables: one line per run, then each run's phases, findings, approval and next command."""
    runs = report["runs"]
    if not runs:
        console.print(f"No runs in workspace {report['workspace']}.", markup=False)
        return
    overview = Table(title=f"Runs in {report['workspace']}", title_justify="left")
    for column in ("run", "state", "approval", "updated (UTC)"):
        overview.add_column(column)
    for run in runs:
        overview.add_row(run["name"], run["state"], run["approval"]["state"], run["updated_at"])
    console.print(overview)
    for run in runs:
        _render_run(console, run)


def _render_run(console: Console, run: dict[str, Any]) -> None:
    table = Table(title=f"{run['name']} — {run['state']}", title_justify="left")
    for column in ("phase", "status", "try", "seconds", "summary / error"):
        table.add_column(column, overflow="fold")
    for phase in run["phases"]:
        text = phase["summary"] or phase["error"] or ""
        if phase["status"] != "succeeded" and phase["error"]:
            text = phase["error"]
        seconds = "" if phase["seconds"] is None else f"{phase['seconds']:.1f}"
        table.add_row(phase["phase"], phase["status"], str(phase["attempt"]), seconds, text)
    console.print(table)
    for phase in run["phases"]:
        if phase["reason"] and phase["reason"] != "first run":
            console.print(f"  {phase['phase']} ran because: {phase['reason']}", markup=False, highlight=False)
    if run["findings"]:
        findings = Table(title="Probe findings", title_justify="left")
        for column in ("item", "status", "detail", "next step"):
            findings.add_column(column, overflow="fold")
        for f in run["findings"]:
            findings.add_row(f["item"], f["status"], f["detail"], f.get("next_step") or "")
        console.print(findings)
    for warning in run["warnings"]:
        console.print(f"  warning: {warning}", style="yellow", markup=False, highlight=False)
    approval = run["approval"]
    if approval["subject"]:
        line = f"  plan {approval['subject'][:19]}…: {approval['state']}"
        if approval["approved_at"]:
            line += f" at {approval['approved_at']}"
        console.print(line, markup=False, highlight=False)
    if run["driver"]:
        console.print(f"  driver: pid {run['driver']['pid']} since {run['driver']['since']}", markup=False)
    if run.get("autotune"):
        _render_autotune(console, run["autotune"])
    if run.get("training"):
        from ltx_pipeline.cli.training import render_live

        render_live(console, run["training"])
    if run["next_command"]:
        console.print(f"  next: {run['next_command']}", markup=False, highlight=False)


def _render_autotune(console: Console, sweep: dict[str, Any]) -> None:
    table = Table(title=f"Autotune ({sweep['study']})", title_justify="left")
    for column in ("#", "knobs", "outcome", "s/step", "peak GB", "val. peak GB", "seconds", "reason"):
        table.add_column(column, overflow="fold")
    for t in sweep["trials"]:
        knobs = _knobs(t["knobs"])
        table.add_row(str(t["number"]), knobs, t["outcome"] or "", _num(t["step_time_s"]), _num(t["peak_vram_gb"]),
                      _num(t["validation_peak_vram_gb"]), _num(t["seconds"]), t["reason"] or "")
    for p in sweep["pruned"]:
        knobs = _knobs(p.get("knobs"))
        table.add_row("-", knobs, "pruned", "", "", "", "", p.get("reason", ""))
    console.print(table)
    if sweep.get("winner"):
        console.print(f"  winner: {_knobs(sweep['winner'])} (changes: {sweep.get('deltas') or 'none'})",
                      markup=False, highlight=False)


def _knobs(knobs: dict[str, Any] | None) -> str:
    """q=int8 opt=adamw8bit b=1 ckpt=on: short enough for a table column."""
    if not knobs:
        return ""
    return (f"q={knobs.get('quantization') or 'null'} opt={knobs.get('optimizer_type')} b={knobs.get('batch_size')}"
            f" ckpt={'on' if knobs.get('enable_gradient_checkpointing') else 'off'}")


def _num(value: Any) -> str:
    return "" if value is None else f"{value:.2f}"
