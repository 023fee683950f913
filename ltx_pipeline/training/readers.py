"""The trainer-side readers ``status.report.status_report`` takes, for ``status`` and the dashboard alike.

The report knows no log format, weights-file name or nvidia-smi; its callers hand these in. Each imports its
module only when called, so a ``status`` of runs with no trainer to show never loads the log parser or the probe.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

__all__ = ["gpus_now", "log_summary", "weights_files"]


def log_summary(log: Path) -> dict[str, Any]:
    """A trainer log's tail, summarised."""
    from ltx_pipeline.training.follow import log_summary as summarise

    return summarise(log)


def weights_files(checkpoints: Path) -> list[tuple[int, str]]:
    """The trainer's weights files in a checkpoints folder, with their steps (``checkpoints.discovery``)."""
    from ltx_pipeline.checkpoints.discovery import weights_files as listed

    return listed(checkpoints)


def gpus_now(nvidia_smi: str | None) -> list[dict[str, Any]]:
    """Each GPU's use right now, through the nvidia-smi the probe resolves."""
    from ltx_pipeline.probing.nvidia_smi import gpu_now

    return gpu_now(nvidia_smi)
