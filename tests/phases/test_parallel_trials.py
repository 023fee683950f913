"""#46: a reference-backend sweep with ``--autotune-parallel 2`` on 4 assumed GPUs.

Trials overlap in time, no two overlapping trials share a GPU, each trial's GPUs are in its record, its
Optuna trial and autotune.log, autotune.md's "Trials side by side" gives the figures those times make, and
the committed results are the ones the sequential sweep takes, in its order, to its winner (replayed through a
fresh planner: the toy's step times are wall-clock, so two separate runs may time a close pair differently; the
decision from the same results is the same).
"""

from __future__ import annotations

import pytest

from tests.phases.parallel_helpers import sweep, trial_times


@pytest.mark.long  # 70-96 s on 2 cores (2026-12-07): three CPU trainings of the toy model, two side by side
@pytest.mark.slow
def test_two_trials_at_once_on_their_own_gpus_commit_the_sequential_sweep(tmp_path) -> None:
    from ltx_pipeline.ltx.autotune import SweepPlanner, TrialResult
    from tests.reference_trainer.conftest import write_dataset

    dataset = write_dataset(tmp_path / "data", [(f"clip{i}.mp4", 17, True) for i in range(4)])
    figures = sweep(tmp_path / "ws", dataset, 2)
    timed = [t for t in trial_times(tmp_path / "ws" / "optuna.db") if t["start"] is not None]
    assert all(t["gpus"] and set(t["gpus"]) <= {0, 1, 2, 3} for t in timed)
    overlapping = [(a, b) for a in timed for b in timed
                   if a["number"] < b["number"] and a["start"] < b["end"] and b["start"] < a["end"]]
    assert overlapping, timed
    assert all(not set(a["gpus"]) & set(b["gpus"]) for a, b in overlapping)
    out = figures["outputs"]
    log = (tmp_path / "ws" / "r" / "autotune.log").read_text()
    for trial in out["trials"]:
        assert trial["gpus"] and f"trial {trial['number']} on GPU {trial['gpus'][0]}:" in log
    # The sequential sweep fed these results, one at a time, runs the same configs in the same order.
    space = [out["baseline"], *[t["knobs"] for t in out["trials"]], *[p["knobs"] for p in out["pruned"]]]
    planner = SweepPlanner(space, out["baseline"], capacity_gb=out["capacity_gb"], headroom=out["headroom"],
                           per_gpu_batch=out["per_gpu_batch"])
    by_knobs = {tuple(sorted(t["knobs"].items())): t for t in out["trials"]}
    order = []
    while (knobs := planner.next_trial()) is not None:
        t = by_knobs[tuple(sorted(knobs.items()))]
        order.append(t["number"])
        planner.record(TrialResult(dict(knobs), t["outcome"], t["step_time_s"], t["peak_vram_gb"],
                                   t["validation_peak_vram_gb"], t["seconds"], t["reason"] or "",
                                   step_margin=t.get("step_margin")))
    assert order == [t["number"] for t in out["trials"]]
    assert planner.winner() == out["winner"]
    # autotune.md says how the trials shared the GPUs, from the times their Optuna trials keep.
    side = out["side_by_side"]
    first = min(t["start"] for t in timed)
    assert [(t["number"], t["gpus"]) for t in side["trials"]] == \
        [(t["number"], t["gpus"]) for t in sorted(timed, key=lambda t: (t["start"], t["number"]))]
    wall = max(t["end"] for t in timed) - first
    gpu_seconds = sum((t["end"] - t["start"]) * len(t["gpus"]) for t in timed)
    report = (tmp_path / "ws" / "r" / "autotune.md").read_text()
    assert "## Trials side by side" in report and f"Sweep wall time {wall:.1f} s" in report
    assert f"{gpu_seconds:.1f} GPU-seconds" in report and "at most 2 ran at once" in report
    assert "no two that overlapped in time shared a GPU" in report
