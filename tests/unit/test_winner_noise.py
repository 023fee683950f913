"""The winner within the measured noise (``ltx.autotune._ranking``) and what the reports say of it."""

from __future__ import annotations

import math
import re

from hypothesis import given, settings
from hypothesis import strategies as st

from ltx_pipeline.autotune._report import noise_tie, noise_words, render_markdown, winner_sentence
from ltx_pipeline.ltx.autotune import SweepPlanner, TrialResult, deltas, distance, search_space

LOW = {"quantization": "int8-quanto", "optimizer_type": "adamw8bit", "batch_size": 1,
       "enable_gradient_checkpointing": True, "gradient_accumulation_steps": 4}
SPACE = search_space("low_vram", 4, False, LOW)


def _planner() -> SweepPlanner:
    return SweepPlanner(SPACE, SPACE[0], capacity_gb=32.0, headroom=0.05, per_gpu_batch=4)


def _fit(knobs: dict, step: float, margin: float | None, peak: float = 10.0) -> TrialResult:
    return TrialResult(dict(knobs), "fit", step, peak, None, 30.0, "", step_margin=margin)


def _like(**changes: object) -> dict:
    return next(k for k in SPACE if all(k[key] == value for key, value in changes.items()))


def test_a_faster_config_within_the_noise_does_not_displace_the_nearer_one():
    p = _planner()
    near = _like(quantization="int8-quanto", optimizer_type="adamw8bit", batch_size=4)  # one knob from the plan
    far = _like(quantization=None, optimizer_type="adamw8bit", batch_size=4)  # two knobs
    p.record(_fit(SPACE[0], 1.5, 0.05))
    p.record(_fit(near, 0.45, 0.10))  # 0.45 s per optimizer step (batch 4)
    p.record(_fit(far, 0.41, 0.10))  # 0.04 s faster, within the difference's 95 % interval (+-0.061 s)
    ranking = p.ranking()
    assert ranking is not None and ranking.fastest.knobs == far and ranking.winner.knobs == near
    assert ranking.kept_nearer and 0.45 - 0.41 <= ranking.interval_s
    assert p.winner() == near and deltas(p.winner(), SPACE[0]) == {"batch_size": 4, "gradient_accumulation_steps": 1}


def test_a_speed_up_beyond_the_noise_wins_and_no_margin_means_exact():
    near = _like(quantization="int8-quanto", optimizer_type="adamw8bit", batch_size=4)
    far = _like(quantization=None, optimizer_type="adamw8bit", batch_size=4)
    for margin in (0.01, None):  # +-1 %: a 9 % speed-up is shown; None: step times taken as exact
        p = _planner()
        p.record(_fit(SPACE[0], 1.5, margin))
        p.record(_fit(near, 0.45, margin))
        p.record(_fit(far, 0.41, margin))
        ranking = p.ranking()
        assert ranking is not None and not ranking.kept_nearer and p.winner() == far
        assert noise_tie(ranking) is None


_MARGINS = st.one_of(st.none(), st.floats(min_value=0.0, max_value=0.4))


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(0, len(SPACE) - 1), st.floats(0.1, 10.0), _MARGINS), min_size=1, max_size=12,
                unique_by=lambda t: t[0]))
def test_the_winner_is_the_nearest_config_whose_step_time_the_fastest_does_not_beat_beyond_the_noise(trials):
    p = _planner()
    results = [_fit(SPACE[i], step, margin) for i, step, margin in trials]
    for r in results:
        p.record(r)
    ranking = p.ranking()
    assert ranking is not None
    objective = {id(r): p.objective(r) for r in results}
    fastest, winner = ranking.fastest, ranking.winner
    assert objective[id(fastest)] == min(objective.values())

    def tied(r: TrialResult) -> bool:
        interval = math.hypot((fastest.step_margin or 0) * objective[id(fastest)],
                              (r.step_margin or 0) * objective[id(r)])
        return objective[id(r)] - objective[id(fastest)] <= interval

    assert tied(winner)
    # Nothing tied with the fastest is nearer the plan than the winner.
    assert all(distance(r.knobs, SPACE[0]) >= distance(winner.knobs, SPACE[0]) for r in results if tied(r))
    if winner is not fastest:
        assert distance(winner.knobs, SPACE[0]) < distance(fastest.knobs, SPACE[0])
    if all(r.step_margin in (None, 0.0) for r in results):  # exact step times: the fastest, ties to the nearer
        assert objective[id(winner)] == objective[id(fastest)]


