"""The evaluate phase's checkpoint grid: the same prompts and seeds rendered at each chosen checkpoint.

Owns the step after the final weights' renders: choose the checkpoints (``checkpoints_choice``, from
``--eval-checkpoints`` and ``outputs/holdout-loss.json``), render every other chosen checkpoint through the same
``EvalRenderer`` (the same eval config, prompts and seeds; only the weights differ) into
``outputs/eval/checkpoints/step_NNNNN/<category>/NN.*``, then write ``outputs/eval/grid.json`` (the data) and
``outputs/eval/grid.png`` (its picture). The last checkpoint is the final weights, so its row is the main
evaluation's renders, never rendered twice. Each checkpoint keeps its own ``.renders.json``: a kill loses at most
the renders in progress, and ``resume`` renders only what is missing. Folders of checkpoints no longer chosen are
removed so the folder matches ``grid.json``.
"""

from __future__ import annotations

import dataclasses
import json
import shutil
from pathlib import Path
from typing import Any

from ltx_pipeline.checkpoints.discovery import weights_files
from ltx_pipeline.evaluation.checkpoints_choice import CheckpointChoice, choose_checkpoints, read_holdout_totals
from ltx_pipeline.evaluation.grid import GridRow, write_grid
from ltx_pipeline.evaluation.render import EvalJob, EvalRenderer
from ltx_pipeline.outputs.train import TrainedStage
from ltx_pipeline.phase_context import LtxContext
from ltx_pipeline.status.holdout_loss import FIGURES_FILE
from ltx_pipeline.workspace import atomic_write

__all__ = ["GRID_DATA", "GRID_PICTURE", "STEPS_FOLDER", "render_checkpoint_grid", "step_folder"]

GRID_DATA, GRID_PICTURE, STEPS_FOLDER = "grid.json", "grid.png", "checkpoints"


def step_folder(eval_root: Path, step: int) -> Path:
    """Where the renders of the checkpoint at ``step`` go (not the final weights': those are ``eval_root``'s)."""
    return eval_root / STEPS_FOLDER / f"step_{step:05d}"


def kept_checkpoints(stage: TrainedStage, final_weights: Path) -> list[tuple[int, Path]]:
    """The stage's kept checkpoints by run step, the final weights always among them (as the last)."""
    kept = {stage.start_step + step: Path(path)
            for step, path in weights_files(Path(stage.output_dir) / "checkpoints")}
    kept = {step: path for step, path in kept.items() if path.resolve() != final_weights.resolve()}
    kept[stage.run_final_step] = final_weights
    return sorted(kept.items())


def render_checkpoint_grid(ctx: LtxContext, job: EvalJob, renderer: EvalRenderer, stage: TrainedStage,
                           final_renders: list[dict[str, Any]]) -> str | None:
    """Render the chosen checkpoints and write ``grid.json`` and ``grid.png``; returns the grid's path (None when
    no render decodes, or the backend writes no render files).

    Raises:
        RunFailed: a checkpoint's render failed (``EvalRenderer.render``).
        KeyboardInterrupt: the user stopped following; the render goes on and ``resume`` collects it.
    """
    kept = kept_checkpoints(stage, job.weights)
    choice = choose_checkpoints(ctx.request.eval_checkpoints, kept,
                                read_holdout_totals(ctx.paths.outputs / FIGURES_FILE))
    if choice.note:
        ctx.narrate(f"Checkpoint grid: {choice.note}.")
    steps = ", ".join(f"{c.step} ({c.why})" for c in choice.checkpoints)
    ctx.narrate(f"Checkpoint grid: {len(choice.checkpoints)} of {len(kept)} kept checkpoint(s), the same "
                f"{len(job.prompts)} prompt(s) and seeds at each: step {steps}.")
    renders: dict[int, list[dict[str, Any]]] = {}
    for chosen in choice.checkpoints:
        if chosen.weights == job.weights:
            renders[chosen.step] = final_renders
            continue
        at_step = dataclasses.replace(job, weights=chosen.weights, eval_root=step_folder(job.eval_root, chosen.step))
        renders[chosen.step] = renderer.render(at_step)["renders"]
    _forget_unchosen(job.eval_root, {c.step for c in choice.checkpoints if c.weights != job.weights}, ctx.workspace)
    grid = _write(ctx, job, choice, renders)
    return str(grid) if grid else None


def _forget_unchosen(eval_root: Path, chosen: set[int], workspace: Path) -> None:
    for folder in sorted((eval_root / STEPS_FOLDER).glob("step_*")):
        digits = folder.name.removeprefix("step_")
        if folder.is_dir() and digits.isdigit() and int(digits) not in chosen and folder.is_relative_to(workspace):
            shutil.rmtree(folder)


def _write(ctx: LtxContext, job: EvalJob, choice: CheckpointChoice,
           renders: dict[int, list[dict[str, Any]]]) -> Path | None:
    prompts = [p.prompt for p in job.prompts]
    files = {c.step: [r["file"] for r in renders[c.step]] for c in choice.checkpoints}
    rows = [{"step": c.step, "weights": str(c.weights), "holdout": c.holdout, "why": c.why, "renders": files[c.step]}
            for c in choice.checkpoints]
    data = {"choice": ctx.request.eval_checkpoints or "default", "note": choice.note,
            "prompts": [{"prompt": p.prompt, "category": p.category} for p in job.prompts], "rows": rows}
    atomic_write(job.eval_root / GRID_DATA, json.dumps(data, indent=2, ensure_ascii=False) + "\n",
                 root=ctx.workspace)
    grid_rows = [GridRow(c.step, c.holdout, [Path(f) if f else None for f in files[c.step]])
                 for c in choice.checkpoints]
    grid, unreadable = write_grid(grid_rows, prompts, job.eval_root / GRID_PICTURE, workspace=ctx.workspace)
    if unreadable:
        ctx.warn(f"Shown as not decodable in the checkpoint grid: {', '.join(unreadable)}")
    if grid is not None:
        ctx.narrate(f"Checkpoint grid: {grid.relative_to(ctx.paths.outputs)} ({len(rows)} row(s) x "
                    f"{len(prompts)} prompt(s)); the dashboard's run page plays each row side by side.")
    return grid
