"""Rendering for the CLI: narration lines, the status tables and ``--json``, all from plain dicts.

Nothing here opens the store or computes results; it only prints what it is handed. Nothing it is
handed is Rich markup: table cells and titles are ``Text`` (``_t``), lines are printed with
``markup=False``, so a message such as ``[zero-batches] ...`` keeps its brackets.
"""

from __future__ import annotations

import json
from typing import Any

from rich.console import Console

from ltx_pipeline.cache.hits import stage_label
from ltx_pipeline.cli.text_table import table_lines

__all__ = ["print_event", "print_json", "render_gpu_board", "render_status"]

_STYLE = {"info": "", "warning": "yellow", "error": "red", "result": "green"}


def print_event(console: Console, message: str, level: str, phase: str | None) -> None:
    """One narration line: entering a phase, a warning, or what came out."""
    prefix = {"warning": "warning: ", "error": "error: ", "result": "-> "}.get(level, "")
    tag = f"[{phase}] " if phase else ""
    console.print(f"{tag}{prefix}{message}", style=_STYLE.get(level, ""), markup=False, highlight=False)


def _print_table(console: Console, title: str | None, columns: tuple[str, ...], rows: list[list[Any]]) -> None:
    """A box-drawn table of plain text (never parsed as markup, never highlighted), folded to the console."""
    # Plain text with nothing for Rich to parse, style or wrap: written to the console's file as it is.
    console.file.write("\n".join(table_lines(title, columns, rows, console.width)) + "\n")


def print_json(console: Console, data: dict[str, Any]) -> None:
    """Indented JSON, written as it is (Rich's JSON highlighter cost more than the whole report)."""
    console.file.write(json.dumps(data, indent=2, default=str, ensure_ascii=False) + "\n")


def render_status(console: Console, report: dict[str, Any]) -> None:
    """Tables: one line per run, then each run's phases, findings, approval and next command."""
    runs = report["runs"]
    if not runs:
        console.print(f"No runs in workspace {report['workspace']}.", markup=False)
        return
    _print_table(console, f"Runs in {report['workspace']}", ("run", "state", "approval", "updated (UTC)"),
                 [[run["name"], run["state"], run["approval"]["state"], run["updated_at"]] for run in runs])
    for run in runs:
        _render_run(console, run)
    board = report.get("gpus") or {}
    if board.get("holders") or board.get("queue"):
        render_gpu_board(console, board)


def render_gpu_board(console: Console, board: dict[str, Any]) -> None:
    """Who holds which GPU, then the runs waiting in the GPU queue in their order (``gpus.gpu_board``)."""
    if board["holders"]:
        _print_table(console, "GPUs held", ("GPU", "uuid", "run", "for", "engine pid", "running on it", "since (UTC)"),
                     [[h["gpu"], h["uuid"], h["run"], h["kind"], h["pid"], ", ".join(h.get("running") or []) or "-",
                       h["since"]] for h in board["holders"]])
    else:
        console.print("No GPU is held by a run.", markup=False, highlight=False)
    if not board["queue"]:
        console.print("The GPU queue is empty.", markup=False, highlight=False)
        return
    _print_table(console, "GPU queue (first come, first served)", ("#", "run", "waits for", "engine", "since (UTC)"),
                 [[q["position"], q["run"], _waits_for(q["gpus"], q.get("need")), q["engine"], q["since"]]
                  for q in board["queue"]])


def _waits_for(gpus: list[dict[str, Any]], need: int | None = None) -> str:
    """``GPU 0 (held by run a), GPU 1 (free)``, after ``1 of: `` when it needs fewer than it lists."""
    listed = ", ".join(f"GPU {g['gpu']} ({'held by run ' + g['held_by'] if g['held_by'] else 'free'})" for g in gpus)
    return f"{need} of: {listed}" if need is not None and need < len(gpus) else listed


def _render_run(console: Console, run: dict[str, Any]) -> None:
    rows = []
    for phase in run["phases"]:
        text = phase["summary"] or phase["error"] or ""
        if phase["status"] != "succeeded" and phase["error"]:
            text = phase["error"]
        seconds = "" if phase["seconds"] is None else f"{phase['seconds']:.1f}"
        rows.append([phase["phase"], phase["status"], phase["attempt"], seconds, text])
    _print_table(console, f"{run['name']} — {run['state']}", ("phase", "status", "try", "seconds", "summary / error"),
                 rows)
    if run.get("generates"):
        console.print(f"  generates: {run['generates']} (mode {run['request'].get('mode')}, "
                      f"--audio {run['request'].get('audio', 'auto')})", markup=False, highlight=False)
    for phase in run["phases"]:
        if phase["reason"] and phase["reason"] != "first run":
            console.print(f"  {phase['phase']} ran because: {phase['reason']}", markup=False, highlight=False)
    for hit in run.get("cache_hits") or ():
        console.print(f"  latent cache: {_cache_line(hit)}", markup=False, highlight=False)
    if run["findings"]:
        _print_table(console, "Probe findings", ("item", "status", "detail", "next step"),
                     [[f["item"], f["status"], f["detail"], f.get("next_step")] for f in run["findings"]])
    for warning in run["warnings"]:
        console.print(f"  warning: {warning}", style="yellow", markup=False, highlight=False)
    approval = run["approval"]
    if approval["subject"]:
        line = f"  {approval.get('gate') or 'plan'} {approval['subject'][:19]}…: {approval['state']}"
        if approval["approved_at"]:
            line += f" at {approval['approved_at']}"
        console.print(line, markup=False, highlight=False)
    if run.get("gpu_queue"):
        place = run["gpu_queue"]
        waits = _waits_for(place["gpus"], place.get("need"))
        console.print(f"  GPU queue: position {place['position']}, waiting for {waits}; engine {place['engine']}",
                      markup=False, highlight=False)
    if run.get("gpus_held"):
        console.print("  holds: " + ", ".join(f"GPU {h['gpu']} ({h['uuid']})" for h in run["gpus_held"]),
                      markup=False, highlight=False)
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


def _cache_line(hit: dict[str, Any]) -> str:
    """``stage 1: 8 of 8 file(s) from the cache, 0 encoded`` (and any still missing), as preprocessing recorded it."""
    where = stage_label(int(hit["stage"]))
    missing = f", {hit['missing']} missing" if hit["missing"] else ""
    return f"{where}: {hit['hits']} of {hit['wanted']} file(s) from the cache, {hit['encoded']} encoded{missing}"


def _render_autotune(console: Console, sweep: dict[str, Any]) -> None:
    """The sweep's figures as a table, then each reason on a line of its own, whole (never folded in a cell)."""
    rows: list[list[Any]] = []
    reasons: list[str] = []
    for t in sweep["trials"]:
        knobs = _knobs(t["knobs"])
        rows.append([t["number"], knobs, t["outcome"], _num(t["step_time_s"], "not measured"),
                     _memory(t.get("peak_vram_gb"), t.get("peak_source")),
                     _memory(t.get("validation_peak_vram_gb"), t.get("validation_peak_source")), _num(t["seconds"])])
        if t.get("reason"):
            reasons.append(f"  trial {t['number']} ({t['outcome']}): {t['reason']}")
    for p in sweep["pruned"]:
        knobs = _knobs(p.get("knobs"))
        rows.append(["-", knobs, "pruned", "", "", "", ""])
        if p.get("reason"):
            reasons.append(f"  pruned {knobs}: {p['reason']}")
    _print_table(console, f"Autotune ({sweep['study']})",
                 ("#", "knobs", "outcome", "s/step", "peak GB", "val. peak GB", "seconds"), rows)
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
