"""Trial slots: which GPUs each of the autotune trials running side by side on this machine may use.

A trial runs one trainer process (``TrialRunner`` validates and launches it as one process), so it
needs ``GPUS_PER_TRIAL`` GPUs, and a GPU is never in two slots: a shared GPU would falsify a trial's
peak memory. The GPUs are the probe's (``CUDA_VISIBLE_DEVICES`` already honoured there), in their
order; each slot's indices become its trial's ``CUDA_VISIBLE_DEVICES``. Pure functions, no I/O.
"""

from __future__ import annotations

from collections.abc import Sequence

from ltx_pipeline.errors import BadInput

__all__ = ["GPUS_PER_TRIAL", "assign_slots", "slot_count"]

GPUS_PER_TRIAL = 1  # a trial is one process (the memory of one DDP rank of a LoRA run is the same)


def slot_count(choice: int | str, usable: int, *, width: int, per_trial: int = GPUS_PER_TRIAL) -> int:
    """How many trials may run at once.

    Args:
        choice: ``--autotune-parallel``: ``"auto"`` or a number of trials (1: one after another).
        usable: GPUs this run may use.
        width: configs the sweep may still try (no more slots than that are ever busy).
        per_trial: GPUs one trial needs.

    Raises:
        BadInput: a number of trials whose GPUs are not all there.
    """
    fit = usable // per_trial
    if choice == "auto":
        return max(1, min(fit, width))
    wanted = int(choice)
    if wanted > 1 and wanted > fit:
        raise BadInput(f"--autotune-parallel {wanted} needs {wanted * per_trial} GPU(s) ({per_trial} per trial, "
                       f"never shared), but {usable} {'is' if usable == 1 else 'are'} usable here",
                       where="--autotune-parallel",
                       fix=f"give at most {max(1, fit)}, or auto (one trial per {per_trial} free GPU(s))")
    return max(1, min(wanted, max(1, width)))


def assign_slots(indices: Sequence[int], count: int, *, per_trial: int = GPUS_PER_TRIAL) -> list[tuple[int, ...]]:
    """``count`` disjoint groups of ``per_trial`` GPU indices, taken in order (a trial per group).

    Raises:
        ValueError: not enough GPUs for ``count`` groups, or an index listed twice.
    """
    if len(set(indices)) != len(indices):
        raise ValueError(f"GPU indices listed twice: {list(indices)}")
    if count < 1 or count * per_trial > len(indices):
        raise ValueError(f"{count} slot(s) of {per_trial} GPU(s) do not fit on GPUs {list(indices)}")
    return [tuple(indices[i * per_trial:(i + 1) * per_trial]) for i in range(count)]
