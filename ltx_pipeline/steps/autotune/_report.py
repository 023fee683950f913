"""What autotune leaves for the user: ``autotune.log``, ``autotune.md`` and ``autotune.png``.

Owns the rendering of a sweep's records (the phase's ``trials`` and ``pruned`` outputs): one log
line per trial and pruned config then the winner, a Markdown table of all of them, and a scatter
of step time against peak VRAM with the capacity and headroom lines drawn. A failed trial has no
step time: it is drawn in a row of its own, never at 0 s; a trial whose memory was not measured has
no place on the memory axis: it is listed under the plot, never drawn at the capacity.
All files go through ``atomic_write``; matplotlib (Agg) is imported only when the plot is drawn.

Every memory figure is shown with its source (``peak_source``, ``validation_peak_source``: from the
record when it carries them, else from the ``memory.json`` the trial wrote beside its log). A
figure nobody measured reads "not measured", never 0.0; a run whose memory was not measured at all
(the reference backend without ``reference_memory_scale``) says that its winner was chosen on
step time only. With autotune off, the same two files say so and name the baseline trained as is.
"""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

from ltx_pipeline.ltx.autotune import format_knobs
from ltx_pipeline.steps.memory_figures import NOT_MEASURED, format_gb
from ltx_pipeline.workspace import atomic_write

__all__ = ["memory_of", "render_log", "render_markdown", "render_off_markdown", "trial_line",
           "write_off_reports", "write_reports"]

MEMORY_FILE = "memory.json"  # written by ``_trial`` beside each trial's log
_MEMORY_KEYS = ("peak_vram_gb", "peak_source", "validation_peak_vram_gb", "validation_peak_source", "memory_note",
                "assumed_fit", "host_ram_source")
_SOURCE_WORDS = {
    "vram sampler": "the engine's own sampling of the trial's GPU, four times a second (a reading of an idle card, "
                    "at most 32 MiB, is not a measurement)",
    "trainer statistic": "the peak in the trainer's end-of-run statistics block (an nvidia-smi snapshot)",
    "reference trainer accounting": "the reference trainer's own count of live tensor bytes, times the memory "
                                    "scale (`reference_memory_scale` in run.yaml)",
    "simulated cost surface": "the cost surface's figure for that config (simulated backend)",
}


def _num(value: float | None, fmt: str = "{:.2f}", missing: str = "-") -> str:
    return missing if value is None else fmt.format(value)


