"""Which GPUs a run's launch uses, and which GPUs processes ltx-pipeline did not start hold memory on.

A run leases the probe's visible GPUs (``CUDA_VISIBLE_DEVICES`` already honoured there) that its launch
uses: the first ``processes`` of them, as ``accelerate launch --num_processes`` takes them; assumed GPUs keep
their stable synthetic ids (``ASSUMED-<n>``). Foreign use is nvidia-smi's ``memory.used`` per GPU UUID: a GPU
with more than ``FOREIGN_MIB`` in use and no live lease is someone else's.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterable
from dataclasses import dataclass

from ltx_pipeline.probing.gpu_list import Gpu

__all__ = ["FOREIGN_MIB", "GpuRef", "foreign_use", "run_gpus"]

FOREIGN_MIB = 1024  # more than an idle CUDA context: someone else's model or a leftover trainer
_QUERY = ["--query-gpu=index,uuid,memory.used", "--format=csv,noheader,nounits"]


@dataclass(frozen=True, order=True)
class GpuRef:
    """One GPU as a lease names it: nvidia-smi's index and its UUID."""

    index: int
    uuid: str

    def words(self) -> str:
        return f"GPU {self.index}"


def run_gpus(visible: Iterable[Gpu], processes: int | None) -> list[GpuRef]:
    """The GPUs a launch of ``processes`` processes uses: the first of the visible ones (all when None)."""
    refs = [GpuRef(gpu.index, gpu.uuid) for gpu in visible]
    return refs if processes is None else refs[:processes]


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
