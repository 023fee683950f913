"""plan.md's holdout-loss counts (#45): the checkpoints the trainer keeps, the rows and forward passes, the bound in
seconds from autotune's measured step, and the section's place outside the approved text.

What the measurement really does is compared in tests/reference_trainer/test_holdout_forecast.py (the toy) and
tests/phases/test_holdout_plan_and_hub.py (a whole run).
"""

from __future__ import annotations

import types
from pathlib import Path

import pytest

from ltx_pipeline.holdout.forecast import (
    NO_HOLDOUT_CAPTIONED,
    NOTHING_HELD_OUT,
    Rows,
    after_autotune,
    kept_steps,
    unavailable,
)
from ltx_pipeline.ltx.launch_checks import launch_checks
from ltx_pipeline.outputs.autotune import AutotuneOutputs
from ltx_pipeline.reports.holdout_cost import HOLDOUT_SECTION, HoldoutPlan, holdout_lines
from ltx_pipeline.reports.plan_cache import CACHE_SECTION


@pytest.mark.parametrize(("steps", "interval", "keep", "kept"), [
    (10, 5, -1, (5, 10)),
    (10, 3, -1, (3, 6, 9, 10)),  # the final save at 10 beside the interval saves
    (10, None, -1, (10,)),  # no interval: the final save only
    (10, 4, 2, (8, 10)),  # keep_last_n 2 of the saves 4, 8, 10
    (10, 5, 2, (10,)),  # 5, 10, 10 (the final save repeats the file): the last two entries are one file
    (10, 5, 1, ()),  # keep_last_n 1 deletes the final weights when steps divide the interval (facts §4.7)
    (10, 20, 1, (10,)),  # an interval past the steps: the final save only
    (7, 2, 0, (2, 4, 6, 7)),  # 0 keeps all, as -1 does
])
def test_the_checkpoints_kept_follow_the_trainers_saves_and_deletions(steps: int, interval: int | None, keep: int,
                                                                     kept: tuple[int, ...]) -> None:
    assert kept_steps(steps, interval, keep) == kept


