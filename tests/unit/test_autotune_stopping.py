"""The trial stopping rule (``ltx.autotune.estimate_step_time``): stop once the step time is known to ±3 % at 95 %.

Synthetic step-time series as a trainer logs them (one clean sample every 20 steps): steady, noisy,
drifting while it warms up, and with a validation spike the log did not flag.
"""

from __future__ import annotations

import random

import pytest

from ltx_pipeline.ltx.autotune import PRECISION, estimate_step_time


def test_one_sample_is_never_enough_and_two_equal_ones_are() -> None:
    assert not estimate_step_time([]).known and estimate_step_time([]).seconds is None
    one = estimate_step_time([3.4])
    assert not one.known and one.seconds == 3.4 and "spread is unknown" in one.note
    two = estimate_step_time([3.4, 3.4])
    assert two.known and two.seconds == pytest.approx(3.4) and two.used == 2


@pytest.mark.parametrize("spread", [0.002, 0.01, 0.03])
def test_noisy_series_stop_once_the_interval_is_within_3_percent(spread: float) -> None:
    rng = random.Random(7)
    samples = [3.0 * (1 + rng.gauss(0, spread)) for _ in range(40)]
    stop = next(n for n in range(1, 41) if estimate_step_time(samples[:n]).known)
    estimate = estimate_step_time(samples[:stop])
    assert estimate.half_width is not None and estimate.half_width <= PRECISION * estimate.seconds
    assert estimate.seconds == pytest.approx(3.0, rel=PRECISION)
    # more noise needs more samples before the rule lets the trial stop
    assert stop == 2 if spread <= 0.002 else stop >= 3


def test_a_very_noisy_series_is_not_known_after_a_few_samples() -> None:
    estimate = estimate_step_time([3.0, 3.9, 2.4, 3.6])
    assert not estimate.known and "not yet ±3%" in estimate.note


def test_a_drifting_series_is_judged_on_its_settled_half() -> None:
    warming = [4.6, 4.1, 3.5, 3.02, 3.0, 2.98]  # a cache warming up, then steady at 3.0
    estimate = estimate_step_time(warming)
    assert "still settling" in estimate.note and estimate.used == 3
    assert estimate.known and estimate.seconds == pytest.approx(3.0, rel=0.01)


def test_a_validation_spike_is_left_out() -> None:
    spiky = [3.0, 3.02, 41.0, 2.99]  # a step whose time includes an unflagged validation pass
    estimate = estimate_step_time(spiky)
    assert "1 spike(s) left out" in estimate.note and estimate.used == 3
    assert estimate.known and estimate.seconds == pytest.approx(3.0, rel=0.01)


def test_one_sample_is_enough_when_earlier_trials_measured_a_small_spread() -> None:
    from ltx_pipeline.ltx.autotune import relative_spread

    assert relative_spread([3.0]) is None and relative_spread([3.0, 3.0]) == 0.0
    exact = estimate_step_time([3.4], pooled_spread=0.0)
    assert exact.known and exact.seconds == 3.4 and "spread earlier trials measured" in exact.note
    assert estimate_step_time([3.4], pooled_spread=0.01).known  # ±2.0 % at 95 %
    assert not estimate_step_time([3.4], pooled_spread=0.02).known  # ±3.9 %: a second line is needed
