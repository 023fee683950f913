"""The toy's own LoRA layers: what PEFT's ``get_peft_model`` does to it, without importing PEFT.

``import peft`` pulls in transformers and bitsandbytes: a 3-step toy run took 7.9 s of CPU with it
and 4.2 s without (measured for #35), and the tests start many such runs. The toy needs one adapter
on plain ``nn.Linear`` layers only, so this module reproduces PEFT's default LoRA
(``init_lora_weights=True``, ``bias="none"``, one adapter) for it; tests/reference_trainer/test_lora.py
checks it against PEFT itself when PEFT is installed:

- targets: a module whose name equals a ``target_modules`` entry or ends with ``.`` + entry, visited
  in ``named_modules()`` order; a match that is not an ``nn.Linear`` (quantized layers subclass it)
  or no match at all is an error, as in PEFT;
- layer: ``base_layer`` (frozen), ``lora_dropout`` (``Dropout(p)``, ``Identity`` at p=0),
  ``lora_A`` (in -> r) and ``lora_B`` (r -> out), bias-free ``nn.Linear`` created in that order, so
  the RNG draws, the parameter order (which an optimizer state follows) and the memory footprint
  are PEFT's; A is kaiming-uniform(a=sqrt(5)), B zeros; output ``base(x) + B(A(dropout(x))) * alpha/r``
  with ``x`` cast to the adapter's dtype and the sum cast back to the base output's dtype;
- dtype: the adapter is cast to the base weight's floating dtype and then up to float32 (PEFT's
  ``autocast_adapter_dtype``), so its starting values carry the same rounding;
- state dict: ``<module>.lora_A.weight`` / ``<module>.lora_B.weight``, the keys PEFT's
  ``get_peft_model_state_dict`` gives once ``base_model.model.`` is stripped.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping

import torch
from torch import nn

__all__ = ["LoraLinear", "add_lora", "load_lora_state_dict", "lora_state_dict"]


class LoraLinear(nn.Module):
    """A frozen ``nn.Linear`` plus a trainable low-rank update (PEFT's ``lora.Linear``, one adapter)."""

    def __init__(self, base_layer: nn.Linear, rank: int, alpha: float, dropout: float) -> None:
        super().__init__()
        self.base_layer = base_layer
        self.in_features, self.out_features = base_layer.in_features, base_layer.out_features
        self.lora_dropout: nn.Module = nn.Dropout(p=dropout) if dropout > 0.0 else nn.Identity()
        self.lora_A = nn.Linear(self.in_features, rank, bias=False)
        self.lora_B = nn.Linear(rank, self.out_features, bias=False)
        self.scaling = alpha / rank
        nn.init.kaiming_uniform_(self.lora_A.weight, a=math.sqrt(5))
        nn.init.zeros_(self.lora_B.weight)
        weight = base_layer.weight
        for adapter in (self.lora_A, self.lora_B):
            if weight.dtype.is_floating_point:
                adapter.to(weight.device, dtype=weight.dtype)
            adapter.to(weight.device, dtype=torch.float32)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        result = self.base_layer(x)
        lora_input = x.to(self.lora_A.weight.dtype)
        update = self.lora_B(self.lora_A(self.lora_dropout(lora_input))) * self.scaling
        return (result + update).to(result.dtype)

    def extra_repr(self) -> str:
        return f"rank={self.lora_A.out_features}, scaling={self.scaling}"


def _targeted(name: str, targets: Iterable[str]) -> bool:
    return any(name == target or name.endswith(f".{target}") for target in targets)


def add_lora(model: nn.Module, rank: int, alpha: float, dropout: float, target_modules: Iterable[str]) -> nn.Module:
    """Wrap every targeted linear layer of ``model`` in place, freeze the rest; returns ``model``.

    Raises:
        ValueError: a targeted module is not a linear layer, or no module matches ``target_modules``.
    """
    targets = list(target_modules)
    model.requires_grad_(False)
    found = [(name, module) for name, module in model.named_modules() if name and _targeted(name, targets)]
    if not found:
        raise ValueError(f"Target modules {sorted(set(targets))} not found in the base model. "
                         "Please check the target modules and try again.")
    for name, module in found:
        if not isinstance(module, nn.Linear):
            raise ValueError(f"Target module {name} ({type(module).__name__}) is not supported: "
                             "LoRA targets must be linear layers.")
        parent_name, _, child = name.rpartition(".")
        parent = model.get_submodule(parent_name) if parent_name else model
        setattr(parent, child, LoraLinear(module, rank, alpha, dropout))
    return model


def lora_state_dict(model: nn.Module) -> dict[str, torch.Tensor]:
    """The adapter weights, keyed ``<module>.lora_A.weight`` / ``<module>.lora_B.weight``."""
    return {name: tensor for name, tensor in model.state_dict().items() if ".lora_A." in name or ".lora_B." in name}


def load_lora_state_dict(model: nn.Module, state: Mapping[str, torch.Tensor]) -> list[str]:
    """Copy ``state`` into ``model`` (non-strict, as PEFT's ``set_peft_model_state_dict``); returns
    the keys the model has no place for. A shape mismatch raises ``RuntimeError``."""
    return list(model.load_state_dict(dict(state), strict=False).unexpected_keys)
