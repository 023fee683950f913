"""GPU probing: the ``GpuProbe`` a run records, from ``nvidia-smi`` or from an assumed GPU; the door to GPUs.

Owns the probe record and its findings row, the ``--assume-gpu`` spec, and what a run plans for without
probing: the assumed GPU, or, for the toy backend on a machine with no nvidia-smi, a stated default GPU shown
as assumed. Running nvidia-smi, parsing its CSV and the ``CUDA_VISIBLE_DEVICES`` filter are
``probing/gpu_list.py`` (re-exported here with ``Gpu``). Every failure the user can fix (no driver, garbage
output, unknown device ids, a bad spec) is a one-line ``BadInput``, and ``check_gpu_probe`` raises the ones a
probe could not even start with before a run exists. Tier and VRAM-gate decisions are not made here.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ltx_pipeline.env_names import NVIDIA_SMI_ENV
from ltx_pipeline.errors import BadInput
from ltx_pipeline.probing import Finding, plain_record
from ltx_pipeline.probing.gpu_list import (
    ASSUME_FORMAT,
    MIB,
    NVIDIA_SMI_QUERY,
    Gpu,
    describe_gpus,
    filter_visible,
    parse_nvidia_smi,
    resolve_nvidia_smi,
    run_nvidia_smi,
)
from ltx_pipeline.probing.nvidia_smi import nvidia_smi_named, nvidia_smi_on_path

__all__ = [
    "DEFAULT_ASSUMED_GPU",
    "check_gpu_probe",
    "cuda_present",
    "NVIDIA_SMI_ENV",
    "NVIDIA_SMI_QUERY",
    "Gpu",
    "GpuProbe",
    "assumed_probe",
    "describe_gpus",
    "filter_visible",
    "parse_assumed_gpu",
    "parse_nvidia_smi",
    "planned_gpu",
    "probe_gpus",
    "query_gpus",
]

# What the toy backend plans for on a machine with no nvidia-smi (a laptop): the demo's 32 GB card,
# the smallest the LTX-2 workflow documents a config for. Shown as assumed, like --assume-gpu.
DEFAULT_ASSUMED_GPU = "NVIDIA GeForce RTX 5090,32607"
_DEFAULT_SOURCE = "default (no nvidia-smi)"
_DEFAULTED_BACKENDS = ("reference",)  # ``simulated`` assumes its surface's GPU; ``ltx`` needs the real one


@dataclass(frozen=True)
class GpuProbe:
    """What the GPU probe found.

    Attributes:
        source: the nvidia-smi executable that was run, "--assume-gpu", or "default (no nvidia-smi)"
            for the toy backend's default GPU on a machine without nvidia-smi.
        assumed: True when planning for assumed hardware.
        all_gpus: every GPU nvidia-smi listed.
        gpus: the GPUs training will see (after ``CUDA_VISIBLE_DEVICES``).
        cuda_visible_devices: the value honoured, None when unset.
        warnings: things the user should know (e.g. an ambiguous device order).
    """

    source: str
    assumed: bool
    all_gpus: tuple[Gpu, ...]
    gpus: tuple[Gpu, ...]
    cuda_visible_devices: str | None = None
    warnings: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON data."""
        return plain_record(self)

    @property
    def default(self) -> bool:
        """True for the toy backend's default GPU, assumed because this machine has no nvidia-smi."""
        return self.assumed and self.source == _DEFAULT_SOURCE

    def to_finding(self) -> Finding:
        """The "GPUs" row of the findings table."""
        if not self.gpus:
            return Finding(
                "GPUs", "missing",
                f"nvidia-smi lists {len(self.all_gpus)} GPU(s) but CUDA_VISIBLE_DEVICES="
                f"{self.cuda_visible_devices!r} hides all of them",
                "unset CUDA_VISIBLE_DEVICES or list the GPUs to train on, "
                f"or plan for other hardware with {ASSUME_FORMAT}",
            )
        detail = describe_gpus(self.gpus)
        if self.default:
            return Finding(
                "GPUs", "warning",
                f"assumed, not probed: {detail}, the default GPU, because this machine has no nvidia-smi",
                f"plan for another GPU with {ASSUME_FORMAT}, or run on a machine whose nvidia-smi finds its GPUs",
            )
        if self.assumed:
            return Finding(
                "GPUs", "warning", f"assumed, not probed: {detail}",
                "run the plan again on the training machine so its real GPUs are probed",
            )
        if self.warnings:
            return Finding("GPUs", "warning", f"{detail}; {' '.join(self.warnings)}",
                           "set CUDA_DEVICE_ORDER=PCI_BUS_ID or list GPU UUIDs in CUDA_VISIBLE_DEVICES")
        drivers = sorted({gpu.driver for gpu in self.gpus})
        return Finding("GPUs", "ok", f"{detail}; driver {', '.join(drivers)}")