@pytest.mark.parametrize(("steps", "interval", "keep"), [(s, i, k) for s in range(2, 13) for i in (1, 2, 3, 4)
                                                         for k in (1, 2, 3) if s % i == 0 and s // i >= k])
def test_what_the_launch_checks_say_of_keep_last_n_is_what_the_count_gives(steps: int, interval: int,
                                                                           keep: int) -> None:
    """The launch checks' words for a keep_last_n with steps a multiple of the interval (facts §4.7)."""
    config = {"optimization": {"steps": steps}, "checkpoints": {"interval": interval, "keep_last_n": keep}}
    [check] = [c for c in launch_checks(config) if c.code.startswith("keep-last-n")]
    if keep == 1:
        assert check.code == "keep-last-n-deletes-final" and kept_steps(steps, interval, keep) == ()
    else:
        assert f"only {keep - 1} distinct checkpoints survive" in check.message
        assert len(kept_steps(steps, interval, keep)) == keep - 1


def test_the_reasons_nothing_is_measured_are_the_evaluate_phases() -> None:
    from ltx_pipeline.backends.reference import ReferenceBackend
    from ltx_pipeline.backends.simulated import SimulatedBackend

    reference = ReferenceBackend()
    assert unavailable("on", reference, "lora") is None
    assert unavailable("off", reference, "lora") == "--holdout-loss off (holdout_loss: off in run.yaml)"
    assert unavailable("on", reference, "full").startswith("measured for LoRA runs only")
    simulated = SimulatedBackend.__new__(SimulatedBackend)  # the reason needs its name only
    assert unavailable("on", simulated, "lora") == ("the simulated backend trains nothing, so there is no loss "
                                                    "to measure")


def _config(tmp_path: Path, steps: int = 6, interval: int | None = 2, keep: int = -1, mode: str = "lora") -> Path:
    path = tmp_path / "config.yaml"
    path.write_text(f"model: {{training_mode: {mode}}}\noptimization: {{steps: {steps}}}\n"
                    f"checkpoints: {{interval: {'null' if interval is None else interval}, keep_last_n: {keep}}}\n")
    return path


def _ctx(holdout_loss: str = "on") -> types.SimpleNamespace:
    from ltx_pipeline.backends.reference import ReferenceBackend

    return types.SimpleNamespace(request=types.SimpleNamespace(holdout_loss=holdout_loss),
                                 backend=ReferenceBackend())


def _autotune(objective: float | None = 2.0, per_gpu_batch: int | None = 4, off: str | None = None) -> AutotuneOutputs:
    return AutotuneOutputs(off=off, baseline={}, deltas={}, patches=[], reports={}, objective=objective,
                           per_gpu_batch=per_gpu_batch, processes=1, effective_batch=per_gpu_batch)


def test_after_autotune_the_counts_and_the_bound_are_arithmetic_on_what_was_measured(tmp_path: Path) -> None:
    plan = after_autotune(_ctx(), _config(tmp_path, steps=6, interval=2), 2, 10, Rows(3, 9), _autotune(2.0, 4))
    assert plan.steps == (0, 12, 14, 16)  # the stage starts at run step 10: its checkpoints 2, 4, 6
    assert (plan.held_out, plan.training, plan.sigmas) == (3, 4, 4)  # min(4, 9) training rows
    assert plan.passes == 4 * (3 + 4) * 4
    assert plan.bound_s == pytest.approx(plan.passes * 2.0 / 4)  # seconds per optimizer step / samples per step
    lines = holdout_lines(plan)
    assert "- Forward passes: 112 = 4 checkpoints x 7 rows x 4 noise levels, one sample each" in lines
    assert "- Checkpoints: 4 = step 0 + 3 kept (steps 12, 14, 16: a save every 2 steps and the final save at step " \
           "16, all kept)" in lines
    time = next(line for line in lines if line.startswith("- Time: "))
    assert time.startswith("- Time: at most 56.0 s of forward passes, an upper bound and not a measurement: 112 "
                           "passes x 0.5 s")


def test_without_a_measured_step_the_seconds_are_not_known_and_the_section_says_why(tmp_path: Path) -> None:
    off = after_autotune(_ctx(), _config(tmp_path), 1, 0, Rows(1, 3), _autotune(None, None, off="by your choice"))
    assert off.bound_s is None and off.passes == 4 * 4 * 4
    assert next(line for line in holdout_lines(off) if line.startswith("- Time: ")).startswith(
        "- Time: not known yet: autotune does not run (off by your choice)")
    failed = after_autotune(_ctx(), _config(tmp_path), 1, 0, Rows(1, 3), _autotune(None, 1))
    assert "measured no step time" in (failed.no_time or "")


@pytest.mark.parametrize(("ctx", "mode", "rows", "reason"), [
    (_ctx("off"), "lora", Rows(1, 3), "--holdout-loss off"),
    (_ctx(), "full", Rows(1, 3), "measured for LoRA runs only"),
    (_ctx(), "lora", Rows(None, 3, NOTHING_HELD_OUT), NOTHING_HELD_OUT),
    (_ctx(), "lora", Rows(None, 3, NO_HOLDOUT_CAPTIONED), NO_HOLDOUT_CAPTIONED),
])
def test_a_run_that_measures_nothing_says_why_and_counts_nothing(tmp_path: Path, ctx: types.SimpleNamespace,
                                                                 mode: str, rows: Rows, reason: str) -> None:
    plan = after_autotune(ctx, _config(tmp_path, mode=mode), 1, 0, rows, _autotune())
    lines = holdout_lines(plan)
    assert plan.passes is None and plan.reason is not None and plan.reason.startswith(reason)
    assert lines[4].startswith(f"- Not measured: {reason}") and not any("Forward passes" in line for line in lines)


_PLAN = ("# Training plan: r1\n\n_Written by x. You approve this plan (`sha256:1`), these lines aside._\n\n"
         "## Preprocessing\n\n- a\n\n## Training Config\n\n| a | b |\n\n## Cost / Time\n\n- steps\n\n"
         "## Approve to proceed\n\nNothing heavy.\n")


def test_the_section_sits_before_the_approval_and_is_replaced_never_repeated() -> None:
    cached = CACHE_SECTION.put(_PLAN, ["## Latent cache", "", "- forecast", ""])
    first = HOLDOUT_SECTION.put(cached, holdout_lines(HoldoutPlan(reason="first")))
    second = HOLDOUT_SECTION.put(first, holdout_lines(HoldoutPlan(reason="second")))
    assert second.count("## Holdout loss") == 1 and "first" not in second and "- Not measured: second" in second
    assert second.index("## Cost / Time") < second.index("## Holdout loss") < second.index("## Approve to proceed")
    assert "## Latent cache\n\n- forecast" in second  # the cache's section stays as it was
    assert HOLDOUT_SECTION.drop(second) == cached
