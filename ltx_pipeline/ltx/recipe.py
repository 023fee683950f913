"""The training recipe: every setting the plan proposes, derived from the request and the probe.

Pure rules from the seeds and the official skill: mode -> example config, tier -> base config
(standard or low-VRAM), rank and alpha (alpha == rank), resolution strategy (single, mixed,
chained), effective batch across GPUs, multi-GPU launch (DDP for LoRA, FSDP for full
fine-tune) and the full fine-tune rules. Every value not given by the user is listed as an
assumption; every documented constraint the request runs into becomes a warning.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from ltx_pipeline.errors import BadRequest
from ltx_pipeline.ltx.buckets import CHAINED_DEFAULT, Bucket
from ltx_pipeline.ltx.launch_plan import LaunchShape
from ltx_pipeline.ltx.modes import LOW_VRAM_T2V_CONFIG, Mode
from ltx_pipeline.ltx.tiers import Tier

__all__ = ["WEIGHTS_FIELDS", "Recipe", "Stage", "build_recipe", "continue_points", "planned_stages", "refuse_fewer",
           "schedule_lines", "total_steps"]

# Knob values of the trainer's two shipped anchor configs (facts §2.1-2.2, seed 000).
_LOW_VRAM: dict[str, Any] = {"optimizer_type": "adamw8bit", "quantization": "int8-quanto",
                             "load_text_encoder_in_8bit": True, "offload_optimizer_during_validation": True,
                             "rank": 16}
_STANDARD: dict[str, Any] = {"optimizer_type": "adamw", "quantization": None, "load_text_encoder_in_8bit": False,
                             "offload_optimizer_during_validation": False, "rank": 32}
CHECKPOINT_INTERVAL = 250
VALIDATION_INTERVAL = 100


@dataclass(frozen=True)
class Stage:
    """One training run of the plan (a chained plan has several)."""

    index: int
    buckets: tuple[str, ...]
    tokens: tuple[int, ...]
    learning_rate: float
    warm_start_from_previous: bool
    # Optimizer steps of this stage (None: the recipe's ``steps``), and for a continuation of a finished
    # training the run's step it starts from (0 for every planned stage): see ``_continuations``.
    steps: int | None = None
    start_step: int = 0


@dataclass(frozen=True)
class Recipe:
    """All settings the plan proposes, as the trainer spells them."""

    mode: str
    template: str
    tier_name: str
    base: str
    training_mode: str
    strategy: str
    stages: tuple[Stage, ...]
    knobs: dict[str, Any]
    rank: int
    alpha: int
    steps: int
    effective_batch: int
    num_processes: int
    launch: str
    validation_dims: str
    checkpoint_interval: int
    keep_last_n: int
    validation_interval: int
    assumptions: tuple[str, ...] = field(default_factory=tuple)
    warnings: tuple[str, ...] = field(default_factory=tuple)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def build_recipe(*, mode: Mode, tier: Tier, gpu_count: int, launch: LaunchShape, training_mode: str,
                 strategy: str, stages: list[tuple[Bucket, ...]], buckets_given: bool, rank: int | None,
                 steps: int | None, learning_rate: float | None, effective_batch: int,
                 checkpoint_interval: int | None = None, validation_interval: int | None = None,
                 gpu_names: tuple[str, ...] = (), continued_from: tuple[int, ...] = ()) -> Recipe:
    """Derive the recipe; see the module docstring for the rules applied.

    ``gpu_count`` is the hardware (for the full fine-tune and mixed-GPU warnings); ``launch`` is the
    launch that will be made (``ltx.launch_plan``): the effective batch is split over its processes.
    ``continued_from``: the step counts at which a finished training was continued (the request's
    ``continued_from``); the planned stages then train the first of them, and each continuation is one
    more stage up to the next count, the last one up to ``steps``.
    """
    assumptions: list[str] = []
    warnings: list[str] = []
    anchor = _LOW_VRAM if tier.base == "low_vram" else _STANDARD
    template = LOW_VRAM_T2V_CONFIG if mode.name == "t2v" and tier.base == "low_vram" else mode.config
    knobs = _starting_knobs(anchor, tier, training_mode, assumptions)
    if rank is None:
        rank = anchor["rank"]
        if training_mode == "lora":
            assumptions.append(f"LoRA rank {rank} (the {_base_words(tier.base)} config's); alpha = rank")
    if training_mode == "full":
        _full_fine_tune_notes(tier, gpu_count, assumptions, warnings)
    steps, base_lr = _steps_and_rate(mode, training_mode, steps, learning_rate, assumptions)

    built_stages = _stages(strategy, stages, base_lr, learning_rate is not None, assumptions)
    if continued_from:
        built_stages += _continuations(built_stages[-1], continued_from, steps, assumptions)
        steps = continued_from[0]
    if not buckets_given:
        assumptions.append("resolution buckets " + "; ".join("+".join(s.buckets) for s in built_stages)
                           + f" (the {strategy} default)")
    multi_bucket = any(len(s.buckets) > 1 for s in built_stages)
    per_gpu = _batch_knobs(knobs, effective_batch, launch, gpu_names, training_mode, multi_bucket, assumptions,
                           warnings)

    largest = max((b for s in stages for b in s), key=lambda b: b.tokens)
    validation_every = validation_interval or VALIDATION_INTERVAL
    checkpoint_every = checkpoint_interval or CHECKPOINT_INTERVAL
    if validation_interval is None:
        assumptions.append(f"validation every {validation_every} steps at {largest} (the largest training bucket)")
    if checkpoint_interval is None:
        assumptions.append(f"checkpoints every {checkpoint_every} steps")
    assumptions.append("checkpoints: keep all (keep_last_n -1: the "
                       "trainer's keep_last_n 1 deletes its own final weights when steps divide the interval)")
    assumptions.append("seed 42, W&B as the probe found it, outputs under the run folder")
    return Recipe(mode=mode.name, template=template, tier_name=tier.name, base=tier.base,
                  training_mode=training_mode, strategy=strategy, stages=tuple(built_stages), knobs=knobs,
                  rank=rank, alpha=rank, steps=steps, effective_batch=per_gpu * launch.total,
                  num_processes=launch.total, launch=launch.words(), validation_dims=str(largest),
                  checkpoint_interval=checkpoint_every, keep_last_n=-1,
                  validation_interval=validation_every, assumptions=tuple(assumptions),
                  warnings=tuple(warnings))


def _starting_knobs(anchor: dict[str, Any], tier: Tier, training_mode: str, assumptions: list[str]) -> dict[str, Any]:
    """The tier's base config's knobs (bar its rank), gradient checkpointing on and bf16; full: no quantization."""
    knobs: dict[str, Any] = {k: v for k, v in anchor.items() if k != "rank"}
    knobs.update(enable_gradient_checkpointing=True, mixed_precision_mode="bf16")
    if training_mode == "full":
        knobs.update(quantization=None, offload_optimizer_during_validation=True)
    assumptions.append(f"{tier.name}: starting from the {_base_words(tier.base)} knobs "
                       f"(optimizer {knobs['optimizer_type']}, quantization {knobs['quantization'] or 'none'}, "
                       "gradient checkpointing on, bf16); autotune measures alternatives")
    return knobs


def _full_fine_tune_notes(tier: Tier, gpu_count: int, assumptions: list[str], warnings: list[str]) -> None:
    assumptions.append("full fine-tune: quantization off (the trainer rejects it in full mode), the "
                       "transformer in fp32 (facts §6), optimizer offload during validation on")
    if gpu_count < 2 or tier.base != "standard":
        warnings.append("The trainer documents full fine-tuning as needing several 80GB+ GPUs with FSDP "
                        f"(training-modes.md); this machine has {gpu_count} GPU(s) on the {tier.name}. "
                        "Consider --training-mode lora.")


def _steps_and_rate(mode: Mode, training_mode: str, steps: int | None, learning_rate: float | None,
                    assumptions: list[str]) -> tuple[int, float]:
    """The optimizer steps and the base learning rate: as given, else the mode template's (said as assumed)."""
    if steps is None:
        steps = mode.steps
        assumptions.append(f"{steps} optimizer steps (the {mode.config} default)")
    base_lr = learning_rate if learning_rate is not None else mode.learning_rate
    if learning_rate is None and training_mode == "full":
        assumptions.append(f"learning rate {base_lr:g}, taken from {mode.config}, a LoRA template: no full "
                           "fine-tune template ships for this mode; pass --learning-rate to choose your own")
    elif learning_rate is None:
        assumptions.append(f"learning rate {base_lr:g} (the {mode.config} default)")
    return steps, base_lr


