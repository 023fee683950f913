"""The failure-kind vocabulary: one list for the engine, ``status``, ``failure.md`` and ``diagnose``.

Kinds are stored (``failure.json``, autotune trial attributes), so a kind that was renamed keeps its
old spelling readable: ``canonical_kind`` maps it to today's name on read. Pure data, standard library only.
"""

from __future__ import annotations

from typing import Any, NamedTuple

__all__ = ["FAILURE_KINDS", "LEGACY_KINDS", "PHASES", "ConfigChange", "FixStep", "canonical_kind"]


class FixStep(NamedTuple):
    """One proposed change: ``path`` is a dotted config path, or None for advice that is no config diff."""

    path: str | None
    value: Any
    reason: str


class ConfigChange(NamedTuple):
    """A ``FixStep`` that is a config diff: set the dotted config ``path`` to ``value``."""

    path: str
    value: Any
    reason: str

# ``host_oom`` needs the log's own evidence (the kernel's "Out of memory: Killed process N", a shell's
# "Killed", a DataLoader worker killed, MemoryError, or a log that stops with no error inside an unfinished
# weight-loading bar when no exit status is known); a bare SIGKILL is ``killed``: a user's ``kill -9``
# and the kernel's OOM killer look the same from the exit status alone.
FAILURE_KINDS = ("oom_training", "oom_validation", "host_oom", "killed", "shm_bus_error", "nan_loss",
                 "config_error", "missing_files", "dependency_error", "dataset_error", "stale_embeddings",
                 "crash")

# Names stored by earlier versions -> today's name.
LEGACY_KINDS = {"environment": "dependency_error"}

# What the trainer was doing when it failed, from its own log lines (see ``_phase``).
PHASES = ("model_loading", "embedding_precomputation", "validation_sampling", "checkpoint_saving", "training")


def canonical_kind(kind: str | None) -> str | None:
    """Today's name of a stored failure kind (old names mapped, unknown names kept as they are)."""
    if kind is None:
        return None
    return LEGACY_KINDS.get(kind, kind)
