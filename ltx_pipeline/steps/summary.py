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


def render_summary(facts: dict[str, Any]) -> str:
    """The run-summary markdown from measured facts (see ``phases.monitor`` for the keys)."""
    request, stages = facts["request"], facts["stages"]
    lines = [f"# Run summary: {facts['run']}", "",
             f"- Date: {time.strftime('%Y-%m-%d %H:%M %Z')}",
             f"- GPUs: {facts['gpus']}",
             f"- Purpose: {request.get('mode')} {request.get('training_mode', 'lora')} "
             f"({facts.get('mode_title') or request.get('mode')}), strategy {request.get('strategy', 'single')}",
             f"- Trigger word: {request.get('trigger') or '(none)'}",
             f"- Dataset: {request.get('dataset')} ({facts['samples']} sample(s); buckets "
             f"{', '.join(s['buckets'] for s in facts['data_stages'])})",
             *_prepared_lines(facts.get("prepared")),
             f"- Backend: {request.get('backend')}", "", "## Final checkpoints", "",
             "| Stage | Step | Weights |", "|---|---|---|"]
    lines += [f"| {s['stage']} | {s['final_step']} | `{s['final_checkpoint']}` |" for s in stages]
    lines += ["", "## Measured", "",
              "| Stage | Steady step time | Trainer's overall speed | Peak VRAM (trainer) | Steps logged |",
              "|---|---|---|---|---|"]
    for s in stages:
        measured = s.get("step_time_s") is not None
        step_time = f"{s['step_time_s']:.2f} s" if measured else "not measured (too few clean steps)"
        speed = (f"{s['steps_per_second']:.2f} steps/s" if s.get("steps_per_second") is not None
                 else "not reported")
        peak = f"{s['peak_gpu_memory_gb']:.2f} GB" if s.get("peak_gpu_memory_gb") is not None else "not reported"
        if s.get("on_gpu") is False:
            peak = "not measured: no GPU, the trainer ran on the CPU"
        lines.append(f"| {s['stage']} | {step_time} | {speed} | {peak} | {s['logged_steps']} |")
    if facts.get("autotune"):
        lines += ["", f"Autotune: {facts['autotune']}"]
    if facts.get("memory_model"):
        model = facts["memory_model"]
        lines += ["", f"Memory model: autotune predicted {model['predicted_gb']:.1f} GB for the chosen config; the "
                  f"trainer reported {model['measured_gb']:.1f} GB"
                  + (f" ({model['error']:+.0%}: a miss, recorded in the study {model['study']})." if model["miss"]
                     else f" (within ±{model['tolerance']:.0%}).")]
    lines += ["", "Step time is the median of the trainer's Time/Step over steps with no validation or checkpoint "
              "save in them (the trainer logs a Step line every 20 steps when its progress bars are off); the overall "
              "speed is the trainer's closing `Training speed` figure, model loading, validation and saves included; "
              "peak VRAM is the trainer's closing `Peak GPU memory` statistic.", "",
              "## Config as trained", ""]
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
              f"- Use: load `{stages[-1]['final_checkpoint']}` as a LoRA in the LTX-2 inference pipeline "
              "(keys are ComfyUI-style, `diffusion_model.` prefixed).",
              "- Continue training: raise `optimization.steps` in the last stage's config and run "
              "`ltx-pipeline resume`; it points `model.load_checkpoint` at the newest checkpoint pair so the trainer "
              "restores the step and scheduler.",
              "- Plots: `loss.png` (loss per step, smoothed; validation and checkpoint steps marked) and "
              "`step_time.png` beside this file.", ""]
    return "\n".join(lines)


