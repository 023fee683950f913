"""Several autotune trials at once pick the sequential sweep's winner at no more GPU-seconds (#46).

The schedule is driven in simulated time over the shipped cost surfaces (``autotune.parallel_sim``),
the same ``SpeculativeSchedule`` the phase's threads drive.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from ltx_pipeline.autotune.parallel_sim import simulate_slots
from ltx_pipeline.autotune.speculation import SpeculativeSchedule
from ltx_pipeline.backends.surface import load_surface
from ltx_pipeline.ltx.autotune import SweepPlanner, TrialResult, search_space

SURFACES = Path(__file__).resolve().parents[2] / "benchmarks" / "surfaces"
LOW = {"quantization": "int8-quanto", "optimizer_type": "adamw8bit", "batch_size": 1,
       "enable_gradient_checkpointing": True, "gradient_accumulation_steps": 4}


def _space(name: str) -> tuple[object, list[dict]]:
    surface = load_surface(SURFACES / name)
    return surface, search_space("low_vram", surface.per_gpu_batch, False, LOW)


@pytest.mark.parametrize("slots", [2, 3, 4])
def test_parallel_slots_commit_the_sequential_sweep_and_pick_its_winner(slots: int) -> None:
    surface, space = _space("l40s_48gb.yaml")
    args = {"headroom": 0.05, "per_gpu_batch": surface.per_gpu_batch}
    one = simulate_slots(surface, space, space[0], slots=1, **args)
    many = simulate_slots(surface, space, space[0], slots=slots, **args)
    assert many["chosen"] == one["chosen"] and many["trials_run"] == one["trials_run"] == 4
    assert many["gpu_seconds"] == pytest.approx(one["gpu_seconds"])  # no speculation wasted
    assert many["wall_seconds"] < 0.8 * one["wall_seconds"]
    trials = many["trials"]
    overlapping = [(a, b) for a in trials for b in trials
                   if a is not b and a["start"] < b["end"] and b["start"] < a["end"]]
    assert overlapping and all(a["slot"] != b["slot"] for a, b in overlapping)


def _result(knobs: dict, outcome: str, step: float | None, peak: float | None) -> TrialResult:
    return TrialResult(dict(knobs), outcome, step, peak, peak and 20.0, 10.0, "")


def test_results_that_end_out_of_order_wait_for_the_sequential_order() -> None:
    surface, space = _space("l40s_48gb.yaml")
    planner = SweepPlanner(space, space[0], capacity_gb=45.0, headroom=0.05, per_gpu_batch=4)
    schedule = SpeculativeSchedule(planner, 2)
    (baseline,) = schedule.starts()  # the baseline runs alone: nothing is chosen before it is measured
    assert schedule.starts() == []
    schedule.ended(baseline, _result(baseline, "fit", 1.0, 30.0))
    planner.record(schedule.ready())
    first, second = schedule.starts()
    assert planner.next_trial() == first  # the sequential sweep's next, and one independent of it
    schedule.ended(second, _result(second, "fit", 0.5, 35.0))
    assert schedule.ready() is None  # measured, not committed: the sequential sweep has not reached it
    schedule.ended(first, _result(first, "oom_training", None, None))
    committed = []
    while (ready := schedule.ready()) is not None:
        planner.record(ready)
        committed.append(ready.knobs)
    assert committed[0] == first and planner.trials[1].knobs == first  # first the sequential sweep's own trial
