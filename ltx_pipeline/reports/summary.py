"""The finished run's landing page and plots: ``run-summary.md``, ``loss.png``, ``step_time.png``.

Owns the run-summary template (the skill's: date, GPUs, final checkpoint and step per stage,
purpose, mode, dataset, the config as trained, measured step time and peak VRAM, exact launch
commands, seed, trainer commit, model paths, how to use and continue). Invariant: every figure is
measured or read from a file the run wrote, never predicted; a figure that was not measured says so.
Plots use matplotlib's Agg backend, imported inside the functions (it is slow to import).
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ltx_pipeline.outputs.evaluate import EvaluateOutputs
from ltx_pipeline.reports.memory_figures import format_gb
from ltx_pipeline.training.samples_used import samples_text
from ltx_pipeline.workspace import atomic_write
from ltx_pipeline.yaml_io import load_yaml

__all__ = ["CONFIG_ROWS", "eval_section", "plot_loss", "plot_step_time", "render_summary", "steady_step_time",
           "with_section"]

CONFIG_ROWS = ("model.training_mode", "lora.rank", "lora.alpha", "optimization.steps", "optimization.learning_rate",
               "optimization.batch_size", "optimization.gradient_accumulation_steps", "optimization.optimizer_type",
               "optimization.scheduler_type", "optimization.enable_gradient_checkpointing",
               "acceleration.mixed_precision_mode", "acceleration.quantization",
               "acceleration.offload_optimizer_during_validation", "data.preprocessed_data_root",
               "validation.video_dims", "validation.interval", "validation.inference_steps", "checkpoints.interval",
               "checkpoints.keep_last_n", "seed", "output_dir")


def steady_step_time(metrics: Sequence[dict[str, Any]]) -> float | None:
    """Median Time/Step over the clean samples (no validation or checkpoint inside); None if fewer than 2."""
    clean = [m["step_time_s"] for m in metrics if m.get("clean") and m.get("step_time_s") is not None]
    return statistics.median(clean) if len(clean) >= 2 else None


def _prepared_lines(prepared: dict[str, Any] | None) -> list[str]:
    """Where the trained rows came from when the prepare phase made them (captions, holdout)."""
    if not prepared:
        return []
    held = prepared.get("holdout_ids") or []
    return [f"- Prepared into `{prepared['metadata_file']}` by {prepared['captioner']} captions "
            f"({prepared['captions']['written']} written, {prepared['captions']['kept']} kept); held out {len(held)}"
            + (f" in `{prepared['holdout_file']}`: {', '.join(held)}" if held else "")]


# The toy backends' figures and weights describe the toy, never LTX-2: each text says what they are.
_BACKEND_WORDS = {
    "reference": " (the built-in toy trainer: a small model with the real trainer's contract, not LTX-2)",
    "simulated": " (a cost surface stands in for the trainer: no model is trained)",
}
_PEAK_HEADER = {"ltx": "Peak VRAM (trainer)", "reference": "Peak memory (toy, scaled)",
                "simulated": "Peak VRAM (cost surface)"}


def _peak_words(request: dict[str, Any], gpus: str) -> str:
    """What the peak figure is, per backend: the trainer's statistic, the toy's scaled bytes, or the surface's."""
    backend = request.get("backend")
    if backend == "reference":
        scale = request.get("reference_memory_scale")
        counted = ("the reference trainer's own count of the toy model's memory (live tensor bytes on the CPU, the "
                   "CUDA allocator's peak on a GPU)")
        if scale is None:
            return (f"peak memory is {counted}, unscaled (no `reference_memory_scale` in run.yaml): the toy's own "
                    f"bytes, which say nothing about LTX-2 on {gpus}.")
        return (f"peak memory is {counted} times `reference_memory_scale` {scale:g}, the factor that maps the toy "
                f"onto the GPU it plans for ({gpus}): a scaled toy figure, not a measurement of LTX-2.")
    if backend == "simulated":
        return (f"step times and peak VRAM are the cost surface's figures for this config (`{request.get('surface')}`)"
                ", printed by the simulated trainer: nothing was measured on a GPU.")
    return "peak VRAM is the trainer's closing `Peak GPU memory` statistic."


