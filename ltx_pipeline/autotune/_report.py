"""What autotune leaves for the user: ``autotune.log``, ``autotune.md`` and ``autotune.png``.

Owns the rendering of a sweep's records (the phase's ``trials`` and ``pruned`` outputs): one log
line per trial and pruned config then the winner, a Markdown table of all of them, and a scatter
of step time against peak VRAM with the capacity and headroom lines drawn. A failed trial has no
step time: it is drawn in a row of its own, never at 0 s; a trial whose memory was not measured has
no place on the memory axis: it is listed under the plot, never drawn at the capacity.
All files go through ``atomic_write``; the plot is ``_plot``'s, the memory figures ``_measured``'s.

Every memory figure is shown with its source (``peak_source``, ``validation_peak_source``: from the
record when it carries them, else from the ``memory.json`` the trial wrote beside its log). A
figure nobody measured reads "not measured", never 0.0; a run whose memory was not measured at all
(the reference backend without ``reference_memory_scale``) says that its winner was chosen on
step time only. With autotune off, the same two files say so and name the baseline trained as is.
"""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

from ltx_pipeline.autotune._measured import SOURCE_WORDS, assumed_fit, memory_of, num, outcome_words
from ltx_pipeline.autotune._plot import plot_png
from ltx_pipeline.autotune.side_by_side import render as render_side_by_side
from ltx_pipeline.ltx.autotune import Ranking, TrialResult, format_knobs
from ltx_pipeline.outputs.autotune import SideBySide
from ltx_pipeline.reports.memory_figures import NOT_MEASURED, format_gb
from ltx_pipeline.workspace import atomic_write

__all__ = ["memory_of", "noise_tie", "noise_words", "render_log", "render_markdown", "render_off_markdown",
           "trial_line", "winner_sentence", "write_off_reports", "write_reports"]

def _figure(value: float | None, source: str | None) -> str:
    if value is None:
        return NOT_MEASURED
    return f"{format_gb(value)} ({source})" if source else f"{format_gb(value)} (source not recorded)"


def trial_line(trial: dict[str, Any]) -> str:
    """One line for a trial record (also used for narration)."""
    memory = memory_of(trial)
    peaks = (f"training peak {_figure(trial.get('peak_vram_gb'), memory.get('peak_source'))}, "
             f"validation peak {_figure(trial.get('validation_peak_vram_gb'), memory.get('validation_peak_source'))}")
    step = num(trial.get("step_time_s"), "{:.2f}s", NOT_MEASURED)
    if trial.get("step_time_s") is not None and trial.get("step_margin") is not None:
        step += f" ±{trial['step_margin'] * 100:.0f} % at 95 %"  # the interval the winner is judged with
    why = f" ({trial['reason']})" if trial.get("reason") else ""
    where = f" on GPU {','.join(map(str, trial['gpus']))}" if trial.get("gpus") else ""
    return (f"trial {trial['number']}{where}: {format_knobs(trial['knobs'])} -> {outcome_words(trial)}; step {step}, "
            f"{peaks}, "
            f"host RAM {format_gb(trial.get('host_ram_gb'))}, {trial['seconds']:.1f}s{why}")


def _winner_trial(outputs: dict[str, Any]) -> dict[str, Any] | None:
    winner = outputs.get("winner")
    return next((t for t in outputs["trials"] if winner is not None and t["knobs"] == winner and t.get("fits")), None)


def _step_time_only(outputs: dict[str, Any]) -> bool:
    """Whether the winner was judged on step time only (its memory was not measured)."""
    best = _winner_trial(outputs)
    return best is not None and assumed_fit(best)


def noise_tie(ranking: Ranking[TrialResult] | None) -> dict[str, Any] | None:
    """What the outputs keep when the fastest fit lost to a nearer config within its noise, else None."""
    if ranking is None or not ranking.kept_nearer:
        return None
    return {"fastest": dict(ranking.fastest.knobs), "fastest_objective": ranking.fastest_objective,
            "winner_objective": ranking.winner_objective, "interval_s": ranking.interval_s}


def noise_words(outputs: dict[str, Any]) -> str:
    """Why the winner is not the fastest measured (empty when it is), with the figures it was judged on."""
    tie = outputs.get("noise_tie")
    if not tie:
        return ""
    gap = tie["winner_objective"] - tie["fastest_objective"]
    return (f"{format_knobs(tie['fastest'])} measured {tie['fastest_objective']:.3f} s per optimizer step against the "
            f"winner's {tie['winner_objective']:.3f} s: {gap:.3f} s faster, within the 95 % interval of the "
            f"difference of the two measured step times (±{tie['interval_s']:.3f} s), so the config nearer the plan "
            "(fewer knobs changed) is kept")


