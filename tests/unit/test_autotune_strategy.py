"""The autotune sweep's pure decisions: space per tier, pruning, order, winner, and the benchmark figures."""

from __future__ import annotations

import itertools
import math
import random
from pathlib import Path

import pytest

from ltx_pipeline.backends.surface import CostSurface, load_surface
from ltx_pipeline.ltx.autotune import (
    SweepPlanner,
    TrialResult,
    batch_candidates,
    deltas,
    distance,
    exhaustive_optimum,
    needs_no_more_memory,
    search_space,
    simulate_sweep,
    skill_greedy,
    trial_cost,
)
from ltx_pipeline.ltx.tiers import classify_tier

SURFACES = Path(__file__).resolve().parents[2] / "benchmarks" / "surfaces"
LOW = {"quantization": "int8-quanto", "optimizer_type": "adamw8bit", "batch_size": 1,
       "enable_gradient_checkpointing": True, "load_text_encoder_in_8bit": True}
STD = {"quantization": None, "optimizer_type": "adamw", "batch_size": 1, "enable_gradient_checkpointing": True}


def knobs(q="int8-quanto", o="adamw8bit", b=1, c=True, e=1) -> dict:
    return {"quantization": q, "optimizer_type": o, "batch_size": b, "enable_gradient_checkpointing": c,
            "gradient_accumulation_steps": e // b}


def result(k, outcome="fit", step=5.0, peak=20.0, vpeak=None, seconds=100.0) -> TrialResult:
    fitted = outcome in ("fit", "over_headroom", "nan")
    return TrialResult(k, outcome, step if fitted else None, peak if fitted else None, vpeak, seconds, "")


def planner(base="low_vram", e=1, capacity=32.0, headroom=0.05, multi=False, baseline=None) -> SweepPlanner:
    baseline = baseline or (LOW if base == "low_vram" else STD)
    space = search_space(base, e, multi, baseline)
    return SweepPlanner(space, space[0], capacity_gb=capacity, headroom=headroom, per_gpu_batch=e)


# --- search space ---------------------------------------------------------------------------------


def test_low_vram_space_varies_quantization_optimizer_and_batch_with_checkpointing_on():
    space = search_space("low_vram", 4, False, LOW)
    assert space[0] == knobs(e=4)
    assert len(space) == 12
    assert {(k["quantization"], k["optimizer_type"]) for k in space} == set(
        itertools.product(["int8-quanto", None], ["adamw8bit", "adamw"]))
    assert {k["batch_size"] for k in space} == {1, 2, 4}
    assert all(k["enable_gradient_checkpointing"] for k in space)
    assert all(k["batch_size"] * k["gradient_accumulation_steps"] == 4 for k in space)
    assert [distance(k, space[0]) for k in space] == sorted(distance(k, space[0]) for k in space)


def test_standard_space_varies_checkpointing_and_batch_only():
    space = search_space("standard", 4, False, STD)
    assert space[0] == knobs(None, "adamw", e=4)
    assert len(space) == 6
    assert {(k["quantization"], k["optimizer_type"]) for k in space} == {(None, "adamw")}
    assert {(k["batch_size"], k["enable_gradient_checkpointing"]) for k in space} == set(
        itertools.product([1, 2, 4], [True, False]))


@pytest.mark.parametrize(("e", "batches"),
                         [(1, {1}), (2, {1, 2}), (3, {1, 3}), (4, {1, 2, 4}), (6, {1, 2, 3, 6}), (8, {1, 2, 4, 8})])
def test_batch_size_only_when_it_divides_the_effective_batch(e, batches):
    """Issue 19, case 5: every divisor of E is a candidate (3 and 6 for E = 6), never a fixed list."""
    space = search_space("low_vram", e, False, LOW)
    assert {k["batch_size"] for k in space} == batches
    assert all(k["batch_size"] * k["gradient_accumulation_steps"] == e for k in space)


@pytest.mark.parametrize(("e", "max_batch", "batches"), [(8, 1, {1}), (8, 3, {1, 2}), (6, 3, {1, 2, 3}),
                                                         (6, 100, {1, 2, 3, 6}), (4, None, {1, 2, 4})])
def test_batch_sizes_stay_within_what_the_dataset_feeds_each_process(e, max_batch, batches):
    """Issue 19, case 1: 6 samples over 4 processes feed batch 1 only; batch 2 would give zero batches."""
    assert set(batch_candidates(e, multi_bucket=False, max_batch=max_batch)) == batches
    space = search_space("standard", e, False, STD, max_batch=max_batch)
    assert {k["batch_size"] for k in space} == batches


def test_multi_bucket_plans_keep_batch_one():
    for base, baseline in (("low_vram", LOW), ("standard", STD)):
        space = search_space(base, 4, True, baseline)
        assert {(k["batch_size"], k["gradient_accumulation_steps"]) for k in space} == {(1, 4)}
    assert len(search_space("low_vram", 4, True, LOW)) == 4


def test_unknown_base_and_bad_effective_batch_are_refused():
    with pytest.raises(ValueError, match="unknown base"):
        search_space("tiny", 1, False, LOW)
    with pytest.raises(ValueError, match="at least 1"):
        search_space("low_vram", 0, False, LOW)


def test_memory_order_along_every_knob():
    base = knobs()
    for hungrier in (knobs(q=None), knobs(o="adamw"), knobs(b=2, e=2), knobs(c=False)):
        assert needs_no_more_memory(base, hungrier)
        assert not needs_no_more_memory(hungrier, base)
    # Incomparable: one knob up, another down.
    assert not needs_no_more_memory(knobs(q=None), knobs(o="adamw"))
    assert not needs_no_more_memory(knobs(o="adamw"), knobs(q=None))
    assert needs_no_more_memory(base, base)
    assert distance(knobs(q=None, o="adamw", b=2, e=2), base) == 3


# --- planner: objective, fit, pruning -------------------------------------------------------------


def test_objective_is_optimizer_step_time_at_the_planned_effective_batch():
    p = planner(e=4)
    assert p.objective(result(knobs(b=1, e=4), step=2.0)) == pytest.approx(8.0)
    assert p.objective(result(knobs(b=4, e=4), step=2.6)) == pytest.approx(2.6)
    assert p.objective(result(knobs(), outcome="oom_training")) == math.inf


def test_baseline_is_tried_first():
    p = planner()
    assert p.next_trial() == knobs()


def test_a_fit_prunes_everything_needing_no_more_memory():
    p = planner(capacity=140.0)
    p.record(result(knobs(), step=6.0, peak=25.0))
    top = knobs(q=None, o="adamw")
    assert p.next_trial() == top  # plenty of room: the most aggressive config first
    p.record(result(top, step=4.5, peak=50.0))
    assert p.next_trial() is None
    assert {(x.knobs["quantization"], x.knobs["optimizer_type"]) for x in p.pruned} == {
        (None, "adamw8bit"), ("int8-quanto", "adamw")}
    assert all("which fits, so it is no faster than the best" in x.reason for x in p.pruned)
    assert p.winner() == top
    assert deltas(p.winner(), knobs()) == {"quantization": None, "optimizer_type": "adamw"}


def test_an_oom_prunes_everything_needing_at_least_its_memory():
    p = planner(e=4)
    p.record(result(knobs(e=4), peak=25.0))
    p.record(result(knobs(q=None, e=4), outcome="oom_training"))
    unquantized = [x for x in p.pruned if x.knobs["quantization"] is None]
    assert len(unquantized) == 5  # every other unquantized config: adamw and/or larger batches
    assert all("ran out of memory in a training step" in x.reason for x in unquantized)
    assert all(k["quantization"] == "int8-quanto" for k in p.remaining())


def test_validation_only_oom_prunes_its_up_set_only():
    p = planner()
    p.record(result(knobs(), peak=25.0))
    p.record(result(knobs(q=None), outcome="oom_validation"))
    assert [x.knobs for x in p.pruned] == [knobs(q=None, o="adamw")]
    assert "ran out of memory in validation" in p.pruned[0].reason
    assert p.remaining() == [knobs(o="adamw")]


def test_nan_and_crash_mark_only_that_config_unusable():
    p = planner(capacity=140.0)
    p.record(result(knobs(), step=6.0, peak=25.0))
    p.record(result(knobs(q=None, o="adamw"), outcome="nan", step=4.0, peak=50.0))
    p.record(result(knobs(o="adamw"), outcome="crash"))
    assert p.pruned == []  # neither says anything about memory
    assert p.next_trial() == knobs(q=None)
    p.record(result(knobs(q=None), outcome="crash"))
    assert p.next_trial() is None
    assert p.best().knobs == knobs()  # the NaN run was faster but is never the winner
    assert p.winner() == knobs()


@pytest.mark.parametrize("outcome", ["oom_training", "oom_validation", "crash", "nan", "over_headroom"])
def test_a_failing_baseline_stops_the_sweep_with_nothing_carried(outcome):
    p = planner(e=4)
    p.record(result(knobs(e=4), outcome=outcome, peak=31.5))
    assert p.baseline_failed
    assert p.next_trial() is None
    assert p.best() is None
    assert p.winner() == knobs(e=4)
    assert deltas(p.winner(), LOW | {"gradient_accumulation_steps": 4}) == {}
    assert len(p.pruned) == 11 and all("baseline" in x.reason for x in p.pruned)


def test_headroom_a_run_at_97_percent_is_not_a_fit():
    p = planner(capacity=32.0, headroom=0.05)
    p.record(result(knobs(), peak=20.0))
    at_97 = result(knobs(o="adamw"), peak=32.0 * 0.97)
    assert not p.fits(at_97)
    p.record(at_97)
    assert p.best().knobs == knobs()
    assert knobs(q=None, o="adamw") in [x.knobs for x in p.pruned]  # treated as a memory failure
    assert "headroom" in next(x.reason for x in p.pruned if x.knobs == knobs(q=None, o="adamw"))
    assert p.fits(result(knobs(), peak=32.0 * 0.95))
    assert planner(capacity=32.0, headroom=0.02).fits(result(knobs(), peak=32.0 * 0.97))
    # The validation peak counts as much as the training peak.
    assert not p.fits(result(knobs(), peak=20.0, vpeak=31.0))


def test_ties_in_the_objective_go_to_the_config_closer_to_the_baseline():
    p = planner("standard", e=2, capacity=80.0)
    base = knobs(None, "adamw", e=2)
    p.record(result(base, step=2.5, peak=50.0))  # 2.5 s x accumulation 2 = 5.0 s per optimizer step
    p.record(result(knobs(None, "adamw", b=2, c=False, e=2), step=4.0, peak=70.0))  # 4.0 s, two knobs away
    p.record(result(knobs(None, "adamw", b=2, e=2), step=4.0, peak=60.0))  # 4.0 s, one knob away
    assert p.best().knobs == knobs(None, "adamw", b=2, e=2)
    assert deltas(p.winner(), base) == {"batch_size": 2, "gradient_accumulation_steps": 1}
    tied = planner("standard", e=2, capacity=80.0)
    tied.record(result(knobs(None, "adamw", b=2, e=2), step=5.0, peak=60.0))  # 5.0 s per optimizer step
    tied.record(result(base, step=2.5, peak=50.0))  # also 5.0 s: the baseline wins the tie
    assert tied.winner() == base


def test_tight_memory_tries_the_least_aggressive_change_first():
    p = planner(capacity=32.0)
    p.record(result(knobs(), peak=28.0))
    assert distance(p.next_trial(), knobs()) == 1


def test_recording_a_config_outside_the_space_or_twice_is_refused():
    p = planner()
    p.record(result(knobs(), peak=20.0))
    with pytest.raises(ValueError, match="already recorded"):
        p.record(result(knobs(), peak=20.0))
    with pytest.raises(ValueError, match="not in the search space"):
        p.record(result(knobs(b=2, e=1)))


# --- simulated trials and the benchmark figures ---------------------------------------------------


def _surface(points, mib=32 * 1024, load=100.0, val=30.0) -> CostSurface:
    return CostSurface.model_validate({"gpu": {"name": "test", "memory_mib": mib}, "load_time_s": load,
                                       "validation_time_s": val, "points": points})


def _point(k, step, peak, vpeak=None, **extra):
    return {"knobs": {n: k[n] for n in ("quantization", "optimizer_type", "batch_size",
                                        "enable_gradient_checkpointing")},
            "step_time_s": step, "peak_vram_gb": peak, "validation_peak_vram_gb": vpeak, **extra}


def test_trial_cost_charges_what_each_outcome_costs():
    s = _surface([_point(knobs(), 6.0, 25.0, 26.0), _point(knobs(o="adamw"), 5.0, 26.0, 33.0),
                  _point(knobs(b=2, e=2), 8.0, 30.8), _point(knobs(q=None), 4.0, 28.0, loss_nan=True),
                  _point(knobs(q=None, b=2, e=2), 4.0, 28.0, crash="boom")])
    fit = trial_cost(s, knobs(e=2), steps=20, validations=1)
    assert (fit.outcome, fit.seconds) == ("fit", pytest.approx(100 + 30 + 20 * 6.0 * 2))
    assert trial_cost(s, knobs(e=2), steps=50, validations=2).seconds == pytest.approx(100 + 60 + 50 * 12.0)
    val_oom = trial_cost(s, knobs(o="adamw"), steps=20, validations=1)
    assert (val_oom.outcome, val_oom.seconds) == ("oom_validation", pytest.approx(130))
    train_oom = trial_cost(s, knobs(q=None, o="adamw"), steps=20, validations=1)
    assert (train_oom.outcome, train_oom.seconds) == ("oom_training", pytest.approx(130 + 8.0))
    assert trial_cost(s, knobs(b=2, e=2), steps=20, validations=1).outcome == "over_headroom"
    nan = trial_cost(s, knobs(q=None), steps=50, validations=1)
    assert (nan.outcome, nan.seconds) == ("nan", pytest.approx(130 + 20 * 4.0))
    crash = trial_cost(s, knobs(q=None, b=2, e=2), steps=20, validations=1)
    assert (crash.outcome, crash.reason) == ("crash", "boom")


def test_skill_stops_at_a_quantization_oom_and_never_tries_adamw():
    s = _surface([_point(knobs(), 6.0, 25.0), _point(knobs(o="adamw"), 5.8, 26.0)])
    skill = skill_greedy(s, LOW, 1, 0.05)
    assert (skill["trials_run"], skill["trials_oom"]) == (2, 1)
    assert skill["chosen"] == knobs()
    space = search_space("low_vram", 1, False, LOW)
    sweep = simulate_sweep(s, space, space[0], headroom=0.05, per_gpu_batch=1)
    assert sweep["chosen"] == knobs(o="adamw")
    assert sweep["objective"] == exhaustive_optimum(s, space, 0.05, 1)[1]


def _bench(path: Path):
    surface = load_surface(path)
    tier, _ = classify_tier([surface.gpu.memory_mib])
    e, multi = surface.per_gpu_batch, "multibucket" in path.name
    space = search_space(tier.base, e, multi, LOW if tier.base == "low_vram" else STD)
    optimum = exhaustive_optimum(surface, space, 0.05, e)
    sweep = simulate_sweep(surface, space, space[0], headroom=0.05, per_gpu_batch=e)
    skill = skill_greedy(surface, space[0], e, 0.05, multi_bucket=multi)
    return surface, space, optimum, sweep, skill


BENCH = sorted(SURFACES.glob("*.yaml"))


def test_the_bench_surfaces_cover_the_tiers_stories():
    names = {p.stem for p in BENCH}
    assert {"rtx5090_32gb", "a6000_48gb", "l40s_48gb", "h100_80gb", "h200_141gb", "a40_48gb_multibucket"} <= names
    outcomes = {p.stem: {trial_cost(load_surface(p), k, steps=1, validations=1).outcome for k in _bench(p)[1]}
                for p in BENCH}
    assert "oom_training" in outcomes["rtx5090_32gb"]
    assert "oom_validation" in outcomes["l40s_48gb"]
    assert "over_headroom" in outcomes["a6000_48gb"]
    assert outcomes["h200_141gb"] == {"fit"}
    assert sum(1 for p in BENCH if _bench(p)[4]["objective"] == _bench(p)[2][1]) >= 2


@pytest.mark.parametrize("path", BENCH, ids=lambda p: p.stem)
def test_sweep_never_misses_the_optimum_and_spends_no_more_than_the_skill(path):
    surface, space, (best, objective), sweep, skill = _bench(path)
    assert best is not None and math.isfinite(objective)
    assert sweep["objective"] == pytest.approx(objective)
    assert sweep["chosen"] == best
    for figures in (sweep, skill):
        assert figures["trials_run"] >= 1 and figures["trial_seconds"] > 0
        assert 0 <= figures["trials_oom"] <= figures["trials_run"]
    assert sweep["trials_run"] + len(sweep["pruned"]) == len(space)
    if skill["objective"] == pytest.approx(objective):
        assert sweep["trial_seconds"] <= skill["trial_seconds"]


def _random_surface(rng: random.Random, base: str, e: int) -> CostSurface:
    """A surface whose memory and speed grow together along every knob, as the planner assumes."""
    weight = {"int8-quanto": rng.uniform(15, 25), None: rng.uniform(30, 45)}
    opt = {"adamw8bit": 0.3, "adamw": rng.uniform(0.5, 3)}
    act = {True: rng.uniform(0.5, 8), False: rng.uniform(8, 60)}
    slow = {"q": rng.uniform(1.1, 1.3), "o": rng.uniform(1.0, 1.06), "c": rng.uniform(1.15, 1.35)}
    capacity = rng.choice([32, 48, 80, 141])
    batch_exponent, validation_extra = rng.uniform(0.1, 0.3), rng.uniform(2, 8)
    points = []
    for k in search_space(base, e, False, LOW if base == "low_vram" else STD):
        activations = act[k["enable_gradient_checkpointing"]] * k["batch_size"]
        peak = weight[k["quantization"]] + opt[k["optimizer_type"]] + 2 + activations
        if peak > capacity:
            continue
        step = (1.0 * (slow["q"] if k["quantization"] else 1) * (slow["o"] if k["optimizer_type"] == "adamw8bit" else 1)
                * (slow["c"] if k["enable_gradient_checkpointing"] else 1) * k["batch_size"] ** batch_exponent)
        vpeak = weight[k["quantization"]] + validation_extra
        points.append(_point(k, round(step, 4), round(peak, 2), round(vpeak, 2)))
    return _surface(points or [_point(knobs(), 1.0, 999.0)], mib=capacity * 1024)


def test_on_random_monotone_surfaces_the_sweep_always_finds_the_exhaustive_optimum():
    rng = random.Random(5)
    for _ in range(150):
        base, e = rng.choice(["low_vram", "standard"]), rng.choice([1, 2, 4])
        surface = _random_surface(rng, base, e)
        space = search_space(base, e, False, LOW if base == "low_vram" else STD)
        best, objective = exhaustive_optimum(surface, space, 0.05, e)
        sweep = simulate_sweep(surface, space, space[0], headroom=0.05, per_gpu_batch=e)
        assert sweep["chosen"] == best
        if best is not None:
            assert sweep["objective"] == pytest.approx(objective)
        assert sweep["trials_run"] + len(sweep["pruned"]) == len(space)


def test_a_surface_file_from_before_the_rename_reads_its_per_gpu_batch(tmp_path: Path) -> None:
    """Surface files once named the per-GPU batch ``effective_batch``: the same value, under its own name."""
    text = (SURFACES / "h100_80gb.yaml").read_text(encoding="utf-8")
    assert "\nper_gpu_batch: 2\n" in text
    old = tmp_path / "old.yaml"
    old.write_text(text.replace("\nper_gpu_batch: 2\n", "\neffective_batch: 2\n"), encoding="utf-8")
    assert load_surface(old).per_gpu_batch == load_surface(SURFACES / "h100_80gb.yaml").per_gpu_batch == 2
