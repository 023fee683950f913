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

from ltx_pipeline.ltx.buckets import CHAINED_DEFAULT, Bucket
from ltx_pipeline.ltx.launch_plan import LaunchShape
from ltx_pipeline.ltx.modes import LOW_VRAM_T2V_CONFIG, Mode
from ltx_pipeline.ltx.tiers import Tier

__all__ = ["Recipe", "Stage", "build_recipe"]

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
                 gpu_names: tuple[str, ...] = ()) -> Recipe:
    """Derive the recipe; see the module docstring for the rules applied.

    ``gpu_count`` is the hardware (for the full fine-tune and mixed-GPU warnings); ``launch`` is the
    launch that will be made (``ltx.launch_plan``): the effective batch is split over its processes.
    """
    assumptions: list[str] = []
    warnings: list[str] = []
    anchor = _LOW_VRAM if tier.base == "low_vram" else _STANDARD
    template = LOW_VRAM_T2V_CONFIG if mode.name == "t2v" and tier.base == "low_vram" else mode.config
    knobs: dict[str, Any] = {k: v for k, v in anchor.items() if k != "rank"}
    knobs.update(enable_gradient_checkpointing=True, mixed_precision_mode="bf16")
    if training_mode == "full":
        knobs.update(quantization=None, offload_optimizer_during_validation=True)
    assumptions.append(f"{tier.name}: starting from the {_base_words(tier.base)} knobs "
                       f"(optimizer {knobs['optimizer_type']}, quantization {knobs['quantization'] or 'none'}, "
                       "gradient checkpointing on, bf16); autotune measures alternatives")
    if rank is None:
        rank = anchor["rank"]
        if training_mode == "lora":
            assumptions.append(f"LoRA rank {rank} (the {_base_words(tier.base)} config's); alpha = rank")
    if training_mode == "full":
        assumptions.append("full fine-tune: quantization off (the trainer rejects it in full mode), the "
                           "transformer in fp32 (facts §6), optimizer offload during validation on")
        if gpu_count < 2 or tier.base != "standard":
            warnings.append("The trainer documents full fine-tuning as needing several 80GB+ GPUs with FSDP "
                            f"(training-modes.md); this machine has {gpu_count} GPU(s) on the {tier.name}. "
                            "Consider --training-mode lora.")
    if steps is None:
        steps = mode.steps
        assumptions.append(f"{steps} optimizer steps (the {mode.config} default)")
    base_lr = learning_rate if learning_rate is not None else mode.learning_rate
    if learning_rate is None and training_mode == "full":
        assumptions.append(f"learning rate {base_lr:g}, taken from {mode.config}, a LoRA template: no full "
                           "fine-tune template ships for this mode; pass --learning-rate to choose your own")
    elif learning_rate is None:
        assumptions.append(f"learning rate {base_lr:g} (the {mode.config} default)")

    built_stages = _stages(strategy, stages, base_lr, learning_rate is not None, assumptions)
    if not buckets_given:
        assumptions.append("resolution buckets " + "; ".join("+".join(s.buckets) for s in built_stages)
                           + f" (the {strategy} default)")
    multi_bucket = any(len(s.buckets) > 1 for s in built_stages)

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
