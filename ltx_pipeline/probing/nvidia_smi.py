"""Which nvidia-smi to run, decided in one place, and the live GPU reading ``status`` shows.

Every reader of the GPUs (the probe, plan's "can autotune measure here", the free-GPU check before a
launch, the autotune VRAM sampler, ``status``) resolves nvidia-smi the same way: ``--nvidia-smi``,
else ``$LTX_PIPELINE_NVIDIA_SMI``, else the one on PATH. They differ only in what they do when
there is none, which each caller states by the function it picks.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Mapping
from typing import Any

from ltx_pipeline.env_names import NVIDIA_SMI_ENV

__all__ = ["gpu_now", "nvidia_smi_command", "nvidia_smi_found", "nvidia_smi_named", "nvidia_smi_on_path"]


def nvidia_smi_named(executable: str | None, env: Mapping[str, str] | None = None) -> str | None:
    """The nvidia-smi the user named (``--nvidia-smi``, else ``$LTX_PIPELINE_NVIDIA_SMI``), or None."""
    env = os.environ if env is None else env
    return executable or env.get(NVIDIA_SMI_ENV) or None


def nvidia_smi_on_path(env: Mapping[str, str] | None = None) -> str | None:
    """The ``nvidia-smi`` found on PATH, or None."""
    env = os.environ if env is None else env
    return shutil.which("nvidia-smi", path=env.get("PATH"))


def nvidia_smi_command(executable: str | None, env: Mapping[str, str] | None = None) -> str:
    """The nvidia-smi to run: the one named, else the one on PATH, else the bare name (running it then
    fails with an OSError that says so)."""
    return nvidia_smi_named(executable, env) or nvidia_smi_on_path(env) or "nvidia-smi"


def nvidia_smi_found(executable: str | None, env: Mapping[str, str] | None = None) -> bool:
    """Whether the nvidia-smi to run exists and is executable here; found only, never run."""
    env = os.environ if env is None else env
    candidate = os.path.expanduser(nvidia_smi_named(executable, env) or "nvidia-smi")
    if os.sep in candidate:
        return os.path.isfile(candidate) and os.access(candidate, os.X_OK)
    return shutil.which(candidate, path=env.get("PATH")) is not None


def gpu_now(executable: str | None = None, timeout_s: float = 3.0) -> list[dict[str, Any]]:
    """Utilisation and memory of each GPU right now; [] when nvidia-smi is absent or fails."""
    exe = nvidia_smi_named(executable) or nvidia_smi_on_path()
    if not exe:
        return []
    try:
        done = subprocess.run(  # noqa: S603 - argv list, best effort
            [exe, "--query-gpu=index,name,utilization.gpu,memory.used,memory.total", "--format=csv,noheader,nounits"],
            capture_output=True, text=True, timeout=timeout_s, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return []
    gpus = []
    for line in done.stdout.splitlines() if done.returncode == 0 else []:
        fields = [f.strip() for f in line.split(",")]
        if len(fields) == 5 and all(f.isdigit() for f in (fields[0], fields[2], fields[3], fields[4])):
            gpus.append({"index": int(fields[0]), "name": fields[1], "utilization_pct": int(fields[2]),
                         "memory_used_mib": int(fields[3]), "memory_total_mib": int(fields[4])})
    return gpus
