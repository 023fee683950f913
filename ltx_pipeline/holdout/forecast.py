"""What the holdout-loss measurement will do and cost, before it runs: counts and arithmetic, never its figures.

Owns whether a run's holdout loss will be measured (``unavailable``: the one wording of each reason, which the
evaluate phase gives too), which checkpoints the trainer keeps (``kept_steps``: its save cadence and retention,
facts §4.7), and the counts the measurement (``measure``) then performs: one model load; checkpoints = step 0 + those
kept; rows = the held-out rows + min(``TRAIN_SAMPLES``, training rows); forward passes = checkpoints x rows x
``len(SIGMAS)``, one sample each, without gradients. Once autotune has measured a training step, an upper bound
in seconds: passes x the measured seconds per training sample (a no-grad forward pass costs less than a
sample's share of a training step). ``reports.holdout_cost`` words it in plan.md: the plan writes it from its
settings before approval (``at_plan``), autotune again from the prepared rows, the stage config and its winner
(``after_autotune``).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ltx_pipeline.backends.base import MeasuresHoldoutLoss
from ltx_pipeline.holdout.protocol import SIGMAS, TRAIN_SAMPLES
from ltx_pipeline.ltx.autotune.availability import OFF_REASON, AutotunePlan
from ltx_pipeline.ltx.config_values import config_value, lax_int
from ltx_pipeline.ltx.metadata import read_metadata_rows
from ltx_pipeline.ltx.preparation import PreparationPlan, holdout_count
from ltx_pipeline.ltx.recipe import Recipe
from ltx_pipeline.outputs.autotune import AutotuneOutputs
from ltx_pipeline.probing import DatasetInfo
from ltx_pipeline.reports.holdout_cost import HoldoutPlan, StepTime
from ltx_pipeline.yaml_io import load_yaml

__all__ = ["NOTHING_HELD_OUT", "NO_HOLDOUT_CAPTIONED", "Rows", "StageCheckpoints", "after_autotune", "at_plan",
           "kept_steps", "unavailable"]

NOTHING_HELD_OUT = "nothing was held out (`--holdout N` reserves N samples at the plan)"
NO_HOLDOUT_CAPTIONED = "the dataset came captioned, so nothing was held out (`--holdout-file` names held-out rows)"
_AUTOTUNE_WILL = ("autotune measures a training step after your approval and rewrites this section with a bound "
                  "in seconds")


def _no_autotune(why: str) -> str:
    return (f"autotune does not run ({why}), so no training step is measured before training; the same bound is "
            "then the passes x training's own seconds per step (`ltx-pipeline status`) / its samples per step on "
            "one GPU")


def unavailable(choice: str, backend: object, training_mode: str) -> str | None:
    """Why a run's holdout loss will not be measured, or None: ``choice`` is the request's ``holdout_loss``."""
    if choice == "off":
        return "--holdout-loss off (holdout_loss: off in run.yaml)"
    if not isinstance(backend, MeasuresHoldoutLoss):
        return f"the {getattr(backend, 'name', 'this')} backend trains nothing, so there is no loss to measure"
    if training_mode != "lora":
        return "measured for LoRA runs only: a full fine-tune's checkpoints are whole models, one model load each"
    return None


def kept_steps(steps: int, interval: int | None, keep_last_n: int) -> tuple[int, ...]:
    """The steps whose weights an uninterrupted training leaves on disk, as the trainer saves and deletes them.

    The trainer saves every ``interval`` steps and once more at the end (the same file again when ``steps`` is a
    multiple of ``interval``); after each save it deletes the files of all but the last ``keep_last_n`` entries of
    its list of saves (<= 0: none), duplicates included, so ``keep_last_n`` 1 deletes the final weights there.
    """
    saves = [*(range(interval, steps + 1, interval) if interval else ()), steps]
    listed: list[int] = []
    on_disk: set[int] = set()
    for step in saves:
        listed.append(step)
        on_disk.add(step)
        if 0 < keep_last_n < len(listed):
            for old in listed[:-keep_last_n]:
                on_disk.discard(old)
            listed = listed[-keep_last_n:]
    return tuple(sorted(on_disk))


@dataclass(frozen=True)
class StageCheckpoints:
    """The measured stage: its index, its run step at start, and the settings its checkpoints follow from."""

    stage: int
    start_step: int
    steps: int
    interval: int | None
    keep_last_n: int

    @property
    def run_steps(self) -> tuple[int, ...]:
        """Step 0 (the base) and each kept checkpoint's run step, as the measurement numbers them."""
        return (0, *(self.start_step + s for s in kept_steps(self.steps, self.interval, self.keep_last_n)))


