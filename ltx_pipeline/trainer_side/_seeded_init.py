"""Deterministic module construction: every part is built on the CPU with seeded, fully initialised weights.

The same ``--seed`` must give byte-identical files, so nothing may keep allocator garbage (``torch.empty``)
or stay on the meta device; this module owns ``build_module`` and the helpers that guarantee it.

Part of ``build_tiny_model.py``, a standalone script run with the *trainer's* interpreter: like it, this module
imports nothing from ltx_pipeline, only the standard library here and the trainer's own packages (torch,
ltx-core, transformers) lazily inside functions. The script's folder is ``sys.path[0]``, so it imports this
module as a sibling; the folder is deliberately not a package.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch


@contextlib.contextmanager
def nan_filled_empty_tensors() -> Iterator[None]:
    """Make ``torch.empty`` return NaNs while modules are constructed.

    Some parameters (e.g. the transformer's scale-shift tables) are created with ``torch.empty`` and only
    ever filled by a checkpoint; left as is they would hold allocator garbage and break reproducibility.
    In deterministic mode torch fills such memory with NaN, which ``initialise_unset`` then finds.
    """
    import torch

    previous = torch.are_deterministic_algorithms_enabled()
    torch.use_deterministic_algorithms(True)
    try:
        yield
    finally:
        torch.use_deterministic_algorithms(previous)


def materialise_meta(module: torch.nn.Module) -> None:
    """Give real storage to submodules a configurator built on the meta device, and re-initialise them.

    LTXModelConfigurator builds the V1 caption projections under ``torch.device("meta")`` (the loader
    fills them from the checkpoint), so building on the CPU still yields meta tensors there.
    """
    for submodule in module.modules():
        own = [*submodule.parameters(recurse=False), *submodule.buffers(recurse=False)]
        if any(tensor.is_meta for tensor in own):
            submodule.to_empty(device="cpu", recurse=False)  # NaN-filled under nan_filled_empty_tensors
            reset = getattr(submodule, "reset_parameters", None)
            if callable(reset):
                reset()


def initialise_unset(module: torch.nn.Module) -> None:
    """Give every NaN-filled (never initialised) parameter a small seeded normal init.

    A NaN buffer is an error instead: buffers hold computed values (filters, statistics) that random
    numbers would silently get wrong.
    """
    import torch

    with torch.no_grad():
        for parameter in module.parameters():
            if parameter.is_floating_point() and torch.isnan(parameter).any():
                parameter.copy_(torch.randn(parameter.shape, dtype=parameter.dtype) * 0.02)
        for name, buffer in module.named_buffers():
            if buffer.is_floating_point() and torch.isnan(buffer).any():
                raise RuntimeError(f"buffer {name} of {type(module).__name__} was never initialised")


def build_module(factory: Callable[[], torch.nn.Module]) -> torch.nn.Module:
    """Construct one part on the CPU with deterministic, fully initialised weights."""
    with nan_filled_empty_tensors():
        module = factory()
        materialise_meta(module)
    initialise_unset(module)
    return module.eval()