def _use_line(backend: str | None, weights: str) -> str:
    if backend == "reference":
        return (f"- Use: `{weights}` holds LoRA weights for the reference trainer's toy model only: it loads in no "
                "LTX-2 pipeline (nor ComfyUI). It shows the workflow end to end; train with `--backend ltx` for a "
                "LoRA of LTX-2.")
    if backend == "simulated":
        return (f"- Use: `{weights}` is a placeholder the simulated trainer wrote (one tensor, no model): there is "
                "nothing to load. Train with `--backend ltx` for a LoRA of LTX-2.")
    return (f"- Use: load `{weights}` as a LoRA in the LTX-2 inference pipeline (keys are ComfyUI-style, "
            "`diffusion_model.` prefixed).")


def render_summary(facts: dict[str, Any]) -> str:
    """The run-summary markdown from measured facts (see ``phases.monitor`` for the keys)."""
    stages = facts["stages"]
    lines = [*_overview(facts), "## Final checkpoints", "", "| Stage | Step | Weights |", "|---|---|---|"]
    # A continuation's trainer counts its own steps from 0: the run's step is said beside it.
    lines += [f"| {s['stage']} | {s['final_step']}"
              + (f" (run step {s['start_step'] + s['final_step']})" if s.get("start_step") else "")
              + f" | `{s['final_checkpoint']}` |" for s in stages]
    lines += _measured(facts)
    for s in stages:
        lines += [f"### Stage {s['stage']}: `{s['config']}`", "", "| Field | Value |", "|---|---|"]
        lines += [f"| {path} | `{value}` |" for path, value in _config_rows(Path(s["config"]))]
        lines.append("")
    lines += ["## Launch commands", ""]
    lines += [f"- Stage {s['stage']}: `{s['launch']}`" for s in stages]
    lines += ["", "## Provenance", "",
              f"- Seed: {facts.get('seed')}",
              f"- Trainer repo commit: {facts.get('trainer_commit') or 'unknown (not a git checkout)'}",
              f"- Model: `{facts.get('model_path')}`", f"- Text encoder: `{facts.get('text_encoder_path')}`",
              f"- Workspace run folder: `{facts['run_root']}`", "",
              "## How to use and continue", "",
              _use_line(facts["request"].get("backend"), stages[-1]["final_checkpoint"]),
              _continue_line(facts),
              "- Plots: `loss.png` (loss per step, smoothed; validation, checkpoint and resume steps marked) and "
              "`step_time.png` beside this file.", ""]
    return "\n".join(lines)


def _overview(facts: dict[str, Any]) -> list[str]:
    """The title and the run's purpose, data and backend, up to the first section."""
    request, stages = facts["request"], facts["stages"]
    sample_words, dropped = samples_text(facts["samples"], stages)  # what the trainer used, not the plan's count
    return [f"# Run summary: {facts['run']}", "",
            f"- Date: {time.strftime('%Y-%m-%d %H:%M %Z')}",
            f"- GPUs: {facts['gpus']}",
            f"- Purpose: {request.get('mode')} {request.get('training_mode', 'lora')} "
            f"({facts.get('mode_title') or request.get('mode')}), strategy {request.get('strategy', 'single')}",
            *([f"- Generates: {facts['generates']} (`--audio {request.get('audio', 'auto')}`)"]
              if facts.get("generates") else []),
            f"- Trigger word: {request.get('trigger') or '(none)'}",
            f"- Dataset: {request.get('dataset')} ({sample_words}; buckets "
            f"{', '.join(s['buckets'] for s in facts['data_stages'])})", *dropped,
            *_prepared_lines(facts.get("prepared")),
            f"- Backend: {request.get('backend')}{_BACKEND_WORDS.get(request.get('backend'), '')}", ""]