@dataclass(frozen=True)
class Rows:
    """The held-out and training rows (None: not known yet), or why there is no holdout."""

    held_out: int | None
    training: int | None
    why_none: str | None = None


def at_plan(ctx: Any, recipe: Recipe, preparation: PreparationPlan, dataset: DatasetInfo,
            autotune: AutotunePlan) -> HoldoutPlan:
    """plan.md's section before approval, from the request, the recipe's last stage and the planned preparation."""
    reason = unavailable(ctx.request.holdout_loss, ctx.backend, recipe.training_mode)
    rows = _planned_rows(ctx.request, preparation, dataset) if reason is None else Rows(None, None)
    last = recipe.stages[-1]
    stage = StageCheckpoints(last.index, last.start_step, last.steps or recipe.steps, recipe.checkpoint_interval,
                             recipe.keep_last_n)
    no_time = (_AUTOTUNE_WILL if autotune.runs else _no_autotune("it cannot run on this machine" if autotune.cannot_run
                                                                  else f"off {OFF_REASON}"))
    return _plan(reason or rows.why_none, stage, rows, None, no_time, "plan")


def after_autotune(ctx: Any, config: Path, stage: int, start_step: int, rows: Rows,
                   autotune: AutotuneOutputs) -> HoldoutPlan:
    """The section autotune writes: the last stage's ``config`` as the trainer reads it, the prepared ``rows``
    and autotune's winner (or why it measured none)."""
    values = load_yaml(config.read_text(encoding="utf-8")) or {}
    mode = str(config_value(values, "model.training_mode", "lora"))
    checkpoints = StageCheckpoints(stage, start_step, lax_int(config_value(values, "optimization.steps", 3000)) or 0,
                                   lax_int(config_value(values, "checkpoints.interval")),
                                   lax_int(config_value(values, "checkpoints.keep_last_n", 1)) or 0)
    reason = unavailable(ctx.request.holdout_loss, ctx.backend, mode) or rows.why_none
    if autotune.off:
        return _plan(reason, checkpoints, rows, None, _no_autotune(f"off {autotune.off}"), "autotune")
    step = (StepTime(autotune.objective, autotune.per_gpu_batch)
            if autotune.objective and autotune.per_gpu_batch else None)
    return _plan(reason, checkpoints, rows, step, "autotune found no config that fits, so it measured no step time",
                 "autotune")


def _plan(reason: str | None, stage: StageCheckpoints, rows: Rows, step: StepTime | None, no_time: str,
          written_by: str) -> HoldoutPlan:
    if reason is not None:
        return HoldoutPlan(reason=reason, written_by=written_by)
    steps = stage.run_steps
    training = None if rows.training is None else min(TRAIN_SAMPLES, rows.training)
    passes = (None if rows.held_out is None or training is None
              else len(steps) * (rows.held_out + training) * len(SIGMAS))
    bound = passes * step.per_sample if passes is not None and step is not None else None
    return HoldoutPlan(written_by=written_by, stage=stage.stage, steps=steps, interval=stage.interval,
                       keep_last_n=stage.keep_last_n, stage_steps=stage.start_step + stage.steps,
                       held_out=rows.held_out, training=training, train_cap=TRAIN_SAMPLES, sigmas=len(SIGMAS),
                       passes=passes, step_time=step, bound_s=bound,
                       no_time=None if bound is not None else no_time)


def _planned_rows(request: Any, preparation: PreparationPlan, dataset: DatasetInfo) -> Rows:
    """The rows the plan expects: the prepare phase's holdout of the samples it makes, or the user's file."""
    given = Path(request.holdout_file) if request.holdout_file else None
    held = len(read_metadata_rows(given)) if given is not None and given.is_file() else None
    if not preparation.needed:
        if given is None:
            return Rows(None, None, NO_HOLDOUT_CAPTIONED)
        rows = dataset.metadata.rows if dataset.metadata is not None else None
        return Rows(held, rows)
    samples = _prepared_samples(preparation)
    if given is not None:
        return Rows(held, samples)
    if request.holdout == 0:
        return Rows(None, None, NOTHING_HELD_OUT)
    if samples is None:
        return Rows(request.holdout, None)
    count = holdout_count(samples, request.holdout)
    return Rows(count, samples - count) if count else Rows(None, None, NOTHING_HELD_OUT)


def _prepared_samples(preparation: PreparationPlan) -> int | None:
    """The samples the prepare phase will make: the metadata's rows, or the clips after splitting scenes."""
    if preparation.source_kind == "metadata":
        return preparation.clips
    if preparation.scenes is None and preparation.split_videos:
        return None  # a plan made before scenes were found at plan time
    return preparation.clips + preparation.scene_clips
