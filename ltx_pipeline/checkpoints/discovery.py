"""Finding the trainer's checkpoints on disk: every pair in a folder, the newest complete one, what a
``model.load_checkpoint`` folder would load.

A checkpoint is a *complete pair*: ``{lora|model}_weights_step_N.safetensors`` with a non-empty
``training_state_step_N.pt`` of the same digits beside it (a ``.pt.tmp`` or an empty state is an
interrupted save). One listing serves the engine's follower, resume, the node runner, the launch checks
and ``status`` alike; the names come from ``checkpoints.files``.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ltx_pipeline.checkpoints.files import LOAD_GLOB, WEIGHTS_RE, state_beside, step_in_name

__all__ = ["CheckpointPair", "checkpoint_pairs", "latest_pair", "load_target", "weights_files"]


@dataclass(frozen=True)
class CheckpointPair:
    """Weights and the training state of the same step (``state`` None: weights only)."""

    step: int
    weights: Path
    state: Path | None

    @property
    def complete(self) -> bool:
        return self.state is not None


def checkpoint_pairs(checkpoints_dir: Path, *, complete_only: bool = True) -> list[CheckpointPair]:
    """Every checkpoint in ``checkpoints_dir`` by step (ascending); only complete pairs by default.

    The state file keeps the weights' zero padding (``_step_00020``), as the trainer looks it up.
    Empty state files are interrupted saves and do not count.
    """
    if not checkpoints_dir.is_dir():
        return []
    pairs = []
    for weights in checkpoints_dir.iterdir():
        match = WEIGHTS_RE.match(weights.name)
        if match is None or not weights.is_file():
            continue
        state = state_beside(weights)
        has_state = state is not None and state.is_file() and state.stat().st_size > 0
        if has_state or not complete_only:
            pairs.append(CheckpointPair(int(match.group(2)), weights, state if has_state else None))
    return sorted(pairs, key=lambda p: p.step)


def latest_pair(checkpoints_dir: Path) -> CheckpointPair | None:
    """The newest complete pair, or None when no checkpoint can be resumed from."""
    pairs = checkpoint_pairs(checkpoints_dir)
    return pairs[-1] if pairs else None


def weights_files(checkpoints: Path) -> list[tuple[int, str]]:
    """Each weights file in a ``checkpoints`` folder with its step, by step; [] when the folder is absent."""
    return [(pair.step, str(pair.weights)) for pair in checkpoint_pairs(checkpoints, complete_only=False)]


def load_target(folder: Path) -> Path | None:
    """The weights the trainer loads from a ``model.load_checkpoint`` folder: the highest step of every
    ``*step_*.safetensors`` below it (``_find_checkpoint``); None when it holds none."""
    found = [(int(digits), path) for path in folder.rglob(LOAD_GLOB)
             if (digits := step_in_name(path.stem)) is not None]
    return max(found)[1] if found else None