def winner_sentence(outputs: dict[str, Any]) -> str:
    """The narration's line for the winner and what was patched."""
    patched = (f"patched {outputs['deltas']} into every stage config" if outputs["deltas"] else
               "the baseline is kept" if outputs.get("noise_tie") else "the baseline is fastest")
    tie = noise_words(outputs)
    return f"Winner: {format_knobs(outputs['winner'])}; {patched}" + (f" ({tie})." if tie else ".")


def render_log(outputs: dict[str, Any]) -> str:
    lines = [trial_line(t) for t in outputs["trials"]]
    lines += [f"pruned: {format_knobs(p['knobs'])} ({p['reason']})" for p in outputs["pruned"]]
    basis = "; chosen on step time only: memory not measured" if _step_time_only(outputs) else ""
    tie = f"; {noise_words(outputs)}" if outputs.get("noise_tie") else ""
    lines.append(f"winner: {format_knobs(outputs['winner'])}; deltas {outputs['deltas'] or 'none (the baseline)'}; "
                 f"{num(outputs.get('objective'), '{:.2f}')} s per optimizer step{tie}{basis}")
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
    assumed = [t for t in trials if assumed_fit(t)]
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
        figures = [num(row.get("step_time_s"), missing=missing),
                   format_gb(row.get("peak_vram_gb"), missing=missing),
                   _cell(memory.get("peak_source") or ("" if row.get("peak_vram_gb") is None else "not recorded")),
                   format_gb(row.get("validation_peak_vram_gb"), missing=missing),
                   _cell(memory.get("validation_peak_source")
                         or ("" if row.get("validation_peak_vram_gb") is None else "not recorded")),
                   format_gb(row.get("host_ram_gb"), missing=missing), num(row.get("seconds"), "{:.1f}")]
        host = f"{_cell(row.get('host') or '-')} | " if several else ""
        out.write(f"| {label} | {host}{k['quantization'] or 'null'} | {k['optimizer_type']} | {k['batch_size']} | "
                  f"{k['gradient_accumulation_steps']} | {'on' if k['enable_gradient_checkpointing'] else 'off'} | "
                  f"{outcome_words(row) if ran else 'pruned'} | {' | '.join(figures)} | {_cell(row.get('reason'))} |\n")
    out.write(_sources_note(trials))
    if outputs.get("superseded"):
        out.write("\nSuperseded (failed before a fix, run again with it; their Optuna trials stay in the study as "
                  "failed and are not replayed):\n\n")
        out.write("".join(f"- Optuna trial {s['number']}: {s['reason']}\n" for s in outputs["superseded"]))
    if outputs.get("side_by_side"):
        out.write(render_side_by_side(SideBySide.model_validate(outputs["side_by_side"])))
    if failure:
        out.write(f"\n## The baseline failed: the sweep stopped\n\n{failure}\n")
    elif outputs.get("winner") is not None:
        basis = " (chosen on step time only: memory was not measured)" if _step_time_only(outputs) else ""
        unchanged = ("no change (the baseline: nothing measured faster beyond the noise)" if outputs.get("noise_tie")
                     else "no change (the baseline is fastest)")
        tie = f" Not the fastest measured: {noise_words(outputs)}." if outputs.get("noise_tie") else ""
        out.write(f"\n**Winner**{basis}: {format_knobs(outputs['winner'])}; patched into every stage config: "
                  f"{outputs['deltas'] or unchanged}.{tie}\n")
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
        words = next((w for key, w in SOURCE_WORDS.items() if source.startswith(key)), "")
        lines.append(f"- `{source}`: {words}." if words else f"- `{source}`.")
    lines.append(f"- `{NOT_MEASURED}`: no source measured that figure (the reason says what is missing), so it "
                 "is shown as missing, never as 0.0.")
    if any(assumed_fit(t) for t in trials):
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


def write_reports(root: Path, workspace: Path, outputs: dict[str, Any], *,
                  failure: str | None = None) -> dict[str, str]:
    """Write autotune.log, autotune.md and autotune.png under ``root``; return their paths."""
    paths = {"log": root / "autotune.log", "markdown": root / "autotune.md", "plot": root / "autotune.png"}
    log = render_log(outputs) if failure is None else "".join(trial_line(t) + "\n" for t in outputs["trials"]) + \
        f"baseline failed: {failure.splitlines()[0]}\n"
    atomic_write(paths["log"], log, root=workspace)
    atomic_write(paths["markdown"], render_markdown(outputs, failure=failure), root=workspace)
    atomic_write(paths["plot"], plot_png(outputs), root=workspace)
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
