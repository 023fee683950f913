"""The fixes for a GPU out-of-memory: config steps that each make the figure they name cheaper.

Invariant: a step that sets a config value moves it strictly in the cheaper direction from the value the
run used (the config's, else the trainer's default), and stays valid for the trainer (video dims on its
grid: width and height multiples of 32, frames 8k+1). Where nothing cheaper is valid, no change is proposed:
for the validation render size and its denoising steps an advice step says so instead. A switch already on
is simply left out. ``gradient_accumulation_steps`` is the one step that rises: it keeps the effective batch
when the per-step batch falls, and costs no memory. Pure standard library (the grid from ``ltx.buckets``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from ltx_pipeline.ltx.buckets import TEMPORAL_FACTOR, cheaper_dims
from ltx_pipeline.ltx.config_values import config_value, lax_int
from ltx_pipeline.trainer_log._kinds import FixStep

__all__ = ["TRAINER_DEFAULTS", "caching_prompts", "cheaper_dims", "prompt_caching_oom_fix", "training_oom_fix",
           "validation_oom_fix"]

# ltx-trainer's config defaults (config.py) for the values an OOM fix moves: an absent key runs with these.
TRAINER_DEFAULTS: dict[str, Any] = {
    "optimization.batch_size": 2,
    "optimization.gradient_accumulation_steps": 1,
    "optimization.enable_gradient_checkpointing": False,
    "optimization.optimizer_type": "adamw",
    "acceleration.quantization": None,
    "acceleration.load_text_encoder_in_8bit": False,
    "acceleration.offload_optimizer_during_validation": False,
    "validation.video_dims": (960, 544, 89),
    "validation.inference_steps": 30,
    "validation.interval": 100,
    "model.training_mode": "lora",
}
# A validation render keeps at least one latent frame after the first (9 frames) and one latent pixel (32).
_MIN_FRAMES = TEMPORAL_FACTOR + 1
_MIN_STEPS = 5  # fewer denoising steps than this give samples too rough to judge the training by
_EIGHT_BIT = ("int8-quanto", "fp8-quanto", "fp8uz-quanto")


def _value(config: Mapping[str, Any] | None, path: str) -> Any:
    return config_value(config, path, TRAINER_DEFAULTS[path])


def _int(config: Mapping[str, Any] | None, path: str) -> int | None:
    value = _value(config, path)
    return None if value is None else lax_int(value)


def _on(config: Mapping[str, Any] | None, path: str) -> bool:
    return _value(config, path) is True


# -- the figures ---------------------------------------------------------------------------------------


def _dims_step(config: Mapping[str, Any] | None, why: str) -> FixStep:
    dims = _value(config, "validation.video_dims")
    smaller = cheaper_dims(dims)
    if smaller is None and not (isinstance(dims, (list, tuple)) and len(dims) == 3):
        return FixStep(None, None, f"validation.video_dims ({dims!r}) is not [width, height, frames]: set a small "
                       "render size on the trainer's grid (width and height multiples of 32, frames 8k+1).")
    if smaller is None:
        return FixStep(None, None, f"validation.video_dims ({_dims_text(dims)}) is already the smallest render the "
                       "trainer accepts (width and height multiples of 32, frames 8k+1): no smaller one to propose.")
    width, height, frames = (int(v) for v in dims)
    return FixStep("validation.video_dims", smaller, f"{why}: {smaller[0]}x{smaller[1]}x{smaller[2]} is "
                   f"{smaller[0] * smaller[1] * smaller[2]:,} pixel-frames per sample, down from "
                   f"{width * height * frames:,}")


def _dims_text(dims: Any) -> str:
    return "x".join(str(v) for v in dims) if isinstance(dims, (list, tuple)) else repr(dims)


def _inference_steps_step(config: Mapping[str, Any] | None) -> FixStep | None:
    steps = _int(config, "validation.inference_steps")
    if steps is None:
        return None
    fewer = max(min(_MIN_STEPS, steps - 1), steps // 2)
    if fewer < 1:
        return FixStep(None, None, f"validation.inference_steps is already {steps}: no fewer denoising steps "
                       "to propose.")
    return FixStep("validation.inference_steps", fewer, f"fewer denoising steps per sample ({steps} -> {fewer})")


def _interval_step(config: Mapping[str, Any] | None) -> FixStep | None:
    interval = _int(config, "validation.interval")
    if not interval or interval < 1:
        return None  # validation off (null): no periodic pass to space out
    return FixStep("validation.interval", interval * 2, f"half as many validation passes (every {interval * 2} "
                   f"steps, not {interval})")


def _quantization_step(config: Mapping[str, Any] | None) -> FixStep | None:
    if _value(config, "model.training_mode") != "lora":
        return None  # the trainer quantizes only the frozen base of a LoRA run
    current = _value(config, "acceleration.quantization")
    if current is None:
        return FixStep("acceleration.quantization", "int8-quanto", "int8 base weights halve the model's memory")
    if current in _EIGHT_BIT:
        return FixStep("acceleration.quantization", "int4-quanto", f"int4 base weights take half of {current}'s "
                       "memory, at some cost in quality")
    return None


def _switch(config: Mapping[str, Any] | None, path: str, reason: str) -> list[FixStep]:
    return [] if _on(config, path) else [FixStep(path, True, reason)]


# -- the fixes -----------------------------------------------------------------------------------------


def training_oom_fix(config: Mapping[str, Any] | None, *, loading: bool = False) -> list[FixStep]:
    """Cheaper per-step memory first, then smaller weights, data and validation renders."""
    batch = _int(config, "optimization.batch_size") or 1
    accumulation = _int(config, "optimization.gradient_accumulation_steps") or 1
    steps: list[FixStep] = []
    if batch > 1:
        steps += [
            FixStep("optimization.batch_size", 1, f"batch 1 is the cheapest per-step memory (was {batch}); raise "
                    "gradient_accumulation_steps to keep the effective batch"),
            FixStep("optimization.gradient_accumulation_steps", batch * accumulation,
                    f"keeps the effective batch at {batch * accumulation} with batch 1"),
        ]
    steps += _switch(config, "optimization.enable_gradient_checkpointing", "trades recompute for activation memory")
    if _value(config, "optimization.optimizer_type") == "adamw":
        steps.append(FixStep("optimization.optimizer_type", "adamw8bit",
                             "8-bit optimizer states take a quarter of the memory"))
    if quantization := _quantization_step(config):
        steps.append(quantization)
    steps += [
        FixStep(None, None, "Fewer frames: re-preprocess the dataset with a shorter frame bucket (8k+1 frames); "
                "this is not a config.yaml change."),
        FixStep(None, None, "Lower resolution: re-preprocess with smaller resolution buckets (multiples of 32); "
                "this is not a config.yaml change."),
        _dims_step(config, "cheaper validation passes leave more headroom"),
    ]
    if loading:
        # Out of memory before any step: the weights themselves do not fit, so smaller weights come first.
        steps.sort(key=lambda step: step.path != "acceleration.quantization")
    return steps


def prompt_caching_oom_fix(config: Mapping[str, Any] | None) -> list[FixStep]:
    """The text encoder caching the validation prompts ran out of memory: only its own size matters."""
    # ValidationRunner caches the prompts in the trainer's constructor (trainer.py __init__), before the
    # transformer or the optimizer exist and one prompt at a time.
    others = ("check `nvidia-smi` for other processes holding its memory (another training, a notebook), and "
              "that each rank has its own GPU.")
    if _on(config, "acceleration.load_text_encoder_in_8bit"):
        return [FixStep(None, None, "The 8-bit text encoder is already on and nothing else of the run is on the "
                        "GPU yet: " + others)]
    return [
        FixStep("acceleration.load_text_encoder_in_8bit", True,
                "the OOM came while the full-precision Gemma cached the validation prompts, before the "
                "transformer or the optimizer were loaded"),
        FixStep(None, None, "Nothing else of the run is on the GPU yet: " + others),
    ]


def validation_oom_fix(config: Mapping[str, Any] | None, *, text_encoder: bool,
                       offloaded: bool = False) -> list[FixStep]:
    """Sampling (or preparing it) ran out of memory: lighter encoders, offloading, smaller and fewer renders."""
    steps: list[FixStep] = []
    if text_encoder:
        steps += _switch(config, "acceleration.load_text_encoder_in_8bit",
                         "the OOM came while caching validation prompts with the full-precision Gemma")
    if not offloaded:  # the trainer logs the offload line only when it is on: never offer it again
        steps += _switch(config, "acceleration.offload_optimizer_during_validation",
                         "moves optimizer state to CPU while sampling (no effect under FSDP)")
    steps.append(_dims_step(config, "smaller validation videos need less memory"))
    steps += [step for step in (_inference_steps_step(config), _interval_step(config)) if step]
    return steps


_PROMPT_CACHING = re.compile(r"Loading text encoder for validation|Loading embeddings processor for validation|"
                             r"Pre-computing embeddings for \d+ validation prompts")
_MEDIA_ENCODING = re.compile(r"Pre-encoding conditioning media|VAE encoder for validation media encoding")


def caching_prompts(lines: list[str]) -> bool:
    """Whether the last validation-preparation line logged is the text encoder's (not the media VAE's)."""
    for line in reversed(lines):
        if _MEDIA_ENCODING.search(line):
            return False
        if _PROMPT_CACHING.search(line):
            return True
    return False
