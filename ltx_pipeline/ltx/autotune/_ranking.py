"""Which fitting trial wins, when every step time is a measurement with noise.

A trial's step time is the mean of a few clean steps, known to a 95 % interval: the stopping rule's half
width (``_stopping.estimate_step_time``), kept relative as ``TrialResult.step_margin``. Two trials whose
objectives differ by no more than the 95 % interval of their difference (the root of the sum of both half
widths squared, as for a difference of two independent means) are not shown to differ. Among the configs
tied that way with the fastest, the one nearer the baseline (fewest knobs changed from the plan) wins, then
the faster, then the earlier: a knob of the plan is changed only for a speed-up the measurements show, and
two sweeps of the same configs whose noise reorders near-equal step times pick the same config.
A trial without a margin (a simulated cost, one sample with no spread known) counts as exact, so
without margins this is the plain rule: the fastest, ties to the nearer config, then the earlier.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Generic, Protocol, TypeVar

from ltx_pipeline.ltx.autotune._space import Knobs, distance

__all__ = ["Ranking", "difference_interval", "rank_fits"]


class _Measured(Protocol):
    """What ranking reads of a trial's result (``TrialResult`` is one)."""

    knobs: Knobs
    step_margin: float | None


R = TypeVar("R", bound=_Measured)


@dataclass(frozen=True)
class Ranking(Generic[R]):
    """The fastest measured fit and the winner, with what separates them (seconds per optimizer step)."""

    fastest: R
    winner: R
    fastest_objective: float
    winner_objective: float
    interval_s: float  # the 95 % half width of the two objectives' difference

    @property
    def kept_nearer(self) -> bool:
        """The winner is not the fastest measured: it is within the noise of it, and nearer the plan."""
        return self.winner is not self.fastest


def difference_interval(a: float, margin_a: float | None, b: float, margin_b: float | None) -> float:
    """The 95 % half width of ``b - a`` for objectives known to relative half widths ``margin_a``/``margin_b``."""
    return math.hypot((margin_a or 0.0) * a, (margin_b or 0.0) * b)


def rank_fits(fitting: list[R], objective: Callable[[R], float], baseline: Knobs) -> Ranking[R] | None:
    """The winner among ``fitting`` (in the order recorded), or None when there is none."""
    if not fitting:
        return None
    order = {id(r): i for i, r in enumerate(fitting)}
    fastest = min(fitting, key=lambda r: (objective(r), distance(r.knobs, baseline), order[id(r)]))
    best = objective(fastest)
    tied = [fastest]
    if math.isfinite(best):
        tied += [r for r in fitting if r is not fastest and math.isfinite(objective(r))
                 and objective(r) - best <= difference_interval(best, fastest.step_margin, objective(r), r.step_margin)]
    winner = min(tied, key=lambda r: (distance(r.knobs, baseline), objective(r), order[id(r)]))
    interval = (difference_interval(best, fastest.step_margin, objective(winner), winner.step_margin)
                if math.isfinite(best) else 0.0)
    return Ranking(fastest, winner, best, objective(winner), interval)
