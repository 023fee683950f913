"""Optimizers and LR schedulers, as the trainer builds them.

Owns two knobs' real effects (facts §1.6, §1.15, §7):
- ``optimizer_type``: ``torch.optim.AdamW`` or bitsandbytes' ``AdamW8bit``, whose two moment
  states are stored as uint8 blocks (with per-block absmax). bitsandbytes keeps fp32 states for
  tensors under ``min_8bit_size`` (4096 by default, sized for LTX-2's layers); the toy's layers
  are ~100x smaller, so that threshold is scaled down to 256 here.
- ``scheduler_type``/``scheduler_params``: the trainer's torch scheduler table, defaults popped
  first and the rest passed through; ``constant`` means no scheduler.
"""

from __future__ import annotations

from collections.abc import Iterable

import torch
from torch import nn

__all__ = ["build_optimizer", "build_scheduler"]

MIN_8BIT_SIZE = 256


def build_optimizer(kind: str, params: Iterable[nn.Parameter], lr: float) -> torch.optim.Optimizer:
    """``adamw`` (torch) or ``adamw8bit`` (bitsandbytes, 8-bit states) with library defaults."""
    params = list(params)
    if kind == "adamw8bit":
        import bitsandbytes as bnb

        return bnb.optim.AdamW8bit(params, lr=lr, min_8bit_size=MIN_8BIT_SIZE)
    # One fused kernel per step where torch has it (CPU and CUDA); the maths is AdamW's either way.
    fused = all(p.device.type in ("cpu", "cuda") and p.dtype in (torch.float32, torch.bfloat16) for p in params)
    return torch.optim.AdamW(params, lr=lr, fused=fused or None)


def build_scheduler(kind: str, params: dict, optimizer: torch.optim.Optimizer, steps: int,
                    ) -> torch.optim.lr_scheduler.LRScheduler | None:
    """The trainer's scheduler for ``kind``; ``params`` is copied, not mutated."""
    extra = dict(params)
    sched = torch.optim.lr_scheduler
    if kind == "constant":
        return None
    if kind == "linear":
        return sched.LinearLR(optimizer, start_factor=extra.pop("start_factor", 1.0),
                              end_factor=extra.pop("end_factor", 0.1), total_iters=steps, **extra)
    if kind == "cosine":
        return sched.CosineAnnealingLR(optimizer, T_max=steps, eta_min=extra.pop("eta_min", 0), **extra)
    if kind == "cosine_with_restarts":
        return sched.CosineAnnealingWarmRestarts(
            optimizer, T_0=extra.pop("T_0", max(1, steps // 4)), T_mult=extra.pop("T_mult", 1),
            eta_min=extra.pop("eta_min", 5e-5), **extra)
    if kind == "polynomial":
        return sched.PolynomialLR(optimizer, total_iters=steps, power=extra.pop("power", 1.0), **extra)
    if kind == "step":
        return sched.StepLR(optimizer, step_size=extra.pop("step_size", max(1, steps // 2)),
                            gamma=extra.pop("gamma", 0.1), **extra)
    raise ValueError(f"Unknown scheduler_type: {kind}")