def _measured(facts: dict[str, Any]) -> list[str]:
    """The "Measured" section: each stage's step time, speed and peak memory, then what they mean."""
    request = facts["request"]
    peak_header = _PEAK_HEADER.get(request.get("backend"), _PEAK_HEADER["ltx"])
    lines = ["", "## Measured", "",
             f"| Stage | Steady step time | Trainer's overall speed | {peak_header} | Steps logged |",
             "|---|---|---|---|---|"]
    for s in facts["stages"]:
        measured = s.get("step_time_s") is not None
        step_time = f"{s['step_time_s']:.2f} s" if measured else "not measured (too few clean steps)"
        speed = (f"{s['steps_per_second']:.2f} steps/s" if s.get("steps_per_second") is not None
                 else "not reported")
        peak = format_gb(s.get("peak_gpu_memory_gb"), missing="not reported", places=2)
        if s.get("on_gpu") is False:
            peak = "not measured: no GPU, the trainer ran on the CPU"
        lines.append(f"| {s['stage']} | {step_time} | {speed} | {peak} | {s['logged_steps']} |")
    if facts.get("autotune"):
        lines += ["", f"Autotune: {facts['autotune']}"]
    if facts.get("memory_model"):
        model = facts["memory_model"]
        lines += ["", f"Memory model: autotune predicted {model['predicted_gb']:.1f} GiB for the chosen config; the "
                  f"trainer reported {model['measured_gb']:.1f} GiB"
                  + (f" ({model['error']:+.0%}: a miss, recorded in the study {model['study']})." if model["miss"]
                     else f" (within ±{model['tolerance']:.0%}).")]
    return lines + ["", "Step time is the median of the trainer's Time/Step over steps with no validation or "
                    "checkpoint save in them (the trainer logs a Step line every 20 steps when its progress bars are "
                    "off); the overall speed is the trainer's closing `Training speed` figure, model loading, "
                    "validation and saves included; " + _peak_words(request, facts["gpus"]), "",
                    "## Config as trained", ""]


def _continue_line(facts: dict[str, Any]) -> str:
    """The exact command that trains further (run.yaml's steps is the run's total), and what it does."""
    last = facts["stages"][-1]
    trained = int(last.get("start_step") or 0) + int(last["final_step"])
    target = f"--workspace {Path(facts['run_root']).parent} --run {facts['run']}"
    return (f"- Continue training: `ltx-pipeline run {target} --steps {2 * trained}` (any total above {trained}; "
            "add `--approve` to pass the new plan's gate) trains only the extra steps, as a stage warm-started "
            "from the final weights with a fresh learning-rate schedule over them; autotune's sweep is read back, "
            "not run again. Editing a config.yaml changes nothing: the run's configs are made from run.yaml.")


def eval_section(outputs: EvaluateOutputs, *, base: Path) -> str:
    """The "Evaluation renders" section: each file and its prompt, and what was not rendered. No verdict."""
    lines = ["The final weights (`" + Path(str(outputs.weights)).name + "`) rendered by the trainer's own validation "
             "at step 0; `eval/prompts.json` lists each file's prompt, conditions and source.", "",
             "| File | Category | Prompt | Source |", "|---|---|---|---|"]
    for render in outputs.renders:
        prompt = render.prompt.replace("|", "\\|")
        where = f"`{Path(render.file).relative_to(base).as_posix()}`" if render.file else "(no file written)"
        lines.append(f"| {where} | {render.category} | {prompt} | "
                     f"{render.source if render.category != 'in_distribution' else 'training caption'} |")
    lines.append("")
    for category, note in outputs.notes.items():
        lines.append(f"- No {category.replace('_', '-')} renders: {note}.")
    if outputs.retried_dims:
        dims = "x".join(str(d) for d in outputs.retried_dims)
        lines.append(f"- The planned validation dims ran out of GPU memory; renders marked {dims} in prompts.json "
                     "were made at those smaller dims.")
    if outputs.contact_sheet:
        lines.append("- Contact sheet (first, middle and last frame of each render): `eval/contact-sheet.png`.")
    if outputs.grid:
        lines.append("- Checkpoints x prompts (the same prompts and seeds at each chosen checkpoint; "
                     "`eval/grid.json` lists every render): "
                     f"`{Path(outputs.grid).relative_to(base).as_posix()}`.")
    lines.append(f"- Eval config: `{outputs.eval_config}`.")
    return "\n".join(lines) + "\n"