def _batch_knobs(knobs: dict[str, Any], effective_batch: int, launch: LaunchShape, gpu_names: tuple[str, ...],
                 training_mode: str, multi_bucket: bool, assumptions: list[str], warnings: list[str]) -> int:
    """Set batch size 1 and the accumulation that splits ``effective_batch`` over the launch; return the latter."""
    per_gpu, processes_note = _per_gpu_batch(effective_batch, launch.total, warnings)
    if len(set(gpu_names)) > 1:
        warnings.append("The GPUs are different models (" + ", ".join(sorted(set(gpu_names))) + "): "
                        f"{'DDP' if training_mode == 'lora' else 'FSDP'} runs every process in step, so each "
                        "step waits for the slowest card, and every process must fit the smallest card's memory "
                        "(the plan's tier is the smallest). Set CUDA_VISIBLE_DEVICES to train on identical cards.")
    knobs.update(batch_size=1, gradient_accumulation_steps=per_gpu)
    if processes_note:
        assumptions.append(processes_note)
    if multi_bucket:
        assumptions.append("batch_size 1: the trainer cannot batch clips of different bucket shapes")
    return per_gpu


def _stages(strategy: str, stages: list[tuple[Bucket, ...]], base_lr: float, lr_given: bool,
            assumptions: list[str]) -> list[Stage]:
    if strategy != "chain":
        buckets = stages[0]
        return [Stage(1, tuple(map(str, buckets)), tuple(b.tokens for b in buckets), base_lr, False)]
    default_rates = [lr for _, lr in CHAINED_DEFAULT]
    if not lr_given and len(stages) == len(default_rates):
        rates = default_rates
        assumptions.append("stage learning rates 1e-4, 5e-5, 2e-5 (seed 002's chain); rank and alpha fixed")
    else:
        # Same shape as the seed's decay (x0.5, then x0.4), extended by halving beyond three stages.
        factors = [1.0, 0.5, 0.2] + [0.2 * 0.5 ** k for k in range(1, max(0, len(stages) - 3) + 1)]
        rates = [base_lr * f for f in factors[: len(stages)]]
        assumptions.append("stage learning rates " + ", ".join(f"{r:g}" for r in rates)
                           + " (decaying per stage as in seed 002); rank and alpha fixed")
    return [Stage(i + 1, (str(s[0]),), (s[0].tokens,), rates[i], i > 0) for i, s in enumerate(stages)]


