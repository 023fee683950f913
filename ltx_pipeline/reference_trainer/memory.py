"""Device-memory measurement and the simulated device capacity.

Owns ``DeviceMemory``: the peak of memory in use during training and during validation, and the
out-of-memory failure when a capacity is set. On CUDA it reads the caching allocator's peak and
enforces the capacity with ``set_per_process_memory_fraction`` (a real CUDA OOM). On CPU it counts
live tensor storage bytes for real: a ``TorchDispatchMode`` sees the outputs of every op, each new
storage is counted once (keyed by its data pointer) and uncounted by a finalizer when the storage
is freed. Tensors made before metering starts (the frozen base, parked on the host the way the
trainer parks it) are registered with ``track_module``. Quantized weights (tensor subclasses) are
counted through their inner tensors.
"""

from __future__ import annotations

import os
import weakref
from collections.abc import Iterator
from contextlib import contextmanager

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves

from ltx_pipeline.env_names import REFERENCE_CAPACITY_ENV as CAPACITY_ENV
from ltx_pipeline.env_names import REFERENCE_SCALE_ENV as SCALE_ENV

__all__ = ["DeviceMemory", "capacity_from_env", "memory_scale_from_env"]

MIB = 1024**2
GIB = 1024**3


def capacity_from_env() -> int | None:
    """Capacity in (scaled) bytes from ``LTX_REFERENCE_DEVICE_CAPACITY_MIB``; None when unset."""
    raw = os.environ.get(CAPACITY_ENV, "").strip()
    if not raw:
        return None
    value = float(raw)
    if value <= 0:
        raise ValueError(f"{CAPACITY_ENV} must be a positive number of MiB, got {raw!r}")
    return int(value * MIB)


def memory_scale_from_env() -> float:
    """The factor applied to measured bytes (``LTX_REFERENCE_MEMORY_SCALE``, default 1)."""
    raw = os.environ.get(SCALE_ENV, "").strip()
    value = float(raw) if raw else 1.0
    if value <= 0:
        raise ValueError(f"{SCALE_ENV} must be positive, got {raw!r}")
    return value


_PLAIN = (torch.Tensor, torch.nn.Parameter)


def _inner_tensors(tensor: torch.Tensor) -> list[torch.Tensor]:
    flatten = getattr(tensor, "__tensor_flatten__", None)
    if flatten is None or type(tensor) in _PLAIN:
        return [tensor]
    names, _ = flatten()
    inner: list[torch.Tensor] = []
    for name in names:
        inner += _inner_tensors(getattr(tensor, name))
    return inner


class _LiveStorageMode(TorchDispatchMode):
    """Counts every storage produced by an op until it is freed."""

    def __init__(self, owner: DeviceMemory) -> None:
        super().__init__()
        self._owner = owner

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # noqa: ANN001
        out = func(*args, **(kwargs or {}))
        if isinstance(out, torch.Tensor):
            self._owner.track(out)
        else:
            for leaf in tree_leaves(out):
                if isinstance(leaf, torch.Tensor):
                    self._owner.track(leaf)
        return out


class DeviceMemory:
    """Peak memory of this process's device, split by phase ("training" or "validation").

    Args:
        device: the training device.
        capacity_bytes: the simulated capacity in scaled bytes, or None for no limit.
        scale: factor applied to measured bytes before reporting or comparing.
    """

    def __init__(self, device: torch.device, capacity_bytes: int | None, scale: float = 1.0) -> None:
        self.device = device
        self.capacity = capacity_bytes
        self.scale = scale
        self.phase = "training"
        self.peaks = {"training": 0, "validation": 0}
        self._live: dict[int, int] = {}
        self._current = 0
        self._device_type = device.type
        self.oom_phase: str | None = None
        if device.type == "cuda" and capacity_bytes is not None:
            total = torch.cuda.get_device_properties(device).total_memory
            fraction = min(1.0, capacity_bytes / scale / total)
            torch.cuda.set_per_process_memory_fraction(fraction, device)

    # ---- CPU accounting -------------------------------------------------------------------
    def track(self, tensor: torch.Tensor) -> None:
        """Count ``tensor``'s storage (once) until it is freed; check the capacity."""
        tensors = [tensor] if type(tensor) in _PLAIN else _inner_tensors(tensor)
        for inner in tensors:
            if inner.device.type != self._device_type:
                continue
            try:
                storage = inner.untyped_storage()
            except (RuntimeError, NotImplementedError):
                continue
            key = storage.data_ptr()
            if key in self._live:
                continue
            nbytes = storage.nbytes()
            if nbytes == 0:
                continue
            self._live[key] = nbytes
            self._current += nbytes
            weakref.finalize(storage, self._release, key, nbytes)
            self._note(nbytes)

    def track_module(self, module: torch.nn.Module) -> None:
        """Register the parameters and buffers of ``module`` (made before metering started)."""
        if self.device.type == "cuda":
            return
        for tensor in list(module.parameters()) + list(module.buffers()):
            self.track(tensor)

    def _release(self, key: int, nbytes: int) -> None:
        if self._live.get(key) == nbytes:
            del self._live[key]
            self._current -= nbytes

    def _note(self, allocated: int) -> None:
        scaled = int(self._current * self.scale)
        if scaled > self.peaks[self.phase]:
            self.peaks[self.phase] = scaled
        if self.capacity is not None and scaled > self.capacity:
            self._raise_oom(int(allocated * self.scale), scaled)

    def _raise_oom(self, allocation: int, in_use: int) -> None:
        free = max(0, self.capacity - (in_use - allocation))
        self.oom_phase = self.phase
        raise torch.OutOfMemoryError(
            f"CUDA out of memory. Tried to allocate {allocation / GIB:.2f} GiB. GPU 0 has a total "
            f"capacity of {self.capacity / GIB:.2f} GiB of which {free / GIB:.2f} GiB is free. "
            f"Of the allocated memory {in_use / GIB:.2f} GiB is allocated by PyTorch. "
            f"(reference trainer, simulated device: {CAPACITY_ENV}={self.capacity / MIB:.0f}, "
            f"out of memory during {self.phase})"
        )

    # ---- public API --------------------------------------------------------------------------
    @contextmanager
    def metering(self) -> Iterator[DeviceMemory]:
        """Count allocations made inside the block (CPU); a no-op on CUDA."""
        if self.device.type == "cuda":
            yield self
            return
        mode = _LiveStorageMode(self)
        with mode:
            yield self

    @contextmanager
    def during(self, phase: str) -> Iterator[None]:
        """Attribute peaks (and OOMs) inside the block to ``phase``."""
        previous = self.phase
        self.phase = phase
        if self.device.type == "cuda":
            torch.cuda.reset_peak_memory_stats(self.device)
        try:
            yield
        finally:
            self._sync_cuda_peak()
            self.phase = previous
            if self.device.type == "cuda":
                torch.cuda.reset_peak_memory_stats(self.device)

    def _sync_cuda_peak(self) -> None:
        if self.device.type == "cuda":
            peak = int(torch.cuda.max_memory_allocated(self.device) * self.scale)
            self.peaks[self.phase] = max(self.peaks[self.phase], peak)

    def in_use(self) -> int:
        """Scaled bytes in use now."""
        if self.device.type == "cuda":
            return int(torch.cuda.memory_allocated(self.device) * self.scale)
        return int(self._current * self.scale)

    @property
    def peak(self) -> int:
        """The overall peak, training or validation, in scaled bytes."""
        self._sync_cuda_peak()
        return max(self.peaks.values())
