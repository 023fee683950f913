"""GPU leases and the queue: who holds which GPU, liveness from evidence, the FIFO of waiting runs.

The engine asks this room for GPUs (``RunGpus``, handed to the runner by the driving layer) right before a
run's first heavy phase; backends never decide placement. A lease is free again only on evidence that its
holder is dead (``evidence``), never by a timeout; GPUs in use by processes ltx-pipeline did not start are
read from nvidia-smi (``devices``) and respected. ``board`` is what ``queue`` and ``status`` show.

The names below load on first use (PEP 562): ``status`` and ``queue`` import only ``board``, which needs
neither SQLAlchemy nor the phase outputs.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ltx_pipeline.gpus.board import gpu_board
    from ltx_pipeline.gpus.book import Verdict, try_take
    from ltx_pipeline.gpus.claim import RunGpus
    from ltx_pipeline.gpus.devices import GpuRef, foreign_use, run_gpus

__all__ = ["GpuRef", "RunGpus", "Verdict", "foreign_use", "gpu_board", "run_gpus", "try_take"]

_HOMES = {"gpu_board": "board", "Verdict": "book", "try_take": "book", "RunGpus": "claim", "GpuRef": "devices",
          "foreign_use": "devices", "run_gpus": "devices"}


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'ltx_pipeline.gpus' has no attribute {name!r}")
    return getattr(importlib.import_module(f"ltx_pipeline.gpus.{home}"), name)
