"""When a trial's steady-state step time is known well enough to stop it.

A trial is measured, not run for a fixed count: it stops as soon as the mean of its clean step times
(steps with no validation pass or checkpoint save in them; the trainer logs one every 20 steps) is
known to within ``PRECISION`` (±3 %) at ``CONFIDENCE`` (95 %), by Student's t interval over the samples.

Two guards keep the figure honest:
- a spike (a sample more than ``SPIKE_FACTOR`` times the median of the others, e.g. a validation pass
  or a save the log did not flag) is left out, with at least three samples to judge it by;
- drift (the step time still settling, e.g. a cache or clock warming up): with four or more samples,
  when the later half's mean differs from the earlier half's by more than the precision, only the
  later half counts, so the estimate describes the steady state and not the warm-up.
A trial after the first may rest on one sample: the spread of step times is the machine's and the
trainer's, not the config's, so the relative spread the sweep's earlier trials measured (``pooled_spread``)
stands in for the one sample's own (a z interval at 95 %). Pure: samples in, a verdict out.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["CONFIDENCE", "PRECISION", "SPIKE_FACTOR", "StepTimeEstimate", "estimate_step_time", "relative_spread"]

PRECISION = 0.03
CONFIDENCE = 0.95
SPIKE_FACTOR = 1.5
# Two-sided 95 % Student's t quantiles (0.975) by degrees of freedom; 1.96 beyond the table.
_T975 = (12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160, 2.145,
         2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045,
         2.042)


@dataclass(frozen=True)
class StepTimeEstimate:
    """The step time a trial has measured so far.

    Attributes:
        known: the mean is within ``PRECISION`` at ``CONFIDENCE``: the trial may stop.
        seconds: the mean of the samples used (None with no sample).
        half_width: the interval's half width in seconds (None below two samples).
        used: how many samples the estimate rests on.
        note: what was left out and why, or why it is not known yet.
    """

    known: bool
    seconds: float | None
    half_width: float | None
    used: int
    note: str = ""


def relative_spread(samples: Sequence[float]) -> float | None:
    """Standard deviation over mean of a trial's clean step times; None below two samples."""
    values = [float(v) for v in samples if v is not None and math.isfinite(v) and v > 0]
    if len(values) < 2:
        return None
    return statistics.stdev(values) / statistics.fmean(values)


def estimate_step_time(samples: Sequence[float], *, precision: float = PRECISION,
                       pooled_spread: float | None = None) -> StepTimeEstimate:
    """Judge the clean step-time samples of a trial, in the order they were logged.

    ``pooled_spread``: the relative spread earlier trials of the sweep measured; with it, one sample is
    enough when 1.96 x that spread is within the precision.
    """
    values = [float(v) for v in samples if v is not None and math.isfinite(v) and v > 0]
    notes = []
    if len(values) >= 3:
        kept = [v for i, v in enumerate(values)
                if v <= SPIKE_FACTOR * statistics.median(values[:i] + values[i + 1:])]
        if len(kept) < len(values):
            notes.append(f"{len(values) - len(kept)} spike(s) left out")
            values = kept
    if len(values) >= 4:
        half = len(values) // 2
        early, late = statistics.fmean(values[:half]), statistics.fmean(values[half:])
        if abs(late / early - 1) > precision:
            notes.append(f"still settling ({early:.3f}s then {late:.3f}s): the later {len(values) - half} count")
            values = values[half:]
    if not values:
        return StepTimeEstimate(False, None, None, 0, "no clean step time yet")
    mean = statistics.fmean(values)
    if len(values) < 2:
        if pooled_spread is not None and 1.96 * pooled_spread <= precision:
            note = f"one sample, within ±{1.96 * pooled_spread:.1%} by the spread earlier trials measured"
            return StepTimeEstimate(True, mean, 1.96 * pooled_spread * mean, 1, "; ".join([*notes, note]))
        return StepTimeEstimate(False, mean, None, 1, "; ".join([*notes, "one sample: its spread is unknown"]))
    t = _T975[len(values) - 2] if len(values) - 2 < len(_T975) else 1.96
    half_width = t * statistics.stdev(values) / math.sqrt(len(values))
    known = half_width <= precision * mean
    if not known:
        notes.append(f"±{half_width / mean:.1%} at 95% over {len(values)} samples, not yet ±{precision:.0%}")
    return StepTimeEstimate(known, mean, half_width, len(values), "; ".join(notes))
