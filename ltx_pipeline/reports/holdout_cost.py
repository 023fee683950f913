"""plan.md's "Holdout loss" section: what the holdout-loss measurement will do and cost, in counts and arithmetic.

Owns the words of ``HoldoutPlan`` (built by ``holdout.forecast``) and where they sit in plan.md: before "Approve to
proceed", outside the text whose digest the user approves, as the "Latent cache" section is (``plan_cache``):
autotune rewrites it with the step time it measured, and that must never void an approval. Facts only: whether it
will be measured (or why not), one model load, the checkpoints, rows and forward passes, and a bound in seconds
once a training step has been measured (said to be a bound, with what it leaves out); never a figure of the loss.
"""

from __future__ import annotations

from dataclasses import dataclass

from ltx_pipeline.reports.sections import PlanSection

__all__ = ["HEADING", "HOLDOUT_SECTION", "HoldoutPlan", "StepTime", "holdout_lines"]

HEADING = "## Holdout loss"
HOLDOUT_SECTION = PlanSection(HEADING, "## Approve to proceed")  # right before it (after Cost / Time)
_MAX_LISTED = 8


@dataclass(frozen=True)
class StepTime:
    """A training step autotune measured: its winner's seconds per optimizer step of ``samples`` per GPU."""

    seconds_per_step: float
    samples: int  # per process: batch_size x gradient_accumulation_steps

    @property
    def per_sample(self) -> float:
        return self.seconds_per_step / self.samples


@dataclass(frozen=True)
class HoldoutPlan:
    """What the measurement will do (``reason`` None) or why it will not run.

    Attributes:
        reason: why nothing will be measured (None: it will be).
        written_by: "plan" or "autotune": who wrote the section (its first line says so).
        stage: the training stage whose checkpoints are measured (the last).
        steps: the checkpoints' run steps, 0 (the base) first.
        interval, keep_last_n, stage_steps: the stage's checkpoint settings the steps follow from.
        held_out: the held-out rows (None: not known before the prepare phase).
        training: the training rows measured, at most ``train_cap`` (None: not known yet).
        train_cap: how many training rows the protocol takes at most.
        sigmas: the fixed noise levels each row is measured at.
        passes: checkpoints x rows x sigmas (None while the rows are not known).
        step_time: autotune's measured step, when there is one.
        bound_s: ``passes`` x ``step_time.per_sample`` (None without either).
        no_time: why no bound in seconds is given yet.
    """

    reason: str | None = None
    written_by: str = "plan"
    stage: int = 1
    steps: tuple[int, ...] = ()
    interval: int | None = None
    keep_last_n: int = -1
    stage_steps: int = 0
    held_out: int | None = None
    training: int | None = None
    train_cap: int = 0
    sigmas: int = 0
    passes: int | None = None
    step_time: StepTime | None = None
    bound_s: float | None = None
    no_time: str | None = None


def holdout_lines(plan: HoldoutPlan) -> list[str]:
    """The section's lines, heading first and a blank line last."""
    who = ("written with the plan, from its settings" if plan.written_by == "plan" else
           "written by autotune after your approval, from the last stage's config, the prepared rows and the step time "
           "it measured")
    lines = [HEADING, "", f"_Counts and arithmetic, not part of what you approve ({who}); run-summary.md reports "
             "what the measurement cost._", ""]
    if plan.reason is not None:
        return [*lines, f"- Not measured: {plan.reason}; nothing is loaded and no forward pass runs for it", ""]
    checkpoints = len(plan.steps)
    lines += ["- What: after training (the evaluate phase, before the renders), the trainer's own flow-matching loss "
              f"of the base (step 0) and of each checkpoint stage {plan.stage} keeps, on the held-out rows and on "
              f"up to {plan.train_cap} training rows, each at {plan.sigmas} fixed noise levels; no gradients, no "
              "optimizer step. `--holdout-loss off` skips it",
              "- Model loads: 1 (the base model, once; each checkpoint's LoRA weights are loaded into it in turn)",
              f"- Checkpoints: {checkpoints} = step 0 + {checkpoints - 1} kept ({_kept_words(plan)})",
              f"- Rows: {_rows_words(plan)}",
              f"- Forward passes: {_passes_words(plan)}",
              f"- Time: {_time_words(plan)}", ""]
    return lines


def _kept_words(plan: HoldoutPlan) -> str:
    kept = plan.steps[1:]
    shown = ", ".join(str(s) for s in kept) if len(kept) <= _MAX_LISTED else \
        f"{', '.join(str(s) for s in kept[:3])}, ..., {', '.join(str(s) for s in kept[-2:])}"
    cadence = (f"a save every {plan.interval} steps and the final save at step {plan.stage_steps}" if plan.interval
               else f"the final save at step {plan.stage_steps} only (no checkpoint interval)")
    keep = "all kept" if plan.keep_last_n <= 0 else f"keep_last_n {plan.keep_last_n} as the trainer applies it"
    return f"step{'s' if len(kept) != 1 else ''} {shown or 'none'}: {cadence}, {keep}"


def _rows_words(plan: HoldoutPlan) -> str:
    training = (f"{plan.training} training" if plan.training is not None
                else f"up to {plan.train_cap} training (the training rows are not known before the prepare phase)")
    if plan.held_out is None:
        return f"the held-out rows (counted by the prepare phase) + {training}"
    total = f"{plan.held_out + plan.training} = " if plan.training is not None else ""
    return (f"{total}{plan.held_out} held-out + {training} (clips that fit no bucket have no latents and are not "
            "measured)")


def _passes_words(plan: HoldoutPlan) -> str:
    if plan.passes is None or plan.held_out is None or plan.training is None:
        return f"{len(plan.steps)} checkpoints x rows x {plan.sigmas} noise levels, one sample each"
    return (f"{plan.passes:,} = {len(plan.steps)} checkpoints x {plan.held_out + plan.training} rows x "
            f"{plan.sigmas} noise levels, one sample each")


def _time_words(plan: HoldoutPlan) -> str:
    if plan.step_time is None or plan.bound_s is None:
        return f"not known yet: {plan.no_time}"
    step = plan.step_time
    return (f"at most {plan.bound_s:,.1f} s of forward passes, an upper bound and not a measurement: "
            f"{plan.passes:,} passes x {step.per_sample:.4g} s, the training time per sample autotune measured "
            f"(its winner: {step.seconds_per_step:.4g} s per optimizer step of {step.samples} sample(s) per GPU, at "
            "the largest bucket). A pass without gradients costs less than a sample's share of a training step "
            "(forward, backward and optimizer update). Not included: loading the model once and each checkpoint's "
            "weights")