def _continuations(last: Stage, points: tuple[int, ...], total: int, assumptions: list[str]) -> list[Stage]:
    """One warm-started stage per continuation of a finished training (the chained-stage mechanism).

    Each starts from the previous stage's final weights with the trainer's step counter and
    scheduler at 0 (``checkpoints.no_resume``): a fresh schedule over its own steps, from the last
    planned stage's learning rate, at its buckets (so its latents are the same folder).
    """
    ends = [*points[1:], total]
    stages = [Stage(last.index + i + 1, last.buckets, last.tokens, last.learning_rate, True, steps=end - start,
                    start_step=start) for i, (start, end) in enumerate(zip(points, ends, strict=True))]
    for stage in stages:
        assumptions.append(f"continuation: steps {stage.start_step + 1}-{stage.start_step + (stage.steps or 0)} "
                           f"as stage {stage.index}, warm-started from the final weights of step {stage.start_step}"
                           f" with a fresh schedule over its {stage.steps} steps from learning rate "
                           f"{stage.learning_rate:g}")
    return stages


def total_steps(recipe: Recipe) -> int:
    """The step the training reaches at its end: its last stage's start plus that stage's steps."""
    last = recipe.stages[-1]
    return last.start_step + (last.steps or recipe.steps)


def _resume_lines(training_mode: str) -> list[str]:
    """What a resume keeps, as config_patch sets it up: a LoRA's full training state, a full fine-tune's minimal one."""
    if training_mode == "lora":
        return ["- Resume: a stage interrupted before its last step resumes from its newest checkpoint pair. Each "
                "checkpoint keeps the trainer's full state (`checkpoints.save_training_state: full`: optimizer, "
                "scheduler and random state; the trainer's docs put it at ~800 MB for a LoRA), so the learning rate "
                "goes on along the schedule that attempt started with (over the steps it was launched with, even if "
                "`--steps` changed since)."]
    return ["- Resume: a stage interrupted before its last step resumes from its newest checkpoint pair with the "
            "trainer's minimal state (its default: a full fine-tune's optimizer state is about twice the model): "
            "the step and the scheduler come back, the optimizer starts fresh at the configured learning rate, "
            "and the schedule decays from there, not from where it was."]


