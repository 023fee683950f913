"""Which GPUs a run's launch uses, and which GPUs processes ltx-pipeline did not start hold memory on.

A run's phase needs some of the probe's visible GPUs (``CUDA_VISIBLE_DEVICES`` already honoured there): as
many as its launch's processes, or a span (preprocessing ranks, autotune trials: one per free GPU). Which ones
is the lease book's choice (the free ones, lowest index first), and every process the run then launches is
pinned to them (``pinning_env``), so two runs on one machine never share a GPU; assumed GPUs keep their stable
synthetic ids (``ASSUMED-<n>``). Foreign use is nvidia-smi's ``memory.used`` per GPU UUID: a GPU
with more than ``FOREIGN_MIB`` in use and no live lease is someone else's.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterable
from dataclasses import dataclass

from ltx_pipeline.probing.gpu_list import Gpu

__all__ = ["FOREIGN_MIB", "GpuNeed", "GpuRef", "foreign_use", "pinning_env", "run_gpus"]

FOREIGN_MIB = 1024  # more than an idle CUDA context: someone else's model or a leftover trainer
_QUERY = ["--query-gpu=index,uuid,memory.used", "--format=csv,noheader,nounits"]


@dataclass(frozen=True, order=True)
class GpuRef:
    """One GPU as a lease names it: nvidia-smi's index and its UUID."""

    index: int
    uuid: str

    def words(self) -> str:
        return f"GPU {self.index}"


@dataclass(frozen=True)
class GpuNeed:
    """What a phase of a run needs: at least ``least`` and at most ``most`` of the ``candidates`` (the visible GPUs).

    ``least`` is what its launch cannot start without (a training launch's processes); ``most`` what it can use
    (one preprocessing rank or one autotune trial per GPU): it takes as many free GPUs as there are, up to it.
    """

    candidates: tuple[GpuRef, ...]
    least: int
    most: int

    def words(self) -> str:
        count = f"{self.least}" if self.least == self.most else f"{self.least} to {self.most}"
        pool = ", ".join(str(g.index) for g in self.candidates)
        return f"{count} of GPU(s) {pool}"


def run_gpus(visible: Iterable[Gpu], processes: int | None, span: tuple[int, int] | None = None) -> GpuNeed:
    """A run's need on the ``visible`` GPUs: ``span`` (least, most) when its phase says, else its launch's
    ``processes`` (all visible when None), each capped at what is visible."""
    refs = tuple(GpuRef(gpu.index, gpu.uuid) for gpu in visible)
    least, most = span if span is not None else ((processes or len(refs)),) * 2
    most = min(max(most, least), len(refs))
    return GpuNeed(refs, min(least, most), most)


def pinning_env(indices: Iterable[int]) -> dict[str, str]:
    """The environment that keeps a launched process on ``indices`` (nvidia-smi's, so PCI bus order)."""
    return {"CUDA_DEVICE_ORDER": "PCI_BUS_ID", "CUDA_VISIBLE_DEVICES": ",".join(str(i) for i in indices)}


def foreign_use(executable: str, timeout_s: float = 20.0) -> dict[str, int]:
    """MiB in use per GPU UUID as nvidia-smi reports it; {} when it cannot be read (then nothing is known to
    be busy: the probe already refused a broken nvidia-smi, and the launch's own check runs again)."""
    try:
        done = subprocess.run([executable, *_QUERY], capture_output=True, text=True,  # noqa: S603 - argv list
                              timeout=timeout_s, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return {}
    return parse_memory_used(done.stdout) if done.returncode == 0 else {}


def parse_memory_used(text: str) -> dict[str, int]:
    """``index, uuid, memory.used`` rows into {uuid: MiB}; rows of any other shape are skipped."""
    used: dict[str, int] = {}
    for line in text.splitlines():
        fields = [field.strip() for field in line.split(",")]
        if len(fields) == 3 and fields[0].isdigit() and fields[2].isdigit():
            used[fields[1]] = int(fields[2])
    return used
