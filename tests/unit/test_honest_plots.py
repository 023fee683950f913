"""Plots that do not mislead (#43, point 7): checked on the figure each public function saved.

Before the fix ``loss.png``'s smoothed curve started at a first-point outlier and stayed above every raw point
for dozens of steps (a plain EMA gives the first point the weight ``0.8**n``), and ``autotune.png`` cropped
its step-time axis to the points (0.580-0.587 s: 1 % looked like a cliff) and called the toy's scaled GiB
"GB, measured".
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ltx_pipeline.reports.summary import plot_loss

pytest.importorskip("matplotlib")



def _line(fig: Any, label: str) -> list[float]:
    [line] = [line for line in fig.axes[0].lines if line.get_label() == label]
    return [float(y) for y in line.get_ydata()]


# -- loss.png: the smoothed curve --------------------------------------------------------------------

# The demo's logged losses (steps 2, 4, ... 60): a first-point outlier, then noise around 7.
DEMO_LOSSES = [69.03, 8.99, 9.31, 7.83, 4.32, 12.0, 3.58, 9.65, 3.4, 12.53, 11.54, 8.78, 9.27, 6.66, 8.0, 4.19,
               4.68, 3.17, 6.35, 23.83, 2.39, 6.54, 3.24, 10.5, 2.8, 9.03, 2.5, 3.27, 14.18, 2.66]


def _smoothed(tmp_path: Any, saved: list[Any], losses: list[float]) -> list[float]:
    saved.clear()
    metrics = [{"stage": 1, "step": 2 * (i + 1), "loss": v, "step_time_s": 1.0, "clean": True}
               for i, v in enumerate(losses)]
    plot_loss(metrics, tmp_path / "loss.png", workspace=tmp_path)
    [fig] = saved
    assert _line(fig, "stage 1 loss") == losses
    return _line(fig, "stage 1 smoothed")


def test_the_demos_smoothed_loss_leaves_its_first_outlier_within_five_points(tmp_path, saved_figures) -> None:
    smoothed = _smoothed(tmp_path, saved_figures, DEMO_LOSSES)
    rest = DEMO_LOSSES[1:]
    assert smoothed[0] == pytest.approx(DEMO_LOSSES[0])  # one point seen: its own value, as TensorBoard draws it
    # From the fifth point on the curve runs among the raw points, not above all of them (the old curve stayed
    # above 15 until the 10th point and above the median until the 20th).
    assert all(value <= max(rest[: i + 1]) for i, value in enumerate(smoothed[1:]) if i >= 4)
    assert smoothed[10] < 12.0


@settings(max_examples=12, deadline=None)
@given(length=st.integers(12, 300), ratio=st.floats(2.0, 10.0), low=st.floats(0.01, 5.0),
       spread=st.floats(0.1, 2.0), seed=st.integers(0, 2**16))
def test_a_first_point_outlier_weighs_less_than_the_rest_after_five_points(
        tmp_path_factory, length, ratio, low, spread, seed) -> None:
    """Property: losses in [low, high] after a first point ``ratio`` times ``high``: each smoothed value is a
    mean of the points seen so far (never outside their range), and from the fifth point on it is below ``high``
    plus a tenth of the outlier's excess, so the curve no longer sits on top of every raw point."""
    import random

    from matplotlib.figure import Figure

    rng = random.Random(seed)
    high = low * (1 + spread)
    losses = [high * ratio] + [rng.uniform(low, high) for _ in range(length - 1)]
    seen: list[Any] = []

    def spy(self: Any, *args: Any, **kwargs: Any) -> None:
        seen.append(self)  # the figure as drawn; not encoded to PNG, which is most of a plot's time

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(Figure, "savefig", spy)
        smoothed = _smoothed(tmp_path_factory.mktemp("loss"), seen, losses)
    for index, value in enumerate(smoothed):
        so_far = losses[: index + 1]
        assert min(so_far) - 1e-9 <= value <= max(so_far) + 1e-9
        if index >= 5:
            assert value <= high + 0.1 * (losses[0] - high), (index, value, losses[:8])


# -- autotune.png ------------------------------------------------------------------------------------

KNOBS = {"quantization": None, "optimizer_type": "adamw", "batch_size": 1, "gradient_accumulation_steps": 1,
         "enable_gradient_checkpointing": True}


def _trial(number: int, step: float, peak: float, source: str) -> dict[str, Any]:
    return {"number": number, "knobs": {**KNOBS, "batch_size": number + 1}, "outcome": "fit", "fits": True,
            "step_time_s": step, "peak_vram_gb": peak, "validation_peak_vram_gb": peak, "peak_source": source,
            "validation_peak_source": source, "seconds": 60.0}


def _sweep(trials: list[dict[str, Any]]) -> dict[str, Any]:
    return {"study": "r1-autotune", "storage": "optuna.db", "capacity_gb": 31.8, "limit_gb": 30.2, "headroom": 0.05,
            "per_gpu_batch": 1, "processes": 1, "effective_batch": 1, "winner": trials[0]["knobs"], "deltas": {},
            "objective": trials[0]["step_time_s"], "pruned": [], "trials": trials}


def test_autotune_axes_start_at_zero_and_name_the_toys_scaled_gib(tmp_path, saved_figures) -> None:
    from ltx_pipeline.autotune._report import write_reports

    source = "reference trainer accounting (scaled x 30600)"
    # Three step times within 1.2 % of each other: the old axis spanned 0.580-0.587 s.
    write_reports(tmp_path, tmp_path, _sweep([_trial(0, 0.580, 29.7, source), _trial(1, 0.584, 29.9, source),
                                              _trial(2, 0.587, 30.1, source)]))
    [fig] = saved_figures
    ax = fig.axes[0]
    assert ax.get_ylim()[0] == 0 and ax.get_ylim()[1] >= 0.587
    assert ax.get_xlim()[0] == 0 and ax.get_xlim()[1] >= 31.8
    label = ax.get_xlabel()
    assert "GiB" in label and "GB," not in label and "measured" not in label
    assert "reference_memory_scale" in label  # the run.yaml field that scales the toy's bytes
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert "capacity 31.8 GiB" in legend and any("30.2 GiB" in t for t in legend)


def test_a_gpu_measured_sweep_says_measured_gib(tmp_path, saved_figures) -> None:
    from ltx_pipeline.autotune._report import write_reports

    write_reports(tmp_path, tmp_path, _sweep([_trial(0, 2.1, 60.0, "vram sampler (nvml)"),
                                              _trial(1, 1.5, 70.5, "trainer statistic")]))
    [fig] = saved_figures
    assert fig.axes[0].get_xlabel() == "peak VRAM, training or validation (GiB, measured)"
    assert fig.axes[0].get_ylim()[0] == 0


def test_step_times_by_trial_start_at_zero(tmp_path, saved_figures) -> None:
    from ltx_pipeline.autotune._report import write_reports

    trials = [{**_trial(i, 0.58 + i / 1000, 1.0, "x"), "peak_vram_gb": None, "validation_peak_vram_gb": None,
               "peak_source": None, "validation_peak_source": None, "assumed_fit": True,
               "memory_note": "memory not measured"} for i in range(3)]
    write_reports(tmp_path, tmp_path, _sweep(trials))
    [fig] = saved_figures
    assert fig.axes[0].get_xlabel() == "trial" and fig.axes[0].get_ylim()[0] == 0
