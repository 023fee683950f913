"""What autotune leaves for the user: ``autotune.log``, ``autotune.md`` and ``autotune.png``.

Owns the rendering of a sweep's records (the phase's ``trials`` and ``pruned`` outputs): one log
line per trial and pruned config then the winner, a Markdown table of all of them, and a scatter
of step time against peak VRAM with failures marked and the capacity and headroom lines drawn.
All files go through ``atomic_write``; matplotlib (Agg) is imported only when the plot is drawn.
"""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

from ltx_pipeline.ltx.autotune import format_knobs
from ltx_pipeline.workspace import atomic_write

__all__ = ["render_log", "render_markdown", "trial_line", "write_reports"]


def _num(value: float | None, fmt: str = "{:.2f}") -> str:
    return "-" if value is None else fmt.format(value)


def trial_line(trial: dict[str, Any]) -> str:
    """One line for a trial record (also used for narration)."""
    peaks = f"peak {_num(trial.get('peak_vram_gb'), '{:.1f}')} GB train / " \
            f"{_num(trial.get('validation_peak_vram_gb'), '{:.1f}')} GB validation"
    step = _num(trial.get("step_time_s"), "{:.2f}s")
    why = f" ({trial['reason']})" if trial.get("reason") else ""
    return (f"trial {trial['number']}: {format_knobs(trial['knobs'])} -> {trial['outcome']}; step {step}, {peaks}, "
            f"host RAM {_num(trial.get('host_ram_gb'), '{:.1f}')} GB, {trial['seconds']:.1f}s{why}")


def render_log(outputs: dict[str, Any]) -> str:
    lines = [trial_line(t) for t in outputs["trials"]]
    lines += [f"pruned: {format_knobs(p['knobs'])} ({p['reason']})" for p in outputs["pruned"]]
    lines.append(f"winner: {format_knobs(outputs['winner'])}; deltas {outputs['deltas'] or 'none (the baseline)'}; "
                 f"{_num(outputs.get('objective'), '{:.2f}')} s per optimizer step")
    return "\n".join(lines) + "\n"


def render_markdown(outputs: dict[str, Any], *, failure: str | None = None) -> str:
    """The table of every trial and pruned config, the winner, and a baseline failure's fixes."""
    out = io.StringIO()
    out.write(f"# Autotune\n\nOptuna study `{outputs['study']}` in `{outputs['storage']}` (open it with "
              f"`optuna-dashboard sqlite:///{outputs['storage']}`).\n\n")
    out.write(f"Capacity {outputs['capacity_gb']:.1f} GB, headroom {outputs['headroom']:.0%}: a config fits at or "
              f"below {outputs['limit_gb']:.1f} GB. Objective: seconds per optimizer step at the planned effective "
              f"batch ({outputs['effective_batch']} per GPU). Loss is not a criterion.\n\n")
    out.write("| # | quantization | optimizer | batch | accumulation | checkpointing | outcome | step s | "
              "train GB | validation GB | host GB | seconds | reason |\n")
    out.write("|---|---|---|---|---|---|---|---|---|---|---|---|---|\n")
    rows = [(str(t["number"]), t) for t in outputs["trials"]] + [("pruned", {**p, "outcome": "pruned"})
                                                                for p in outputs["pruned"]]
    for label, row in rows:
        k = row["knobs"]
        out.write(f"| {label} | {k['quantization'] or 'null'} | {k['optimizer_type']} | {k['batch_size']} | "
                  f"{k['gradient_accumulation_steps']} | {'on' if k['enable_gradient_checkpointing'] else 'off'} | "
                  f"{row['outcome']} | {_num(row.get('step_time_s'))} | {_num(row.get('peak_vram_gb'), '{:.1f}')} | "
                  f"{_num(row.get('validation_peak_vram_gb'), '{:.1f}')} | {_num(row.get('host_ram_gb'), '{:.1f}')} | "
                  f"{_num(row.get('seconds'), '{:.1f}')} | {(row.get('reason') or '').replace('|', '/')} |\n")
    if failure:
        out.write(f"\n## The baseline failed: the sweep stopped\n\n{failure}\n")
    elif outputs.get("winner") is not None:
        out.write(f"\n**Winner**: {format_knobs(outputs['winner'])}; patched into every stage config: "
                  f"{outputs['deltas'] or 'no change (the baseline is fastest)'}.\n")
    return out.getvalue()


def _plot(outputs: dict[str, Any]) -> bytes:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.5), dpi=100)
    try:
        for t in outputs["trials"]:
            peak = max([p for p in (t.get("peak_vram_gb"), t.get("validation_peak_vram_gb")) if p is not None],
                       default=None)
            ok = t["outcome"] == "fit" and t.get("fits")
            x = peak if peak is not None else outputs["capacity_gb"]
            y = t.get("step_time_s") or 0.0
            ax.scatter([x], [y], marker="o" if ok else "x", color="tab:green" if ok else "tab:red", s=60)
            ax.annotate(f"{t['number']}: {t['outcome']}", (x, y), textcoords="offset points", xytext=(5, 4),
                        fontsize=8)
        ax.axvline(outputs["capacity_gb"], color="black", linestyle="-", label="capacity")
        ax.axvline(outputs["limit_gb"], color="tab:orange", linestyle="--", label=f"headroom {outputs['headroom']:.0%}")
        ax.set_xlabel("peak VRAM, training or validation (GB; failures without a measure at capacity)")
        ax.set_ylabel("micro-step time (s)")
        ax.set_title(f"Autotune: {outputs['study']}")
        ax.legend(loc="best", fontsize=8)
        buffer = io.BytesIO()
        fig.savefig(buffer, format="png", bbox_inches="tight")
        return buffer.getvalue()
    finally:
        plt.close(fig)


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