def with_section(text: str, heading: str, body: str) -> str:
    """``text`` with the section under ``heading`` replaced by ``body`` (appended when absent)."""
    kept, skipping = [], False
    for line in text.splitlines():
        if line.startswith("## "):
            skipping = line.strip() == heading
        if not skipping:
            kept.append(line)
    return "\n".join(kept).rstrip("\n") + f"\n\n{heading}\n\n{body}"


def _config_rows(config: Path) -> list[tuple[str, Any]]:
    try:
        values = load_yaml(config.read_text(encoding="utf-8")) or {}
    except OSError:
        return []
    rows = []
    for path in CONFIG_ROWS:
        node: Any = values
        for key in path.split("."):
            node = node.get(key) if isinstance(node, dict) else None
        rows.append((path, node))
    return rows


# The smoothed loss's weight: with 0.6 a first point ten times the rest (the toy's, or a fresh LoRA's, first
# loss) weighs less than the points after it from the fifth point on; 0.8 kept it on top for about 15 points.
_SMOOTHING_WEIGHT = 0.6


def _smooth(values: list[float], weight: float = _SMOOTHING_WEIGHT) -> list[float]:
    """Debiased exponential moving average, as TensorBoard smooths since its PR #639 (2017).

    The plain EMA starts from the first value, so a first-point outlier (the demo's 69 among losses near 8) held
    the curve above every raw point for dozens of steps. Here the average starts from zero and is divided by the
    weights seen so far (``1 - weight**n``): each smoothed value is a weighted mean of the points seen so far,
    the newest weighing most, and the first point's share falls as ``weight**n``.
    """
    out, total = [], 0.0
    for count, value in enumerate(values, start=1):
        total = weight * total + (1 - weight) * value
        out.append(total / (1 - weight**count))
    return out


# Up to this many logged points a series is drawn with a marker on each point: the real trainer logs a loss
# every 20 steps, so a short run has a handful of points (one alone, without a marker, draws nothing).
_MARKED_POINTS = 60


def plot_loss(metrics: Sequence[dict[str, Any]], path: Path, *, workspace: Path, checkpoint_steps: Sequence[int] = (),
              validation_steps: Sequence[int] = (), resumes: Sequence[tuple[int, int]] = ()) -> Path:
    """Loss per step (all stages on one axis, stage boundaries labelled), smoothed, with markers.

    One logged point is drawn as a point; none says "no loss logged" in the frame. ``resumes`` are
    ``(stage, step)`` pairs, the checkpoint steps training resumed from, drawn as marked lines.
    """
    plt = _pyplot()
    fig = _loss_figure(plt, metrics, checkpoint_steps=checkpoint_steps, validation_steps=validation_steps,
                       resumes=resumes)
    return _save(fig, plt, path, workspace)


def plot_step_time(metrics: Sequence[dict[str, Any]], path: Path, *, workspace: Path,
                   resumes: Sequence[tuple[int, int]] = ()) -> Path:
    """Time/Step per logged step; steps with validation or a checkpoint save drawn apart; resumes marked."""
    plt = _pyplot()
    return _save(_step_time_figure(plt, metrics, resumes=resumes), plt, path, workspace)