def cuda_present(env: Mapping[str, str] | None = None) -> bool:
    """Whether this machine can run CUDA work: an NVIDIA driver is loaded and CUDA_VISIBLE_DEVICES hides
    not every GPU. File checks only (no torch, no nvidia-smi): it decides ``--device cpu`` for scripts
    that default to cuda, and holds whatever GPU a plan merely assumed (``--assume-gpu``).
    """
    env = os.environ if env is None else env
    visible = env.get("CUDA_VISIBLE_DEVICES")
    if visible is not None and visible.strip() in ("", "-1"):
        return False
    return Path("/proc/driver/nvidia/version").is_file() or Path("/dev/nvidiactl").exists()


def probe_gpus(executable: str | None = None, env: Mapping[str, str] | None = None,
               timeout: float = 15) -> GpuProbe:
    """Run nvidia-smi and return every GPU it lists plus the ones training will see.

    Args:
        executable: nvidia-smi to run; else ``$LTX_PIPELINE_NVIDIA_SMI``; else ``nvidia-smi`` on PATH.
        env: environment to read (``CUDA_VISIBLE_DEVICES``, ``PATH``...); defaults to ``os.environ``.
        timeout: seconds before nvidia-smi counts as hung.

    Raises:
        BadInput: nvidia-smi is missing, fails, hangs, prints garbage, or CUDA_VISIBLE_DEVICES is wrong.
    """
    env = os.environ if env is None else env
    exe, all_gpus = run_nvidia_smi(executable, env, timeout)
    cvd = env.get("CUDA_VISIBLE_DEVICES")
    visible, warnings = filter_visible(all_gpus, cvd, env.get("CUDA_DEVICE_ORDER"))
    return GpuProbe(source=exe, assumed=False, all_gpus=tuple(all_gpus), gpus=tuple(visible),
                    cuda_visible_devices=cvd, warnings=tuple(warnings))


def query_gpus(executable: str | None = None, env: Mapping[str, str] | None = None,
               timeout: float = 15) -> list[Gpu]:
    """The GPUs training will see: ``probe_gpus(...).gpus`` as a list. Raises as ``probe_gpus``."""
    return list(probe_gpus(executable, env, timeout).gpus)


def parse_assumed_gpu(spec: str) -> list[Gpu]:
    """Parse ``--assume-gpu "NAME,MEMORY_MIB[,COUNT]"`` into COUNT assumed GPUs.

    Raises:
        BadInput: the spec does not follow the format, or a number is not a positive integer.
    """
    parts = [part.strip() for part in spec.split(",")]

    def bad(why: str) -> BadInput:
        return BadInput(f"--assume-gpu {spec!r} is not valid: {why}", where="--assume-gpu",
                        fix=f"use {ASSUME_FORMAT}")

    if len(parts) not in (2, 3):
        raise bad(f"expected 2 or 3 comma-separated fields, got {len(parts)}")
    name, memory_text = parts[0], parts[1]
    if not name:
        raise bad("the GPU name is empty")
    memory = MIB.match(memory_text)
    if memory is None or int(memory.group(1)) <= 0:
        raise bad(f"memory {memory_text!r} is not a positive number of MiB (80 GB cards report about 81559)")
    count_text = parts[2] if len(parts) == 3 else "1"
    if not count_text.isdigit() or not 1 <= int(count_text) <= 64:
        raise bad(f"count {count_text!r} is not a whole number from 1 to 64")
    return [Gpu(index=i, uuid=f"ASSUMED-{i}", name=name, memory_mib=int(memory.group(1)),
                driver="assumed", assumed=True) for i in range(int(count_text))]


