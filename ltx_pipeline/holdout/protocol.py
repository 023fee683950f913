"""The holdout-loss protocol: what is measured, at which noise, and the job file both measuring scripts read.

Figures are comparable across checkpoints because nothing in them is drawn at random: each sample is noised
at ``SIGMAS`` (the midpoints of four equal strata of (0, 1)), with the torch RNG seeded per set, sample and
sigma from ``SEED`` before the trainer's strategy draws its noise and conditions. The training rows measured
are ``TRAIN_SAMPLES`` of the sorted training samples, spread evenly (``pick``). The protocol digest covers
everything that changes a figure but the weights; a checkpoint is known by its step, path, size and mtime. The
toy trainer (``reference_trainer.holdout_loss``) imports this module; the trainer-side script, which imports
nothing from ltx_pipeline, repeats ``pick`` and the seeding rule (the README of ``trainer_side/`` says so).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ltx_pipeline.engine.fingerprint import digest

__all__ = ["JOB_VERSION", "SEED", "SIGMAS", "TRAIN_SAMPLES", "Job", "JobCheckpoint", "checkpoint_id", "pick",
           "read_results", "stratified_sigmas", "tree_identity"]

JOB_VERSION = 1
SEED = 42
TRAIN_SAMPLES = 4
#: Added to ``SEED`` per set, so a row's noise in the holdout set is never the same row's in the training set.
SET_SEED_OFFSET = {"holdout": 0, "train": 1_000_000}


def stratified_sigmas(count: int) -> tuple[float, ...]:
    """The midpoints of ``count`` equal strata of (0, 1): every noise level is measured, none twice."""
    return tuple((index + 0.5) / count for index in range(count))


SIGMAS = stratified_sigmas(4)


def pick(count: int, wanted: int | None) -> list[int]:
    """``wanted`` indices spread evenly over ``count`` sorted samples (all of them when None or more)."""
    if wanted is None or wanted >= count:
        return list(range(count))
    return sorted({index * count // wanted for index in range(wanted)})


def sample_seed(set_name: str, row: int, sigma_index: int) -> int:
    """The torch seed set before one sample is noised at one sigma."""
    return SEED + SET_SEED_OFFSET[set_name] + 1000 * row + sigma_index


def tree_identity(root: Path) -> str:
    """The files under ``root`` by relative path, size and mtime: cheap, and changed by any re-encoding."""
    files = sorted(p for p in root.rglob("*") if p.is_file()) if root.is_dir() else []
    return digest([[str(p.relative_to(root)), p.stat().st_size, p.stat().st_mtime_ns] for p in files])[:23]


def checkpoint_id(step: int, weights: Path | None) -> str:
    """What a measured figure belongs to: the base (step 0) or one weights file as it is on disk."""
    if weights is None:
        return "base"
    stat = weights.stat()
    return digest({"step": step, "path": str(weights), "size": stat.st_size, "mtime_ns": stat.st_mtime_ns})[:23]


@dataclass(frozen=True)
class JobCheckpoint:
    """One checkpoint to measure: its run step, its weights (None: the base) and its identity."""

    step: int
    path: str | None
    id: str


@dataclass(frozen=True)
class Job:
    """What the measuring script is given (``write``), as JSON.

    Attributes:
        config: the trained config the model, strategy and LoRA come from.
        holdout_root: the held-out rows' ``.precomputed``.
        train_root: the training rows' ``.precomputed`` (what train.py trained on).
        checkpoints: step 0 first, then every kept checkpoint by step.
        results: the script's own record, one entry per checkpoint measured (resumable).
        data_identity: the held-out latents' identity (a new preprocessing makes earlier figures another protocol's).
        train_identity: the training rows' files as they are on disk (``tree_identity``): rows encoded again, or
            other rows, make the base's and every checkpoint's training-row figures another protocol's.
    """

    config: Path
    holdout_root: Path
    train_root: Path
    checkpoints: tuple[JobCheckpoint, ...]
    results: Path
    data_identity: str | None
    train_identity: str | None = None

    @property
    def protocol(self) -> str:
        return digest({"version": JOB_VERSION, "config": self.config.read_text(encoding="utf-8"),
                       "holdout": str(self.holdout_root), "train": str(self.train_root), "sigmas": list(SIGMAS),
                       "seed": SEED, "train_samples": TRAIN_SAMPLES, "data": self.data_identity,
                       "train_rows": self.train_identity})

    def to_json(self) -> str:
        return json.dumps({
            "version": JOB_VERSION, "protocol": self.protocol, "config": str(self.config),
            "sets": {"holdout": str(self.holdout_root), "train": str(self.train_root)},
            "train_samples": TRAIN_SAMPLES, "sigmas": list(SIGMAS), "seed": SEED, "results": str(self.results),
            "checkpoints": [{"step": c.step, "path": c.path, "id": c.id} for c in self.checkpoints]}, indent=1)


def read_results(path: Path, protocol: str) -> list[dict[str, Any]]:
    """The entries a script wrote under ``protocol`` (none when the file is absent, unreadable or another's)."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return []
    if not isinstance(data, dict) or data.get("protocol") != protocol:
        return []
    return [e for e in data.get("checkpoints") or [] if isinstance(e, dict)]
