"""Evaluate phase: render the final weights for in-distribution, out-of-distribution and held-out prompts.

The skill's post-train validation, as software: the prompt sets come from ``ltx.evaluation``
(training captions with seed 42, the user's prompts or generic trigger-word ones, the holdout
rows), the render from ``evaluation.render`` (an eval config derived from the final config through
the patch mechanism, launched and followed like any training, retried once smaller after an
out-of-memory). What comes out is a listing: ``outputs/eval/<category>/NN.mp4``, one
``prompts.json``, ``contact-sheet.png`` and a section of ``run-summary.md``. No verdict on quality,
no advice. ``--skip-eval`` skips it with the reason recorded.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ltx_pipeline.checkpoints.files import final_weights_name
from ltx_pipeline.engine import PhaseResult
from ltx_pipeline.engine.fingerprint import file_digest
from ltx_pipeline.errors import RunFailed
from ltx_pipeline.evaluation.checkpoint_grid import render_checkpoint_grid
from ltx_pipeline.evaluation.render import EvalJob, EvalRenderer
from ltx_pipeline.evaluation.sheet import SheetEntry, write_eval_sheet
from ltx_pipeline.holdout.measure import measure_and_report
from ltx_pipeline.ltx.audio_choice import trained_mode
from ltx_pipeline.ltx.config_values import config_value
from ltx_pipeline.ltx.evaluation import CATEGORIES, eval_sets
from ltx_pipeline.ltx.metadata import read_metadata_rows
from ltx_pipeline.ltx.modes import get_mode
from ltx_pipeline.outputs.data_check import DataCheckOutputs
from ltx_pipeline.outputs.evaluate import EvaluateOutputs, Render
from ltx_pipeline.outputs.holdout_loss import HoldoutLoss
from ltx_pipeline.outputs.plan import PlanOutputs
from ltx_pipeline.outputs.prepare import PrepareOutputs
from ltx_pipeline.outputs.probe import ProbeOutputs
from ltx_pipeline.outputs.train import TrainedStage, TrainOutputs
from ltx_pipeline.phase_context import LtxContext
from ltx_pipeline.reports.summary import eval_section, with_section
from ltx_pipeline.training.validation import stage_launch_target
from ltx_pipeline.workspace import atomic_write
from ltx_pipeline.yaml_io import load_yaml

__all__ = ["PHASE"]

class EvaluatePhase:
    name = "evaluate"
    heavy = True
    optional_extra = True  # a run that finished before a release added it is not made to render (#49)
    outputs_type = EvaluateOutputs

    def fingerprint(self, ctx: LtxContext) -> dict[str, Any]:
        request = ctx.request
        parts: dict[str, Any] = {"train": ctx.output_digest("train"), "data_check": ctx.output_digest("data_check"),
                                 "run request": {"eval_prompts": request.eval_prompts, "skip_eval": request.skip_eval,
                                                 "trigger": request.trigger, "holdout_loss": request.holdout_loss,
                                                 "eval_checkpoints": request.eval_checkpoints}}
        holdout = _holdout_file(ctx)
        parts["holdout"] = file_digest(holdout) if holdout is not None and holdout.is_file() else None
        return parts

    def run(self, ctx: LtxContext) -> PhaseResult[EvaluateOutputs]:
        holdout = measure_and_report(ctx)  # before the renders, and whether or not they are skipped (#45)
        if ctx.request.skip_eval:
            return _skipped(ctx, holdout)
        last = ctx.output(TrainOutputs).trained[-1]  # evaluate runs once every stage has trained
        config = Path(last.config)
        values = load_yaml(config.read_text(encoding="utf-8")) or {}
        weights = _final_weights(last, values)
        # A video-only run of an audio+video mode renders no sound: its prompts describe none.
        mode = trained_mode(get_mode(ctx.request.mode), ctx.output(PlanOutputs).audio)
        samples = config_value(values, "validation.samples") or [{}]
        training, training_note = _training_rows(ctx)
        held, held_note = _held_out_rows(ctx)
        sets = eval_sets(training=training, held_out=held, user_prompts=ctx.request.eval_prompts,
                         trigger=ctx.request.trigger, describe_audio=mode.generates_audio,
                         condition_shapes=list(samples[0].get("conditions") or []),
                         training_note=training_note, held_out_note=held_note)
        counts = {c: sum(p.category == c for p in sets.prompts) for c in CATEGORIES}
        ctx.narrate(f"Evaluating {weights.name}: {counts['in_distribution']} in-distribution, "
                    f"{counts['out_of_distribution']} out-of-distribution and {counts['held_out']} held-out "
                    "prompt(s), rendered by the trainer's own validation at step 0.")
        for category, note in sets.notes.items():
            ctx.narrate(f"No {category.replace('_', '-')} prompts: {note}.")
        eval_root = ctx.paths.outputs / "eval"
        data = ctx.output(DataCheckOutputs)
        job = EvalJob(final_config=config, weights=weights, prompts=sets.prompts, eval_root=eval_root,
                      config_file=ctx.paths.root / "config.eval.yaml", logs=ctx.paths.logs,
                      target=stage_launch_target(ctx.output(ProbeOutputs), data, data.stages[-1], 1))
        renderer = EvalRenderer(backend=ctx.backend, journal=ctx.journal, workspace=ctx.workspace,
                                narrate=ctx.narrate)
        try:
            rendered = renderer.render(job)
            grid = render_checkpoint_grid(ctx, job, renderer, last, rendered["renders"])  # same prompts and seeds
        except KeyboardInterrupt:
            ctx.narrate("Stopped following; the evaluation render goes on. `ltx-pipeline resume` collects it.")
            return PhaseResult(EvaluateOutputs(pending=True), pending=True)
        renders = rendered["renders"]
        listing = [Render.model_validate({k: r[k] for k in ("file", "category", "prompt", "source", "conditions",
                                                            "conditions_from", "video_dims")}) for r in renders]
        atomic_write(eval_root / "prompts.json", json.dumps({
            "weights": str(weights), "notes": sets.notes, "renders": [r.model_dump(mode="json") for r in listing]},
            indent=2, ensure_ascii=False) + "\n", root=ctx.workspace)
        entries = [SheetEntry(r["category"], Path(r["file"]), r["prompt"]) for r in renders if r["file"]]
        sheet, unreadable = write_eval_sheet(entries, eval_root / "contact-sheet.png", workspace=ctx.workspace)
        if unreadable:
            ctx.warn(f"Left out of the evaluation contact sheet, not decodable: {', '.join(unreadable)}")
        outputs = EvaluateOutputs(skipped=False, weights=str(weights), renders=listing, notes=sets.notes,
                                  contact_sheet=str(sheet) if sheet else None, retried_dims=rendered["retried_dims"],
                                  eval_config=str(job.config_file), prompts_file=str(eval_root / "prompts.json"),
                                  holdout_loss=holdout, grid=grid)
        summary = ctx.paths.outputs / "run-summary.md"
        if summary.is_file():
            text = with_section(summary.read_text(encoding="utf-8"), "## Evaluation renders",
                                eval_section(outputs, base=ctx.paths.outputs))
            atomic_write(summary, text, root=ctx.workspace)
        for render in listing:
            where = Path(render.file).relative_to(ctx.paths.outputs) if render.file else "(no file written)"
            ctx.narrate(f"{where}: {_short(render.prompt)}")
        return PhaseResult(outputs)

    def summary(self, outputs: EvaluateOutputs) -> str:
        if outputs.skipped:
            return f"skipped: {outputs.reason}"
        if outputs.pending:
            return "evaluation render detached"
        counts = {c: sum(r.category == c for r in outputs.renders) for c in CATEGORIES}
        if not any(r.file for r in outputs.renders):
            return f"{len(outputs.renders)} prompt(s) run through validation; this backend writes no render files"
        retried = (f"; retried at {'x'.join(map(str, outputs.retried_dims))} after an out-of-memory"
                   if outputs.retried_dims else "")
        return (f"{len(outputs.renders)} render(s) in outputs/eval ({counts['in_distribution']} in-distribution, "
                f"{counts['out_of_distribution']} out-of-distribution, {counts['held_out']} held-out){retried}")


def _skipped(ctx: LtxContext, holdout: HoldoutLoss) -> PhaseResult[EvaluateOutputs]:
    """``--skip-eval``: no renders, said with how to get them (the holdout loss, measured before, is kept)."""
    reason = "--skip-eval (skip_eval: true in run.yaml)"
    ctx.narrate(f"Evaluation skipped: {reason}. `ltx-pipeline resume` with skip_eval: false in run.yaml renders it.")
    return PhaseResult(EvaluateOutputs(skipped=True, reason=reason, holdout_loss=holdout))


def _final_weights(stage: TrainedStage, values: dict[str, Any]) -> Path:
    """The last stage's final weights, or a failure naming the file that was expected."""
    expected = Path(stage.final_checkpoint or Path(stage.output_dir) / "checkpoints" /
                    final_weights_name(values))
    if not expected.is_file():
        raise RunFailed(f"The final weights to evaluate are missing: expected {expected}", where=str(expected),
                        fix="restore the file (or `ltx-pipeline resume --restart-training` to train again); "
                            "`ltx-pipeline resume --skip-eval` finishes without the evaluation")
    return expected