@settings(max_examples=100, deadline=None)
@given(st.floats(0.2, 5.0), st.floats(0.0, 0.3), st.floats(0.01, 0.3), st.floats(0.01, 0.3))
def test_the_reports_give_the_figures_the_winner_was_judged_on(step, gap, margin_near, margin_far):
    near = _like(quantization="int8-quanto", optimizer_type="adamw8bit", batch_size=4)
    far = _like(quantization=None, optimizer_type="adamw8bit", batch_size=4)
    p = _planner()
    p.record(_fit(SPACE[0], step * 4, 0.02))
    p.record(_fit(near, step * (1 + gap), margin_near))
    p.record(_fit(far, step, margin_far))
    ranking = p.ranking()
    assert ranking is not None
    winner = dict(ranking.winner.knobs)
    outputs = {"winner": winner, "deltas": deltas(winner, SPACE[0]), "noise_tie": noise_tie(ranking),
               "trials": [], "pruned": [], "study": "s", "storage": "optuna.db", "capacity_gb": 32.0,
               "headroom": 0.05, "limit_gb": 30.4, "per_gpu_batch": 4, "effective_batch": 4, "processes": 1}
    sentence = winner_sentence(outputs)
    markdown = render_markdown(outputs)
    if not ranking.kept_nearer:
        assert noise_words(outputs) == "" and "within the 95 %" not in sentence + markdown
        assert winner == ranking.fastest.knobs
        return
    fastest_s, winner_s, faster_s, interval_s = map(float, re.findall(
        r"measured ([\d.]+) s per optimizer step against the winner's ([\d.]+) s: ([\d.]+) s faster, within .*"
        r"\(±([\d.]+) s\)", sentence)[0])
    assert math.isclose(fastest_s, p.objective(ranking.fastest), abs_tol=5.001e-4)
    assert math.isclose(winner_s, p.objective(ranking.winner), abs_tol=5.001e-4)
    assert math.isclose(faster_s, winner_s - fastest_s, abs_tol=1.5e-3)
    # "within" holds of the measured figures themselves, not only of the rounded ones.
    assert p.objective(ranking.winner) - p.objective(ranking.fastest) <= ranking.interval_s
    assert math.isclose(interval_s, ranking.interval_s, abs_tol=5.001e-4)
    assert "Not the fastest measured" in markdown and "the baseline is fastest" not in sentence + markdown


def test_a_resumed_sweep_reads_each_trials_margin_back_and_picks_the_same_winner(tmp_path):
    """The margins are kept in the Optuna study with each result, so a sweep resumed from it ranks as the live one."""
    from ltx_pipeline.autotune import study as studies
    from ltx_pipeline.autotune._peaks import MeasuredTrialResult

    live = _planner()
    study, _ = studies.open_study(studies.storage_for(tmp_path), "r", "inputs")
    dists = studies.distributions(SPACE)
    near = _like(quantization="int8-quanto", optimizer_type="adamw8bit", batch_size=4)
    far = _like(quantization=None, optimizer_type="adamw8bit", batch_size=4)
    for knobs, step, margin in ((SPACE[0], 1.5, 0.05), (near, 0.45, 0.10), (far, 0.41, 0.10)):
        result = MeasuredTrialResult(dict(knobs), "fit", step, 10.0, 9.0, 30.0, "", step_margin=margin,
                                     peak_source="test", validation_peak_source="test")
        live.record(result)
        studies.tell_result(study, studies.ask_trial(study, knobs, dists), result, fits=True,
                            objective=live.objective(result), extra={})
    resumed = _planner()
    for _, result in studies.finished_results(study):
        resumed.record(result)
    assert [r.step_margin for r in resumed.trials] == [0.05, 0.10, 0.10]
    assert resumed.winner() == live.winner() == near


def test_each_trial_line_gives_its_step_time_with_the_interval_it_is_judged_with():
    from ltx_pipeline.autotune._report import trial_line

    record = {"number": 3, "knobs": SPACE[0], "outcome": "fit", "step_time_s": 0.4123, "step_margin": 0.118,
              "peak_vram_gb": 10.0, "validation_peak_vram_gb": 9.0, "seconds": 12.0, "reason": "",
              "peak_source": "test", "validation_peak_source": "test"}
    assert "step 0.41s ±12 % at 95 %," in trial_line(record)
    assert "step 0.41s," in trial_line({**record, "step_margin": None})  # no interval measured: none claimed
