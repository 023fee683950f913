"""Weight-only quantization of the frozen base: ``int8|int4|int2|fp8|fp8uz-quanto``.

Owns ``QuantizedLinear``, a drop-in ``nn.Linear`` whose weight is really stored in the target
format (int8; int4 and int2 packed 2 and 4 per byte; float8 e4m3fn / e4m3fnuz) with one scale per
output row, and ``quantize_frozen``, which swaps the frozen model's linear layers for it, skipping
the modules ltx-trainer's quanto pass skips (projections in/out, caption projections, adaln, norms).

Why not optimum-quanto itself: with optimum-quanto 0.2.7 on CPU (torch 2.13) an int8-quantized
toy model trained with LoRA measured a HIGHER live-memory peak than the bf16 one (3.85 -> 4.39 MB),
the opposite of the real trainer on GPU, where int8 roughly halves model memory. Here the
dequantized weight exists only transiently, inside one layer's forward or backward, so the knob
moves memory the way it does on the real trainer. PEFT wraps these layers like any ``nn.Linear``.
"""

from __future__ import annotations

from fnmatch import fnmatch

import torch
import torch.nn.functional as F
from torch import nn

__all__ = ["QuantizedLinear", "quantize_frozen"]

_SKIP = ["patchify_proj*", "audio_patchify_proj*", "proj_out*", "audio_proj_out*", "*adaln*", "time_proj*",
         "timestep_embedder*", "caption_projection*", "audio_caption_projection*", "*norm*"]
_LEVELS = {"int8": 127, "int4": 7, "int2": 1}
_FP8 = {"fp8": torch.float8_e4m3fn, "fp8uz": torch.float8_e4m3fnuz}


def _pack(values: torch.Tensor, bits: int) -> torch.Tensor:
    per_byte = 8 // bits
    offset = 1 << (bits - 1)
    unsigned = (values + offset).to(torch.uint8).view(values.shape[0], -1, per_byte)
    packed = torch.zeros(unsigned.shape[:2], dtype=torch.uint8)
    for slot in range(per_byte):
        packed |= unsigned[..., slot] << (slot * bits)
    return packed


def _unpack(packed: torch.Tensor, bits: int, columns: int) -> torch.Tensor:
    per_byte = 8 // bits
    mask = (1 << bits) - 1
    slots = [(packed >> (slot * bits)) & mask for slot in range(per_byte)]
    values = torch.stack(slots, dim=-1).view(packed.shape[0], -1)[:, :columns]
    return values.to(torch.int16) - (1 << (bits - 1))


class _DequantLinear(torch.autograd.Function):
    """y = x W^T + b with W rebuilt on the fly; only the quantized W is kept for backward."""

    @staticmethod
    def forward(ctx, x, layer, bias):  # noqa: ANN001, ANN205
        ctx.layer = layer
        return F.linear(x, layer.dequantize(x.dtype), bias)

    @staticmethod
    def backward(ctx, grad):  # noqa: ANN001, ANN205
        return grad @ ctx.layer.dequantize(grad.dtype), None, None


class QuantizedLinear(nn.Linear):
    """A frozen linear layer whose weight is stored quantized (buffers, not parameters)."""

    def __init__(self, linear: nn.Linear, kind: str) -> None:
        nn.Module.__init__(self)
        self.in_features, self.out_features, self.kind = linear.in_features, linear.out_features, kind
        weight = linear.weight.detach().float().cpu()
        absmax = weight.abs().amax(dim=1).clamp_min(1e-8)
        if kind in _FP8:
            scale = absmax / torch.finfo(_FP8[kind]).max
            stored = (weight / scale[:, None]).to(_FP8[kind])
        else:
            scale = absmax / _LEVELS[kind]
            values = (weight / scale[:, None]).round().clamp(-_LEVELS[kind] - 1, _LEVELS[kind])
            bits = {"int8": 8, "int4": 4, "int2": 2}[kind]
            stored = values.to(torch.int8) if bits == 8 else _pack(values.to(torch.int8), bits)
        self.register_buffer("weight", stored.to(linear.weight.device))
        self.register_buffer("weight_scale", scale.to(linear.weight.dtype).to(linear.weight.device))
        bias = None if linear.bias is None else linear.bias.detach()
        self.register_buffer("bias", bias)

    def dequantize(self, dtype: torch.dtype) -> torch.Tensor:
        """The full-precision weight, built transiently in ``dtype``."""
        if self.kind in ("int4", "int2"):
            values = _unpack(self.weight, 4 if self.kind == "int4" else 2, self.in_features)
        else:
            values = self.weight
        return values.to(dtype) * self.weight_scale.to(dtype)[:, None]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if torch.is_autocast_enabled(x.device.type):
            x = x.to(torch.get_autocast_dtype(x.device.type))
        bias = None if self.bias is None else self.bias.to(x.dtype)
        with torch.autocast(x.device.type, enabled=False):
            return _DequantLinear.apply(x, self, bias)

    def extra_repr(self) -> str:
        return f"in_features={self.in_features}, out_features={self.out_features}, quantization={self.kind}"


def quantize_frozen(model: nn.Module, precision: str) -> int:
    """Replace the frozen model's eligible ``nn.Linear`` layers in place; returns how many."""
    kind = precision.removesuffix("-quanto")
    if kind not in _LEVELS and kind not in _FP8:
        raise ValueError(f"Unknown quantization: {precision}")
    targets = [(name, module) for name, module in model.named_modules()
               if type(module) is nn.Linear and not any(fnmatch(name, pattern) for pattern in _SKIP)]
    for name, module in targets:
        parent_name, _, child = name.rpartition(".")
        parent = model.get_submodule(parent_name) if parent_name else model
        setattr(parent, child, QuantizedLinear(module, kind))
    return len(targets)