def schedule_lines(recipe: Recipe, target: str) -> list[str]:
    """The plan's words on the learning rate: each stage's fresh schedule, what a resume keeps, how to
    train further (``target``: the ``--workspace W --run R`` of the continue command)."""
    total = total_steps(recipe)
    lines = ["## Learning-rate schedule", "",
             "- Each stage's trainer builds its scheduler (the template's `optimization.scheduler_type`) over that "
             "stage's own steps, starting at the stage's learning rate."]
    for stage in recipe.stages:
        if stage.start_step:
            end = stage.start_step + (stage.steps or recipe.steps)
            lines.append(f"- Stage {stage.index} continues the finished training from step {stage.start_step} to "
                         f"{end}: warm-started from the final weights of step {stage.start_step}, with the trainer's "
                         "step counter and scheduler at 0 (`checkpoints.no_resume: true`), so its learning rate "
                         f"starts at {stage.learning_rate:g} and follows a fresh schedule over its {stage.steps} "
                         f"steps (its step k is step {stage.start_step}+k of the run).")
    return [*lines,
            *_resume_lines(recipe.training_mode),
            f"- Train further once finished: `ltx-pipeline run {target} --steps {2 * total}` (any total above "
            f"{total}) adds a stage warm-started from the final weights with a fresh schedule over the extra steps; "
            "autotune's sweep is not run again (the step count changes neither memory nor speed).", ""]


#: Request fields that say what a training's weights are: a request changing any of them along with its steps
#: is a new plan for the run (its stages train or resume as planned), not a continuation of those weights.
WEIGHTS_FIELDS = ("dataset", "mode", "training_mode", "strategy", "buckets", "rank", "model_path",
                  "text_encoder_path", "backend", "trigger", "audio")


def continue_points(previous: list[int], trained: int | None, steps: int | None, *, run: str,
                    where: str = "--steps") -> list[int]:
    """The request's ``continued_from`` once ``steps`` is asked of a run whose training reached ``trained``.

    ``steps`` is the run's total: above a finished training's total it continues that training (one more
    point, the total reached); equal, nothing changes; below, it is refused. ``trained`` None: the
    training has not finished (a stage still to train or resume), so nothing is continued.

    Raises:
        BadRequest: ``steps`` under the steps a finished training already trained.
    """
    if trained is None or steps is None:
        return list(previous)
    refuse_fewer(trained, steps, run=run, where=where)
    # Already recorded: continued, and the continuation not trained yet (approval pending, interrupted).
    return list(previous) if steps == trained or trained in previous else [*previous, trained]


def refuse_fewer(trained: int | None, steps: int | None, *, run: str, where: str = "--steps") -> None:
    """Refuse steps under a finished training's total (which would train nothing, or start over).

    Raises:
        BadRequest: ``steps`` below ``trained``.
    """
    if trained is not None and steps is not None and steps < trained:
        raise BadRequest(f"Run {run} has trained {trained} steps; steps {steps} would be fewer", where=where,
                         fix=f"pass --steps above {trained} to continue it from its final weights, or a new --run "
                             f"to train {steps} steps from the start")


def planned_stages(stages: list[dict[str, Any]]) -> int:
    """How many stages of a recipe (``Recipe.to_dict()["stages"]``) the plan made, continuations left out."""
    return sum(1 for stage in stages if not stage.get("start_step"))


def _per_gpu_batch(effective: int, gpus: int, warnings: list[str]) -> tuple[int, str | None]:
    """Gradient accumulation per GPU so batch x accumulation x GPUs equals the planned effective batch."""
    gpus = max(gpus, 1)
    if effective % gpus == 0:
        per_gpu = effective // gpus
        note = (f"effective batch {effective} = batch 1 x accumulation {per_gpu} x {gpus} processes"
                if gpus > 1 else None)
        return per_gpu, note
    per_gpu = max(1, round(effective / gpus))
    warnings.append(f"Effective batch {effective} cannot be split evenly over {gpus} processes; the plan uses "
                    f"{per_gpu * gpus} (batch 1 x accumulation {per_gpu} x {gpus} processes). "
                    f"Pass --effective-batch {per_gpu * gpus} to accept, or choose a multiple of {gpus}.")
    return per_gpu, None


def _base_words(base: str) -> str:
    return "low-VRAM" if base == "low_vram" else "standard"
