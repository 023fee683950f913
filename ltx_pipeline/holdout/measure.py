"""Measure the holdout loss of a run's checkpoints: the job, the script through the journal, the figures.

Owns the evaluate phase's measurement: whether there is anything to measure (and in words why not), the held-out
rows' latents (``rows``), the job (``protocol``), the backend's script started through ``RunJournal.run_to_end``
(detached and supervised: an engine killed mid-way re-attaches to it, and the script itself skips checkpoints
already in its results file, so a kill loses at most the checkpoint in progress), then
``outputs/holdout-loss.json`` and ``outputs/holdout_loss.png`` from the results. Figures only: the lowest
holdout step is reported as a fact; nothing here chooses a checkpoint.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ltx_pipeline.backends.base import MeasuresHoldoutLoss
from ltx_pipeline.checkpoints.discovery import weights_files
from ltx_pipeline.errors import RunFailed
from ltx_pipeline.holdout.forecast import unavailable
from ltx_pipeline.holdout.plot import plot_holdout_loss
from ltx_pipeline.holdout.protocol import (
    SIGMAS,
    TRAIN_SAMPLES,
    Job,
    JobCheckpoint,
    checkpoint_id,
    read_results,
    tree_identity,
)
from ltx_pipeline.holdout.rows import holdout_folder, holdout_rows, preprocess_rows
from ltx_pipeline.holdout.summary import HEADING, holdout_section
from ltx_pipeline.ltx.config_values import config_value
from ltx_pipeline.ltx.trainer_config import load_config_view
from ltx_pipeline.outputs.holdout_figures import FIGURES_FILE
from ltx_pipeline.outputs.holdout_loss import HoldoutLoss
from ltx_pipeline.outputs.train import TrainedStage, TrainOutputs
from ltx_pipeline.phase_context import LtxContext
from ltx_pipeline.reports.summary import with_section
from ltx_pipeline.trainer_log import read_tail
from ltx_pipeline.workspace import atomic_write
from ltx_pipeline.yaml_io import load_yaml

__all__ = ["FIGURES_FILE", "PLOT_FILE", "figures", "measure_and_report", "measure_holdout_loss"]

PLOT_FILE = "holdout_loss.png"
_KIND = "holdout_loss"


def measure_and_report(ctx: LtxContext) -> HoldoutLoss:
    """The evaluate phase's step: measure the last trained stage, then write run-summary.md's section."""
    record = measure_holdout_loss(ctx, ctx.output(TrainOutputs).trained[-1])
    summary = ctx.paths.outputs / "run-summary.md"
    if summary.is_file():
        text = with_section(summary.read_text(encoding="utf-8"), HEADING, holdout_section(record))
        atomic_write(summary, text, root=ctx.workspace)
    return record


def measure_holdout_loss(ctx: LtxContext, stage: TrainedStage) -> HoldoutLoss:
    """The holdout loss of ``stage``'s base and kept checkpoints, measured (or read back) now; or why none.

    Raises:
        RunFailed: the measuring script failed (its log's tail named).
    """
    config = Path(stage.config)
    reason = _unavailable(ctx, config)
    held = holdout_rows(ctx) if reason is None else None
    if held is not None and held.overlap:
        ctx.warn(f"Holdout loss: {len(held.overlap)} held-out clip(s) are training rows too and are not measured: "
                 f"{', '.join(Path(m).name for m in held.overlap[:5])}")
    reason = reason or (held.why_none if held is not None else None)
    if reason is not None or held is None:
        ctx.narrate(f"Holdout loss: not measured: {reason}.")
        return HoldoutLoss(measured=False, reason=reason)
    root, report = preprocess_rows(ctx, held)
    if not report.get("samples"):
        reason = f"none of the {len(held.indices)} held-out clip(s) fit the training buckets, so none has latents"
        ctx.narrate(f"Holdout loss: not measured: {reason}.")
        return HoldoutLoss(measured=False, reason=reason)
    job = _job(ctx, stage, config, root, report.get("data_identity"))
    entries = _run(ctx, stage, job)
    return _publish(ctx, entries, holdout=int(report["samples"]))


def _unavailable(ctx: LtxContext, config: Path) -> str | None:
    """Why this run's holdout loss cannot be measured, or None (``forecast.unavailable``: plan.md says the same)."""
    return unavailable(ctx.request.holdout_loss, ctx.backend, load_config_view(config).model.training_mode)


def _job(ctx: LtxContext, stage: TrainedStage, config: Path, holdout_root: Path, identity: str | None) -> Job:
    values = load_yaml(config.read_text(encoding="utf-8")) or {}
    train_root = Path(str(config_value(values, "data.preprocessed_data_root")))
    kept = weights_files(Path(stage.output_dir) / "checkpoints")
    checkpoints = (JobCheckpoint(0, None, checkpoint_id(0, None)),
                   *(JobCheckpoint(stage.start_step + step, path, checkpoint_id(step, Path(path)))
                     for step, path in kept))
    folder = holdout_folder(ctx)
    return Job(config=config, holdout_root=holdout_root, train_root=train_root, checkpoints=checkpoints,
               results=folder / "results.json", data_identity=identity, train_identity=tree_identity(train_root))


def _run(ctx: LtxContext, stage: TrainedStage, job: Job) -> list[dict[str, Any]]:
    """The script's entries for the job's checkpoints, after running it for those not yet measured."""
    wanted = {c.id for c in job.checkpoints}
    done = {e["id"] for e in read_results(job.results, job.protocol)} & wanted
    missing = len(wanted - done)
    if missing:
        backend = ctx.backend
        assert isinstance(backend, MeasuresHoldoutLoss)
        job_file = holdout_folder(ctx) / "job.json"
        atomic_write(job_file, job.to_json(), root=ctx.workspace)
        ctx.narrate(f"Holdout loss: measuring {missing} of {len(wanted)} checkpoint(s) (step 0 is the base) with the "
                    f"trainer's own flow-matching loss at {len(SIGMAS)} fixed noise levels, on the held-out rows and "
                    f"up to {TRAIN_SAMPLES} training rows; log: {ctx.paths.logs / 'holdout_loss.log'}.")
        log = ctx.paths.logs / "holdout_loss.log"
        record = ctx.journal.run_to_end(_KIND, stage.stage, backend.holdout_loss_command(job_file), log).exit()
        if record is None or record.get("exit_code") != 0:
            tail = " | ".join(line.strip() for line in read_tail(log, 3) if line.strip())
            raise RunFailed(f"The holdout-loss measurement failed (exit {(record or {}).get('exit_code')}): {tail}",
                            where=str(log), fix="read the log; `ltx-pipeline resume` measures only the checkpoints "
                                                "still missing, `--holdout-loss off` skips it")
    entries = [e for e in read_results(job.results, job.protocol) if e["id"] in wanted]
    return sorted(entries, key=lambda e: (e["step"], e["checkpoint"] or ""))


def figures(entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``holdout-loss.json``'s rows: step, checkpoint, and each set's video, audio and total loss."""
    def loss(figure: dict[str, Any]) -> dict[str, Any]:
        return {"video": figure["video"], "audio": figure["audio"], "total": figure["total"],
                "samples": figure["samples"]}

    return [{"step": e["step"], "checkpoint": e["checkpoint"], "holdout": loss(e["holdout"]),
             "train": loss(e["train"]), "seconds": e["seconds"]} for e in entries]


def _publish(ctx: LtxContext, entries: list[dict[str, Any]], *, holdout: int) -> HoldoutLoss:
    rows = figures(entries)
    out = ctx.paths.outputs
    atomic_write(out / FIGURES_FILE, json.dumps(rows, indent=2) + "\n", root=ctx.workspace)
    plot = plot_holdout_loss(rows, out / PLOT_FILE, workspace=ctx.workspace)
    lowest = min(rows, key=lambda r: (r["holdout"]["total"], r["step"]))
    first, last = rows[0], rows[-1]
    ctx.narrate(f"Holdout loss (total, fixed noise): {first['holdout']['total']:.4g} at step {first['step']}, "
                f"{last['holdout']['total']:.4g} at step {last['step']}; lowest {lowest['holdout']['total']:.4g} at "
                f"step {lowest['step']}. Figures: {out / FIGURES_FILE}.")
    return HoldoutLoss(measured=True, file=str(out / FIGURES_FILE), plot=str(plot), checkpoints=len(rows),
                       lowest_step=lowest["step"], lowest_total=lowest["holdout"]["total"], holdout_samples=holdout,
                       train_samples=int(first["train"]["samples"]),
                       seconds=round(sum(float(r["seconds"]) for r in rows), 3))