def assumed_probe(spec: str, *, default: bool = False) -> GpuProbe:
    """A ``GpuProbe`` for ``--assume-gpu`` (or, with ``default``, for ``DEFAULT_ASSUMED_GPU`` on a machine
    with no nvidia-smi): recorded and shown as assumed everywhere."""
    gpus = tuple(parse_assumed_gpu(spec))
    return GpuProbe(source=_DEFAULT_SOURCE if default else "--assume-gpu", assumed=True, all_gpus=gpus, gpus=gpus)


def _nvidia_smi_absent(executable: str | None, env: Mapping[str, str]) -> bool:
    """Nothing names an nvidia-smi (no ``--nvidia-smi``, no ``$LTX_PIPELINE_NVIDIA_SMI``) and none is on PATH.

    An nvidia-smi that is named but broken is not absent: its own error says what is wrong with it.
    """
    return nvidia_smi_named(executable, env) is None and nvidia_smi_on_path(env) is None


def planned_gpu(backend: str, assume_gpu: str | None, nvidia_smi: str | None,
                env: Mapping[str, str] | None = None) -> tuple[str | None, bool]:
    """The GPU a run plans for without probing, as an ``--assume-gpu`` spec, and whether it is the default.

    ``--assume-gpu`` first; else, for the reference backend on a machine with no nvidia-smi,
    ``DEFAULT_ASSUMED_GPU``; else None: the GPUs are probed (or, for ``simulated``, its surface's).

    Args:
        backend: the run's backend name.
        assume_gpu: the request's ``assume_gpu``.
        nvidia_smi: the request's ``nvidia_smi``.
        env: environment to read (``PATH``, ``$LTX_PIPELINE_NVIDIA_SMI``); defaults to ``os.environ``.

    Returns:
        ``(spec or None, True when the spec is the default)``.
    """
    if assume_gpu:
        return assume_gpu, False
    env = os.environ if env is None else env
    if backend in _DEFAULTED_BACKENDS and _nvidia_smi_absent(nvidia_smi, env):
        return DEFAULT_ASSUMED_GPU, True
    return None, False


def check_gpu_probe(backend: str, assume_gpu: str | None, nvidia_smi: str | None,
                    env: Mapping[str, str] | None = None) -> None:
    """Refuse, before a run exists, a request whose GPU probe could not even start.

    A malformed ``--assume-gpu``, or an nvidia-smi that cannot be found or run (nothing is run here:
    only found). With no nvidia-smi at all the reference backend plans for ``DEFAULT_ASSUMED_GPU``;
    the ``ltx`` backend, which trains on the machine's real GPUs, is refused with what to do.

    Raises:
        BadInput: one line: what, where, and the fix (``--assume-gpu``, or the training machine).
    """
    env = os.environ if env is None else env
    spec, _ = planned_gpu(backend, assume_gpu, nvidia_smi, env)
    if spec is not None:
        parse_assumed_gpu(spec)
        return
    if backend == "simulated":
        return  # the surface's GPU is assumed (the probe reads it from the surface file)
    if _nvidia_smi_absent(nvidia_smi, env):
        raise BadInput(f"No GPU to plan for: nvidia-smi is not on PATH, and the {backend} backend plans for "
                       "the training machine's GPUs", where="PATH",
                       fix='pass --assume-gpu "NAME,MEMORY_MIB" (e.g. "NVIDIA H100 80GB HBM3,81559") to plan '
                           "for the GPU you will train on, or run on the training machine")
    resolve_nvidia_smi(nvidia_smi, env)