def _training_rows(ctx: LtxContext) -> tuple[list[tuple[dict[str, Any], Path]], str | None]:
    metadata = ctx.output(DataCheckOutputs).metadata_file
    if not metadata:
        return [], "the dataset is a preprocessed folder, which keeps no captions to read"
    path = Path(metadata)
    return [(row, path.parent) for row in read_metadata_rows(path)], None


def _holdout_file(ctx: LtxContext) -> Path | None:
    prepare = ctx.output(PrepareOutputs) if ctx.has_output("prepare") else None
    if prepare is not None and prepare.prepared:
        return Path(prepare.holdout_file) if prepare.holdout_file else None
    return Path(ctx.request.holdout_file) if ctx.request.holdout_file else None


def _held_out_rows(ctx: LtxContext) -> tuple[list[tuple[dict[str, Any], Path]], str | None]:
    path = _holdout_file(ctx)
    if path is None or not path.is_file():
        prepared = ctx.has_output("prepare") and ctx.output(PrepareOutputs).prepared
        why = ("nothing was held out (see `--holdout`)" if prepared else
               "no holdout file: the dataset came captioned, so nothing was held out (`--holdout-file` names one)")
        return [], why
    return [(row, path.parent) for row in read_metadata_rows(path)], None


def _short(text: str, limit: int = 100) -> str:
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


PHASE = EvaluatePhase()