def eval_section(outputs: dict[str, Any], *, base: Path) -> str:
    """The "Evaluation renders" section: each file and its prompt, and what was not rendered. No verdict."""
    lines = ["The final weights (`" + Path(outputs["weights"]).name + "`) rendered by the trainer's own validation "
             "at step 0; `eval/prompts.json` lists each file's prompt, conditions and source.", "",
             "| File | Category | Prompt | Source |", "|---|---|---|---|"]
    for render in outputs["renders"]:
        prompt = render["prompt"].replace("|", "\\|")
        where = f"`{Path(render['file']).relative_to(base).as_posix()}`" if render["file"] else "(no file written)"
        lines.append(f"| {where} | {render['category']} | {prompt} | "
                     f"{render['source'] if render['category'] != 'in_distribution' else 'training caption'} |")
    lines.append("")
    for category, note in (outputs.get("notes") or {}).items():
        lines.append(f"- No {category.replace('_', '-')} renders: {note}.")
    if outputs.get("retried_dims"):
        dims = "x".join(str(d) for d in outputs["retried_dims"])
        lines.append(f"- The planned validation dims ran out of GPU memory; renders marked {dims} in prompts.json "
                     "were made at those smaller dims.")
    if outputs.get("contact_sheet"):
        lines.append("- Contact sheet (first, middle and last frame of each render): `eval/contact-sheet.png`.")
    lines.append(f"- Eval config: `{outputs['eval_config']}`.")
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


def _smooth(values: list[float], weight: float = 0.8) -> list[float]:
    """Exponential moving average (as TensorBoard's smoothing slider)."""
    out, last = [], None
    for value in values:
        last = value if last is None else weight * last + (1 - weight) * value
        out.append(last)
    return out


def plot_loss(metrics: Sequence[dict[str, Any]], path: Path, *, workspace: Path, checkpoint_steps: Sequence[int] = (),
              validation_steps: Sequence[int] = ()) -> Path:
    """Loss per step (all stages on one axis, stage boundaries labelled), smoothed, with markers."""
    import io

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(9, 4.5))
    for stage in sorted({m["stage"] for m in metrics}):
        rows = [m for m in metrics if m["stage"] == stage and m.get("loss") is not None]
        steps, losses = [m["step"] for m in rows], [m["loss"] for m in rows]
        ax.plot(steps, losses, alpha=0.35, label=f"stage {stage} loss")
        ax.plot(steps, _smooth(losses), linewidth=2, label=f"stage {stage} smoothed")
    for index, step in enumerate(checkpoint_steps):
        ax.axvline(step, color="tab:green", linestyle="--", alpha=0.5, label="checkpoint" if index == 0 else None)
    for index, step in enumerate(validation_steps):
        ax.axvline(step, color="tab:purple", linestyle=":", alpha=0.5, label="validation" if index == 0 else None)
    ax.set_xlabel("optimizer step")
    ax.set_ylabel("loss (rank 0 micro-batch)")
    ax.set_title("Training loss")
    ax.legend(loc="upper right", fontsize="small")
    return _save(fig, plt, io, path, workspace)


def plot_step_time(metrics: Sequence[dict[str, Any]], path: Path, *, workspace: Path) -> Path:
    """Time/Step per logged step; steps with validation or a checkpoint save drawn apart."""
    import io

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(9, 4))
    rows = [m for m in metrics if m.get("step_time_s") is not None]
    for clean, label, marker in ((True, "clean steps", "o"), (False, "validation / checkpoint steps", "x")):
        chosen = [m for m in rows if bool(m.get("clean")) is clean]
        ax.scatter([m["step"] for m in chosen], [m["step_time_s"] for m in chosen], marker=marker, label=label)
    steady = steady_step_time(rows)
    if steady is not None:
        ax.axhline(steady, color="tab:red", linestyle="--", label=f"steady state {steady:.2f} s")
    ax.set_xlabel("optimizer step")
    ax.set_ylabel("seconds per step")
    ax.set_title("Step time")
    ax.legend(loc="upper right", fontsize="small")
    return _save(fig, plt, io, path, workspace)


def _save(fig: Any, plt: Any, io: Any, path: Path, workspace: Path) -> Path:
    buffer = io.BytesIO()
    fig.tight_layout()
    fig.savefig(buffer, format="png", dpi=110)
    plt.close(fig)
    atomic_write(path, buffer.getvalue(), root=workspace)
    return path
