"""Trainer backends behind one interface: ``ltx`` (the real trainer), ``reference`` (a toy trainer
that really trains on CPU or GPU) and ``simulated`` (a cost surface, for benchmarks and exact tests).
"""

from __future__ import annotations

import os
from pathlib import Path

from ltx_pipeline.backends.base import (
    DISTRIBUTED_MODES,
    MIRROR_VALIDATOR,
    MIRRORED_TRAINER_VERSION,
    LaunchSpec,
    TrainerBackend,
    redact_env,
)
from ltx_pipeline.env_names import LTX2_ROOT_ENV
from ltx_pipeline.errors import BadRequest

__all__ = ["BACKEND_NAMES", "DISTRIBUTED_MODES", "MIRRORED_TRAINER_VERSION", "MIRROR_VALIDATOR", "LaunchSpec",
           "TrainerBackend", "make_backend", "redact_env"]

BACKEND_NAMES = ("ltx", "reference", "simulated")


def make_backend(name: str, *, trainer_root: str | None = None, surface: str | None = None,
                 assume_gpu: str | None = None, memory_scale: float | None = None,
                 trainer_python: str | None = None, nvidia_smi: str | None = None) -> TrainerBackend:
    """Build the backend a run asked for.

    Raises:
        BadRequest: unknown name, or a missing ``--surface`` for ``simulated``.
    """
    if name == "ltx":
        from ltx_pipeline.backends.ltx import LtxBackend

        root = trainer_root or os.environ.get(LTX2_ROOT_ENV)
        return LtxBackend(Path(root) if root else None, python=trainer_python)
    if name == "reference":
        # planned_gpu is imported here, not at the top: every simulated-trainer process imports this package,
        # and the probing package brings numpy and PyAV along (0.2 s of CPU per trainer start).
        from ltx_pipeline.backends.reference import ReferenceBackend
        from ltx_pipeline.probing.gpus import planned_gpu

        # An assumed GPU's memory becomes the toy's device capacity, against its measured bytes
        # multiplied by ``memory_scale`` (without a scale the toy's bytes are far below any card). With
        # no nvidia-smi here that is the default GPU the probe plans for, chosen by the same rule.
        spec, _ = planned_gpu(name, assume_gpu, nvidia_smi)
        capacity = _assumed_memory_mib(spec) if spec else None
        return ReferenceBackend(capacity_mib=capacity, memory_scale=memory_scale)
    if name == "simulated":
        if not surface:
            raise BadRequest("The simulated backend needs a cost surface", where="--surface",
                             fix="pass --surface FILE (format in the README)")
        from ltx_pipeline.backends.simulated import SimulatedBackend

        return SimulatedBackend(Path(surface))
    raise BadRequest(f"Unknown backend {name!r}", where="--backend", fix="choose ltx, reference or simulated")


def _assumed_memory_mib(spec: str) -> int | None:
    parts = [p.strip() for p in spec.split(",")]
    try:
        return int(parts[1].split()[0])
    except (IndexError, ValueError):
        return None  # the probe reports a malformed --assume-gpu with its own one-line error