def _pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _loss_figure(plt: Any, metrics: Sequence[dict[str, Any]], *, checkpoint_steps: Sequence[int] = (),
                 validation_steps: Sequence[int] = (), resumes: Sequence[tuple[int, int]] = ()) -> Any:
    fig, ax = plt.subplots(figsize=(9, 4.5))
    logged = 0
    for stage in sorted({m["stage"] for m in metrics}):
        rows = [m for m in metrics if m["stage"] == stage and m.get("loss") is not None]
        if not rows:
            continue
        logged += len(rows)
        steps, losses = [m["step"] for m in rows], [m["loss"] for m in rows]
        marker = "o" if len(rows) <= _MARKED_POINTS else None
        ax.plot(steps, losses, marker=marker, markersize=7 if len(rows) == 1 else 3,
                alpha=1.0 if len(rows) == 1 else 0.35, label=f"stage {stage} loss")
        if len(rows) >= 2:
            ax.plot(steps, _smooth(losses), linewidth=2, label=f"stage {stage} smoothed")
        else:
            ax.annotate(f"the only loss logged: {losses[0]:.4g} at step {steps[0]}", (steps[0], losses[0]),
                        textcoords="offset points", xytext=(8, 8), fontsize=9)
    if logged == 0:
        _say_in_frame(ax, "no loss logged", "the trainer's log has no Step line with a loss for this run")
    for index, step in enumerate(checkpoint_steps):
        ax.axvline(step, color="tab:green", linestyle="--", alpha=0.5, label="checkpoint" if index == 0 else None)
    for index, step in enumerate(validation_steps):
        ax.axvline(step, color="tab:purple", linestyle=":", alpha=0.5, label="validation" if index == 0 else None)
    _mark_resumes(ax, resumes)
    ax.set_xlabel("optimizer step")
    ax.set_ylabel("loss (rank 0 micro-batch)")
    ax.set_title("Training loss" + (f" ({logged} point{'s' if logged != 1 else ''} logged)"
                                    if 0 < logged <= _MARKED_POINTS else ""))
    _legend(ax)
    return fig


def _step_time_figure(plt: Any, metrics: Sequence[dict[str, Any]], *, resumes: Sequence[tuple[int, int]] = ()) -> Any:
    fig, ax = plt.subplots(figsize=(9, 4))
    rows = [m for m in metrics if m.get("step_time_s") is not None]
    for clean, label, marker in ((True, "clean steps", "o"), (False, "validation / checkpoint steps", "x")):
        chosen = [m for m in rows if bool(m.get("clean")) is clean]
        if chosen:
            ax.scatter([m["step"] for m in chosen], [m["step_time_s"] for m in chosen], marker=marker, label=label)
    if not rows:
        _say_in_frame(ax, "no step time logged", "the trainer's log has no Step line with a Time/Step for this run")
    steady = steady_step_time(rows)
    if steady is not None:
        ax.axhline(steady, color="tab:red", linestyle="--", label=f"steady state {steady:.2f} s")
    _mark_resumes(ax, resumes)
    ax.set_xlabel("optimizer step")
    ax.set_ylabel("seconds per step")
    ax.set_title("Step time")
    _legend(ax)
    return fig


def _say_in_frame(ax: Any, headline: str, detail: str) -> None:
    """Write what is missing in the middle of the frame, so an empty plot never passes for a flat one."""
    box = {"facecolor": "white", "edgecolor": "none", "alpha": 0.9}
    ax.text(0.5, 0.55, headline, transform=ax.transAxes, ha="center", va="center", fontsize=16, color="dimgray",
            bbox=box)
    ax.text(0.5, 0.42, detail, transform=ax.transAxes, ha="center", va="center", fontsize=9, color="dimgray",
            bbox=box)
    ax.set_yticks([])


def _mark_resumes(ax: Any, resumes: Sequence[tuple[int, int]]) -> None:
    """A line at each step training resumed from (its checkpoint), named on the plot."""
    several = len({stage for stage, _ in resumes}) > 1
    for index, (stage, step) in enumerate(sorted(resumes, key=lambda r: (r[1], r[0]))):
        ax.axvline(step, color="tab:red", linestyle="-.", alpha=0.8, label="resumed" if index == 0 else None)
        ax.annotate(f"{f'stage {stage} ' if several else ''}resumed at step {step}", (step, 1.0),
                    xycoords=("data", "axes fraction"), textcoords="offset points", xytext=(3, -4), rotation=90,
                    ha="left", va="top", fontsize=8, color="tab:red")


def _legend(ax: Any) -> None:
    if ax.get_legend_handles_labels()[0]:
        ax.legend(loc="best", fontsize="small")


def _save(fig: Any, plt: Any, path: Path, workspace: Path) -> Path:
    import io

    buffer = io.BytesIO()
    fig.tight_layout()
    fig.savefig(buffer, format="png", dpi=110)
    plt.close(fig)
    atomic_write(path, buffer.getvalue(), root=workspace)
    return path
