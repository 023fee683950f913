"""The autotune search space: which knob combinations a sweep may try, and how their memory compares.

Owns the per-tier space of issue 5 (seed 000's tiers) and the partial order "uses no more memory
than" that the sweep planner prunes with. Pure Python: no trainer, no Optuna.

Knob values are spelled as the trainer spells them: ``quantization`` (``None`` or a ``*-quanto``
scheme), ``optimizer_type`` (``adamw8bit`` or ``adamw``), ``batch_size`` and
``enable_gradient_checkpointing``; ``gradient_accumulation_steps`` is derived so that
``batch_size x gradient_accumulation_steps`` stays the plan's per-GPU effective batch.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from typing import Any

__all__ = ["KNOB_KEYS", "SPACE_KEYS", "Knobs", "batch_candidates", "batch_steps", "distance", "knob_steps",
           "needs_no_more_memory", "normalize", "search_space"]

Knobs = dict[str, Any]

# The four knobs the sweep varies (the cost surface's KNOB_NAMES) and the derived accumulation.
KNOB_KEYS = ("quantization", "optimizer_type", "batch_size", "enable_gradient_checkpointing")
SPACE_KEYS = (*KNOB_KEYS, "gradient_accumulation_steps")
_QUANTIZATIONS = ("int8-quanto", None)
_OPTIMIZERS = ("adamw8bit", "adamw")
_OPTIMIZER_RANK = {"adamw8bit": 0, "adamw": 1}  # 8-bit states take a quarter of fp32 AdamW's


def normalize(knobs: Knobs, per_gpu_effective_batch: int) -> Knobs:
    """The space's view of a knob dict (for example the recipe's): the five space keys only.

    ``gradient_accumulation_steps`` is kept when given (the plan's value wins), otherwise derived as
    ``per_gpu_effective_batch // batch_size``.

    Raises:
        ValueError: a knob is missing or the effective batch is below 1.
    """
    if per_gpu_effective_batch < 1:
        raise ValueError(f"per-GPU effective batch must be at least 1, got {per_gpu_effective_batch}")
    missing = [k for k in KNOB_KEYS if k not in knobs]
    if missing:
        raise ValueError(f"knobs lack {', '.join(missing)}: {knobs}")
    out = {k: knobs[k] for k in KNOB_KEYS}
    out["gradient_accumulation_steps"] = knobs.get("gradient_accumulation_steps",
                                                   max(1, per_gpu_effective_batch // int(knobs["batch_size"])))
    return out


def batch_candidates(per_gpu_effective_batch: int, *, multi_bucket: bool, max_batch: int | None = None) -> list[int]:
    """The batch sizes a run can use: divisors of the per-GPU effective batch E the data can fill.

    A batch b must divide E (accumulation E / b keeps the effective batch), be 1 for a multi-bucket
    plan (the trainer cannot batch different shapes), and be at most ``max_batch``, the batch the
    dataset can feed every process (samples // processes: with ``drop_last`` a larger batch gives
    every epoch zero batches). Batch 1 is always a candidate: it is the baseline's.
    """
    if multi_bucket:
        return [1]
    limit = per_gpu_effective_batch if max_batch is None else max(1, min(max_batch, per_gpu_effective_batch))
    return [b for b in range(1, limit + 1) if per_gpu_effective_batch % b == 0]


def search_space(base: str, per_gpu_effective_batch: int, multi_bucket: bool, baseline: Knobs,
                 max_batch: int | None = None) -> list[Knobs]:
    """Every configuration the sweep may try, the baseline first.

    Tiers (issue 5, seed 000): base ``low_vram`` (32GB and 40–60GB tiers) varies quantization
    {int8-quanto, None}, optimizer {adamw8bit, adamw} and batch size, checkpointing staying as the
    baseline has it (on); base ``standard`` (80GB+) varies checkpointing {on, off} and batch size,
    quantization and optimizer staying the baseline's. Batch sizes are ``batch_candidates``: the
    divisors of the per-GPU effective batch E that the dataset can fill (so the recipe's effective
    batch never changes and no trial or launch has zero batches).

    The rest is ordered by distance from the baseline (fewest changed knobs first), which is the
    tie-break order the planner uses.

    Args:
        base: ``"low_vram"`` or ``"standard"`` (the tier's base config).
        per_gpu_effective_batch: E = batch_size x gradient_accumulation_steps per GPU in the plan.
        multi_bucket: whether any stage trains on more than one resolution bucket.
        baseline: the recipe's knobs (extra keys are ignored).
        max_batch: the largest batch the dataset can feed each training process (None: no limit known).

    Raises:
        ValueError: unknown base, E below 1 or a baseline without the four knobs.
    """
    start = normalize(baseline, per_gpu_effective_batch)
    batches = batch_candidates(per_gpu_effective_batch, multi_bucket=multi_bucket, max_batch=max_batch)
    axes: tuple[Sequence[Any], ...]
    if base == "low_vram":
        axes = (_QUANTIZATIONS, _OPTIMIZERS, batches, (start["enable_gradient_checkpointing"],))
    elif base == "standard":
        axes = ((start["quantization"],), (start["optimizer_type"],), batches, (True, False))
    else:
        raise ValueError(f"unknown base config {base!r}; expected 'low_vram' or 'standard'")
    others = []
    for values in itertools.product(*axes):
        knobs = dict(zip(KNOB_KEYS, values, strict=True))
        knobs["gradient_accumulation_steps"] = per_gpu_effective_batch // knobs["batch_size"]
        if knobs != start:
            others.append(knobs)
    others.sort(key=lambda k: distance(k, start))  # stable: product order within one distance
    return [start, *others]


def needs_no_more_memory(a: Knobs, b: Knobs) -> bool:
    """Whether configuration ``a`` uses at most the memory of ``b`` on every knob.

    The partial order of issue 5: quantized <= unquantized, adamw8bit <= adamw, checkpointing on <=
    off, smaller batch <= larger. Two different quantization schemes are not compared (neither is
    known to need less). Accumulation does not enter: it changes time, not peak memory.
    """
    qa, qb = a["quantization"], b["quantization"]
    if not (qa == qb or qb is None):
        return False
    if _OPTIMIZER_RANK.get(a["optimizer_type"], -1) > _OPTIMIZER_RANK.get(b["optimizer_type"], -1):
        return False
    if a["optimizer_type"] not in _OPTIMIZER_RANK and a["optimizer_type"] != b["optimizer_type"]:
        return False
    if a["enable_gradient_checkpointing"] is False and b["enable_gradient_checkpointing"] is True:
        return False
    return int(a["batch_size"]) <= int(b["batch_size"])


def distance(a: Knobs, baseline: Knobs) -> int:
    """Number of the four knobs on which ``a`` differs from ``baseline``."""
    return sum(1 for k in KNOB_KEYS if a.get(k) != baseline.get(k))


def batch_steps(low: int, high: int) -> float:
    """Doublings from batch ``low`` to ``high`` (1 -> 4 is two steps up, 4 -> 2 one step down)."""
    return math.log2(int(high) / int(low))


def knob_steps(a: Knobs, b: Knobs) -> dict[str, float]:
    """Signed steps up the memory order from ``a`` to ``b``, per knob (positive: ``b`` needs more).

    Quantization off, adamw and checkpointing off are one step each; batch counts doublings.
    """
    return {
        "quantization": float((a["quantization"] is not None) - (b["quantization"] is not None)),
        "optimizer_type": float(_OPTIMIZER_RANK.get(b["optimizer_type"], 0)
                                - _OPTIMIZER_RANK.get(a["optimizer_type"], 0)),
        "batch_size": batch_steps(a["batch_size"], b["batch_size"]),
        "enable_gradient_checkpointing": float(bool(a["enable_gradient_checkpointing"])
                                               - bool(b["enable_gradient_checkpointing"])),
    }
