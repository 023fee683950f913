"""``RunOptions``: what one invocation asks of a drive, beside the request.

The request (``run.yaml``) says what to train and is fingerprinted; these flags say how this one
``run``/``resume`` goes and are never stored: leave once training is launched, apply the proposed
fix of the last failure, train the unfinished stage again from step 0. The CLI builds them from its
options; a phase reads them as typed attributes (``ctx.options.detach``).
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["RunOptions"]


@dataclass(frozen=True)
class RunOptions:
    """Per-invocation choices of a drive (all off by default).

    Attributes:
        detach: return once training is launched; the trainer goes on, ``resume`` re-attaches.
        apply_fix: apply the fix proposed for the last failure (``status`` shows it) before retrying.
        restart_training: train the first unfinished stage again from step 0 into a fresh output
            folder, the old one kept beside it.
        replan: redo what a new release would do otherwise: fingerprints an earlier version wrote are
            compared strictly (every part it did not record counts), and a finished run runs the optional
            phases a later release added (``optional_extra``: the evaluation). Off, an upgrade keeps a run's
            work (#49).
        queue: wait for the run's GPUs in the queue (first come, first served) instead of refusing a busy GPU.
    """

    detach: bool = False
    apply_fix: bool = False
    restart_training: bool = False
    replan: bool = False
    queue: bool = False
