"""autotune.png: step time against peak memory for the trials that have both, failed trials in a row of their
own, and the ones whose memory was not measured named in a note (matplotlib Agg, imported when drawing)."""

from __future__ import annotations

import io
from typing import Any

from ltx_pipeline.autotune._measured import assumed_fit, memory_of, num, outcome_words
from ltx_pipeline.reports.memory_figures import NOT_MEASURED

__all__ = ["plot_png"]


def plot_png(outputs: dict[str, Any]) -> bytes:
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
    if trial.get("outcome") == "unmeasured" or assumed_fit(trial):
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


# What the memory axis's figures are, by their source (``SOURCE_WORDS`` has the long form).
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
        label = f"{t['outcome']} (assumed)" if assumed_fit(t) else str(t["outcome"])
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
    items = [f"{t['number']}: {outcome_words(t)}, {num(t.get('step_time_s'), '{:.2f} s', 'step time not measured')}"
             for t in trials]
    lines = ["Not plotted, memory not measured (no place on the memory axis):"]
    for item in items:
        if len(lines) == 1 or len(lines[-1]) + len(item) > 110:
            lines.append("  " + item)
        else:
            lines[-1] += "; " + item
    return lines
