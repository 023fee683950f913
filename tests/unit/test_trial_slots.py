"""Trial slots for ``--autotune-parallel``: disjoint GPU groups, and how many trials run at once (#46)."""

from __future__ import annotations

import pytest

from ltx_pipeline.autotune.slots import assign_slots, slot_count
from ltx_pipeline.errors import BadInput


def test_slots_are_disjoint_groups_of_the_usable_gpus_in_order() -> None:
    # The user's CUDA_VISIBLE_DEVICES=5,2,7,3 left these four (the probe honours it): never another index.
    slots = assign_slots([5, 2, 7, 3], 2)
    assert slots == [(5,), (2,)]
    assert assign_slots([5, 2, 7, 3], 2, per_trial=2) == [(5, 2), (7, 3)]
    every = [i for s in assign_slots([0, 1, 2, 3], 4) for i in s]
    assert sorted(every) == [0, 1, 2, 3] and len(set(every)) == len(every)


def test_slots_never_share_a_gpu_or_outgrow_the_machine() -> None:
    with pytest.raises(ValueError, match="do not fit"):
        assign_slots([0, 1, 2], 2, per_trial=2)
    with pytest.raises(ValueError, match="twice"):
        assign_slots([0, 0, 1], 2)


def test_auto_takes_one_trial_per_free_gpu_capped_by_the_sweeps_width() -> None:
    assert slot_count("auto", 8, width=3) == 3
    assert slot_count("auto", 4, width=12) == 4
    assert slot_count("auto", 4, width=12, per_trial=2) == 2
    assert slot_count("auto", 1, width=12) == 1
    assert slot_count("auto", 0, width=12) == 1  # no GPU probed: one at a time, as before


def test_a_number_of_trials_is_kept_or_refused_in_one_line() -> None:
    assert slot_count(1, 1, width=5) == 1
    assert slot_count(2, 4, width=5) == 2
    assert slot_count(4, 4, width=2) == 2  # never more slots than configs left to try
    with pytest.raises(BadInput) as caught:
        slot_count(3, 2, width=5)
    assert caught.value.where == "--autotune-parallel" and "needs 3 GPU(s)" in caught.value.what