def memory_of(trial: dict[str, Any]) -> dict[str, Any]:
    """The trial's memory figures and their sources: the record's own keys, else the trial's ``memory.json``."""
    if "peak_source" in trial or "validation_peak_source" in trial:
        return {k: trial.get(k) for k in _MEMORY_KEYS}
    saved: dict[str, Any] = {}
    if trial.get("log"):
        try:
            saved = json.loads((Path(trial["log"]).parent / MEMORY_FILE).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            saved = {}
    out = {k: saved.get(k) for k in _MEMORY_KEYS}
    # The record's figures are what the sweep judged; the file only adds where they came from.
    for key in ("peak_vram_gb", "validation_peak_vram_gb"):
        out[key] = trial.get(key)
    return out


def _figure(value: float | None, source: str | None) -> str:
    if value is None:
        return NOT_MEASURED
    return f"{format_gb(value)} ({source})" if source else f"{format_gb(value)} (source not recorded)"


def _assumed(trial: dict[str, Any]) -> bool:
    return bool(memory_of(trial).get("assumed_fit")) and trial.get("outcome") == "fit"


def _outcome(trial: dict[str, Any]) -> str:
    return f"{trial['outcome']} (assumed: memory not measured)" if _assumed(trial) else str(trial["outcome"])


def trial_line(trial: dict[str, Any]) -> str:
    """One line for a trial record (also used for narration)."""
    memory = memory_of(trial)
    peaks = (f"training peak {_figure(trial.get('peak_vram_gb'), memory.get('peak_source'))}, "
             f"validation peak {_figure(trial.get('validation_peak_vram_gb'), memory.get('validation_peak_source'))}")
    step = _num(trial.get("step_time_s"), "{:.2f}s", NOT_MEASURED)
    why = f" ({trial['reason']})" if trial.get("reason") else ""
    return (f"trial {trial['number']}: {format_knobs(trial['knobs'])} -> {_outcome(trial)}; step {step}, {peaks}, "
            f"host RAM {format_gb(trial.get('host_ram_gb'))}, {trial['seconds']:.1f}s{why}")


def _winner_trial(outputs: dict[str, Any]) -> dict[str, Any] | None:
    winner = outputs.get("winner")
    return next((t for t in outputs["trials"] if winner is not None and t["knobs"] == winner and t.get("fits")), None)


def _step_time_only(outputs: dict[str, Any]) -> bool:
    """Whether the winner was judged on step time only (its memory was not measured)."""
    best = _winner_trial(outputs)
    return best is not None and _assumed(best)


def render_log(outputs: dict[str, Any]) -> str:
    lines = [trial_line(t) for t in outputs["trials"]]
    lines += [f"pruned: {format_knobs(p['knobs'])} ({p['reason']})" for p in outputs["pruned"]]
    basis = "; chosen on step time only: memory not measured" if _step_time_only(outputs) else ""
    lines.append(f"winner: {format_knobs(outputs['winner'])}; deltas {outputs['deltas'] or 'none (the baseline)'}; "
                 f"{_num(outputs.get('objective'), '{:.2f}')} s per optimizer step{basis}")
    return "\n".join(lines) + "\n"


def _batch_words(outputs: dict[str, Any]) -> str:
    """The batch the objective is measured at: per GPU (what a trial runs), and the effective batch over all."""
    per_gpu, processes = outputs["per_gpu_batch"], outputs.get("processes")
    words = f"{per_gpu} sample(s) per GPU (batch x accumulation)"
    if processes:
        words += f", effective batch {outputs['effective_batch']} over {processes} process(es)"
    return words


def _dashboard_url(storage: str) -> str:
    """What optuna-dashboard opens: the SQLite file as a URL, a server's URL as shown (password replaced)."""
    return storage if "://" in storage else f"sqlite:///{storage}"


def _cell(text: Any) -> str:
    return str(text or "").replace("|", "/").replace("\n", " ")


def render_markdown(outputs: dict[str, Any], *, failure: str | None = None) -> str:
    """The table of every trial and pruned config, the winner, and a baseline failure's fixes."""
    out = io.StringIO()
    trials = outputs["trials"]
    assumed = [t for t in trials if _assumed(t)]
    out.write(f"# Autotune\n\nOptuna study `{outputs['study']}` in `{outputs['storage']}` (open it with "
              f"`optuna-dashboard {_dashboard_url(outputs['storage'])}`).\n\n")
    limit_note = (" (not applied to the trials whose memory was not measured)" if assumed else "")
    out.write(f"Capacity {outputs['capacity_gb']:.1f} GiB, headroom {outputs['headroom']:.0%}: a config fits at or "
              f"below {outputs['limit_gb']:.1f} GiB{limit_note}. Objective: seconds per optimizer step at the planned "
              f"batch: {_batch_words(outputs)}. Loss is not a criterion.\n\n")
    if assumed:
        note = memory_of(assumed[0]).get("memory_note") or "memory not measured"
        out.write(f"**Memory was not measured** ({note}): no trial's peak was compared with the limit. Every trial "
                  "that ran cleanly is assumed to fit, and the winner was chosen on step time only.\n\n")
    # Several GPU hosts ran the sweep (autotune-worker): a column says which ran each trial.
    several = len({t.get("host") for t in trials if t.get("host")}) > 1
    out.write("| # | " + ("host | " if several else "") + "quantization | optimizer | batch | accumulation | "
              "checkpointing | outcome | step s | train GB | train GB source | validation GB | validation GB source | "
              "host GB | seconds | reason |\n")
    out.write("|---" * (16 if several else 15) + "|\n")
    rows = [(str(t["number"]), t, True) for t in trials] + [("pruned", {**p, "outcome": "pruned"}, False)
                                                           for p in outputs["pruned"]]
    for label, row, ran in rows:
        k = row["knobs"]
        memory = memory_of(row) if ran else {}
        missing = NOT_MEASURED if ran else "-"
        figures = [_num(row.get("step_time_s"), missing=missing),
                   format_gb(row.get("peak_vram_gb"), missing=missing),
                   _cell(memory.get("peak_source") or ("" if row.get("peak_vram_gb") is None else "not recorded")),
                   format_gb(row.get("validation_peak_vram_gb"), missing=missing),
                   _cell(memory.get("validation_peak_source")
                         or ("" if row.get("validation_peak_vram_gb") is None else "not recorded")),
                   format_gb(row.get("host_ram_gb"), missing=missing), _num(row.get("seconds"), "{:.1f}")]
        host = f"{_cell(row.get('host') or '-')} | " if several else ""
        out.write(f"| {label} | {host}{k['quantization'] or 'null'} | {k['optimizer_type']} | {k['batch_size']} | "
                  f"{k['gradient_accumulation_steps']} | {'on' if k['enable_gradient_checkpointing'] else 'off'} | "
                  f"{_outcome(row) if ran else 'pruned'} | {' | '.join(figures)} | {_cell(row.get('reason'))} |\n")
    out.write(_sources_note(trials))
    if outputs.get("superseded"):
        out.write("\nSuperseded (failed before a fix, run again with it; their Optuna trials stay in the study as "
                  "failed and are not replayed):\n\n")
        out.write("".join(f"- Optuna trial {s['number']}: {s['reason']}\n" for s in outputs["superseded"]))
    if failure:
        out.write(f"\n## The baseline failed: the sweep stopped\n\n{failure}\n")
    elif outputs.get("winner") is not None:
        basis = " (chosen on step time only: memory was not measured)" if _step_time_only(outputs) else ""
        out.write(f"\n**Winner**{basis}: {format_knobs(outputs['winner'])}; patched into every stage config: "
                  f"{outputs['deltas'] or 'no change (the baseline is fastest)'}.\n")
    return out.getvalue()


def _sources_note(trials: list[dict[str, Any]]) -> str:
    """Where each figure of the table came from, in words."""
    used: list[str] = []
    for t in trials:
        memory = memory_of(t)
        for source in (memory.get("peak_source"), memory.get("validation_peak_source")):
            if source and source not in used:
                used.append(source)
    lines = ["", "## Where the figures come from", ""]
    for source in used:
        words = next((w for key, w in _SOURCE_WORDS.items() if source.startswith(key)), "")
        lines.append(f"- `{source}`: {words}." if words else f"- `{source}`.")
    lines.append(f"- `{NOT_MEASURED}`: no source measured that figure (the reason says what is missing), so it "
                 "is shown as missing, never as 0.0.")
    if any(_assumed(t) for t in trials):
        lines.append("- `fit (assumed: memory not measured)`: nothing on this backend can measure the memory; the "
                     "trial ran cleanly and is assumed to fit, judged on step time only.")
    else:
        lines.append("- A trial without its training or validation peak is never judged to fit.")
    if any(t.get("outcome") == "unmeasured" for t in trials):
        lines.append("- `unmeasured` trials ran cleanly but lack a training or validation peak: they are never the "
                     "winner, and they settle nothing about other configs.")
    lines.append("- host GB: the resident memory of the trial's process tree (psutil); step s: the trainer's "
                 "Time/Step over clean steady-state steps, per micro-step.")
    return "\n".join(lines) + "\n"


def _plot(outputs: dict[str, Any]) -> bytes:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig = _draw(plt, outputs)
    try:
        buffer = io.BytesIO()
        fig.savefig(buffer, format="png", bbox_inches="tight")
        return buffer.getvalue()
    finally:
        plt.close(fig)


def _peak(trial: dict[str, Any]) -> float | None:
    """Where a trial sits on the memory axis: its highest measured peak, or None (it sits nowhere there).

    A trial whose memory was not measured, or only in part (``unmeasured``, an assumed fit), has no place
    on that axis: a partial peak is no peak, and the capacity is no stand-in for a missing figure.
    """
    if trial.get("outcome") == "unmeasured" or _assumed(trial):
        return None
    peaks = [p for p in (trial.get("peak_vram_gb"), trial.get("validation_peak_vram_gb")) if p is not None and p > 0]
    return max(peaks, default=None)


def _ran_cleanly(trial: dict[str, Any]) -> bool:
    return trial.get("outcome") in ("fit", "unmeasured", "over_headroom")


def _draw(plt: Any, outputs: dict[str, Any]) -> Any:
    """Step time against peak VRAM for the trials that have both; failed trials in a row of their own below
    (they have no step time: never drawn at 0 s); trials whose memory was not measured listed in a note."""
    trials = outputs["trials"]
    placed = [t for t in trials if _peak(t) is not None and t.get("step_time_s") is not None and _ran_cleanly(t)]
    failed = [t for t in trials if not _ran_cleanly(t) or (_peak(t) is not None and t.get("step_time_s") is None)]
    unplaced = [t for t in trials if t not in placed and t not in failed]
    # No memory figure at all (the reference backend without a scale): the step times by trial, no memory axis.
    timed_only = not placed and any(t.get("step_time_s") is not None for t in unplaced)
    note = [] if timed_only else _unplaced_note(unplaced)
    columns = 4
    failed_rows = -(-len(failed) // columns)
    heights = [5.0] + ([0.45 * failed_rows + 0.35] if failed else []) + ([0.2 * len(note) + 0.2] if note else [])
    fig, axes = plt.subplots(len(heights), 1, figsize=(7, sum(heights) + 0.4), dpi=100, squeeze=False,
                             gridspec_kw={"height_ratios": heights})
    ax = axes[0][0]
    if timed_only:
        _step_times_by_trial(ax, unplaced, outputs)
    else:
        _memory_axes(ax, placed, outputs)
    row = 1
    if failed:
        _failed_row(axes[row][0], failed, columns)
        row += 1
    if note:
        axes[row][0].axis("off")
        axes[row][0].text(0.0, 1.0, "\n".join(note), transform=axes[row][0].transAxes, ha="left", va="top", fontsize=8)
    fig.tight_layout()
    return fig


def _memory_axes(ax: Any, placed: list[dict[str, Any]], outputs: dict[str, Any]) -> None:
    # On axes from zero, trials 1 % apart sit on one spot: each label carries its figures, stacked apart.
    for index, t in enumerate(sorted(placed, key=lambda t: (t["step_time_s"], _peak(t) or 0.0))):
        ok = t["outcome"] == "fit" and t.get("fits")
        x, y = _peak(t), t["step_time_s"]
        ax.scatter([x], [y], marker="o" if ok else "x", color="tab:green" if ok else "tab:red", s=60)
        ax.annotate(f"{t['number']}: {t['outcome']}, {y:.3f} s, {_gib(x or 0.0)}", (x, y), textcoords="offset points",
                    xytext=(-8, -14 + 11 * (index % 5)), ha="right", fontsize=8)
    if not placed:
        ax.text(0.5, 0.5, "no trial has both a measured peak and a step time", transform=ax.transAxes, ha="center",
                va="center", fontsize=11, color="dimgray")
        ax.set_yticks([])
    ax.axvline(outputs["capacity_gb"], color="black", linestyle="-", label=f"capacity {_gib(outputs['capacity_gb'])}")
    ax.axvline(outputs["limit_gb"], color="tab:orange", linestyle="--",
               label=f"headroom {outputs['headroom']:.0%} (fits at or below {_gib(outputs['limit_gb'])})")
    # Both axes from zero: a sweep's step times often differ by 1 %, which a cropped axis draws as a cliff.
    peaks = [_peak(t) or 0.0 for t in placed]
    ax.set_xlim(0, max([outputs["capacity_gb"], *peaks]) * 1.05)
    ax.set_ylim(0, max([t["step_time_s"] for t in placed], default=1.0) * 1.15)
    ax.set_xlabel(f"peak VRAM, training or validation (GiB, {_memory_words(placed)})")
    ax.set_ylabel("micro-step time (s)")
    ax.set_title(f"Autotune: {outputs['study']}")
    ax.legend(loc="best", fontsize=8)


def _gib(value: float) -> str:
    """A memory figure of the plot: every figure here is bytes / 2**30 (or MiB / 1024), so GiB."""
    return f"{value:.1f} GiB" if value >= 1 else f"{value * 1024:.0f} MiB"


# What the memory axis's figures are, by their source (``_SOURCE_WORDS`` has the long form).
_AXIS_WORDS = {"vram sampler": "measured", "trainer statistic": "measured",
               "reference trainer accounting": "the toy's bytes × reference_memory_scale",
               "simulated cost surface": "simulated"}


def _memory_words(placed: list[dict[str, Any]]) -> str:
    """What the plotted peaks are: measured on a GPU, the toy's scaled count, or simulated (each kind once)."""
    words: list[str] = []
    for t in placed:
        memory = memory_of(t)
        for source in (memory.get("peak_source"), memory.get("validation_peak_source")):
            word = next((w for key, w in _AXIS_WORDS.items() if source and source.startswith(key)), None)
            if word and word not in words:
                words.append(word)
    return "; ".join(words) or "source not recorded"


def _step_times_by_trial(ax: Any, trials: list[dict[str, Any]], outputs: dict[str, Any]) -> None:
    """No trial's memory was measured: each trial's step time against its number, and no memory axis."""
    timed = [t for t in trials if t.get("step_time_s") is not None]
    for t in timed:
        ok = t["outcome"] == "fit"
        ax.scatter([t["number"]], [t["step_time_s"]], marker="o", color="tab:green" if ok else "tab:gray", s=60)
        label = f"{t['outcome']} (assumed)" if _assumed(t) else str(t["outcome"])
        ax.annotate(label, (t["number"], t["step_time_s"]), textcoords="offset points", xytext=(5, 4), fontsize=8)
    ax.set_xticks([t["number"] for t in timed])
    ax.set_ylim(0, max(t["step_time_s"] for t in timed) * 1.15)  # from zero: 1 % must look like 1 %
    ax.set_xlabel("trial")
    ax.set_ylabel("micro-step time (s)")
    note = memory_of(timed[0]).get("memory_note") or NOT_MEASURED
    ax.set_title(f"Autotune: {outputs['study']}\nno memory axis: {note}", fontsize=10)


def _failed_row(ax: Any, failed: list[dict[str, Any]], columns: int) -> None:
    """The failed trials as a row of red crosses, one per trial, named with their outcome (no axis values)."""
    rows = -(-len(failed) // columns)
    for index, t in enumerate(failed):
        x, y = index % columns, rows - 1 - index // columns
        ax.scatter([x], [y], marker="x", color="tab:red", s=60)
        peak = _peak(t)
        label = f"{t['number']}: {t['outcome']}" + (f", {_gib(peak)} peak" if peak is not None else "")
        ax.annotate(label, (x, y), textcoords="offset points", xytext=(7, -3), fontsize=8)
    ax.set_xlim(-0.2, columns - 0.2)
    ax.set_ylim(-0.6, rows - 0.4)
    ax.set_xticks([])
    ax.set_yticks([])
    ax.set_title("failed trials (not on the axes above: they have no step time to plot)", fontsize=9, loc="left")


def _unplaced_note(trials: list[dict[str, Any]]) -> list[str]:
    """Lines naming the trials that ran but whose memory was not measured: they sit nowhere on the memory axis."""
    if not trials:
        return []
    items = [f"{t['number']}: {_outcome(t)}, {_num(t.get('step_time_s'), '{:.2f} s', 'step time not measured')}"
             for t in trials]
    lines = ["Not plotted, memory not measured (no place on the memory axis):"]
    for item in items:
        if len(lines) == 1 or len(lines[-1]) + len(item) > 110:
            lines.append("  " + item)
        else:
            lines[-1] += "; " + item
    return lines


def write_reports(root: Path, workspace: Path, outputs: dict[str, Any], *,
                  failure: str | None = None) -> dict[str, str]:
    """Write autotune.log, autotune.md and autotune.png under ``root``; return their paths."""
    paths = {"log": root / "autotune.log", "markdown": root / "autotune.md", "plot": root / "autotune.png"}
    log = render_log(outputs) if failure is None else "".join(trial_line(t) + "\n" for t in outputs["trials"]) + \
        f"baseline failed: {failure.splitlines()[0]}\n"
    atomic_write(paths["log"], log, root=workspace)
    atomic_write(paths["markdown"], render_markdown(outputs, failure=failure), root=workspace)
    atomic_write(paths["plot"], _plot(outputs), root=workspace)
    return {k: str(v) for k, v in paths.items()}


def render_off_markdown(baseline: dict[str, Any], *, reason: str, turn_on: str, plot_removed: bool = False) -> str:
    """autotune.md when autotune is off: why (``reason``), the baseline knobs trained as is, how to turn it on."""
    rows = "".join(f"| {key} | {_yaml_word(value)} |\n" for key, value in baseline.items())
    removed = ("\nThe plot of an earlier sweep of this run (`autotune.png`) was removed: it no longer describes "
               "this run. Its trials stay in the Optuna study.\n" if plot_removed else "")
    return (f"# Autotune\n\nAutotune is **off** {reason}. No trial ran and nothing was patched: the plan's baseline "
            "config (plan.md, Training Config) is trained as is:\n\n| knob | value |\n|---|---|\n"
            f"{rows}\nNothing measured before training whether this config fits in GPU memory or how fast it steps: "
            "the training's own log and `outputs/run-summary.md` report its step time and peak VRAM.\n\n"
            f"To sweep for the fastest config that fits: `{turn_on}`.\n{removed}")


def _yaml_word(value: Any) -> str:
    """A knob's value as the trainer's YAML spells it (null, true, false)."""
    if value is None:
        return "null"
    return str(value).lower() if isinstance(value, bool) else str(value)


def write_off_reports(root: Path, workspace: Path, baseline: dict[str, Any], *, reason: str,
                      turn_on: str) -> dict[str, str]:
    """Write autotune.log and autotune.md for autotune off (an earlier sweep's autotune.png is removed)."""
    paths = {"log": root / "autotune.log", "markdown": root / "autotune.md"}
    plot = root / "autotune.png"
    removed = plot.is_file()
    plot.unlink(missing_ok=True)
    atomic_write(paths["log"], f"autotune off {reason}; no trial ran: the plan's baseline {format_knobs(baseline)} is "
                 "trained as is\n", root=workspace)
    atomic_write(paths["markdown"], render_off_markdown(baseline, reason=reason, turn_on=turn_on,
                                                        plot_removed=removed), root=workspace)
    return {k: str(v) for k, v in paths.items()}
