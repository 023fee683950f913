"""The autotune sweep's decisions: which trial next, what a result settles, and the winner.

Owns the pure logic of issue 5's sweep (no Optuna, no processes): the objective, the fit test with
headroom, pruning by the memory order of ``autotune_space`` and the order of trials. The phase that
runs trials feeds each result to ``SweepPlanner.record`` and asks ``next_trial`` until it is None.

What a result settles, without running anything:
- a config that did not fit for memory (OOM in training or validation, or over the headroom) settles
  every config needing at least its memory: they would not fit either;
- a config that fits settles every config needing no more memory: they fit too, but memory and
  speed move together along every knob (quantization off, adamw, checkpointing off and a bigger
  batch are all faster and hungrier), so none of them is faster than it;
- NaN loss and crashes mark only that config unusable: they say nothing about memory.

Order of trials (to spend the fewest GPU seconds). The trials no strategy can avoid are the fastest
fitting configs (the maximal fits: nothing settles them but their own run) and the cheapest
failures (the minimal non-fits, likewise); anything else is waste. A fit costs a full trial, an
OOM only the load, the step-0 validation and one step, so guessing "fits" wrongly is cheap and
guessing "fails" wrongly is dear. The planner therefore predicts each candidate's peak memory from
the measured fits (a growth factor per step up each knob: ``GROWTH_PRIOR``, replaced by what pairs
of trials differing in one knob measure, and raised by failures), then:
1. among candidates predicted to fit, runs the most aggressive first (the one whose fit settles the
   most others: its whole down-set);
2. then among those predicted not to fit, the least aggressive first (whose failure settles the
   most others: its whole up-set), because each of them is either a needed minimal failure or a fit
   that settles what is below it.
Ties go to the candidate closer to the baseline, then to the space's order.

The winner (``_ranking``): the fastest fit, unless a config nearer the baseline is within the measured
noise of it (the 95 % interval of their difference): a knob of the plan changes only for a speed-up shown.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Literal

from ltx_pipeline.ltx.autotune._ranking import Ranking, rank_fits
from ltx_pipeline.ltx.autotune._space import SPACE_KEYS, Knobs, distance, knob_steps, needs_no_more_memory, normalize

__all__ = ["GROWTH_PRIOR", "MISS_TOLERANCE", "VALIDATION_KNOBS", "Outcome", "Pruned", "Ranking", "SweepPlanner",
           "TrialResult", "deltas", "format_knobs", "prediction_miss", "validation_key"]

Outcome = Literal["fit", "oom_training", "oom_validation", "nan", "crash", "over_headroom"]
MEMORY_FAILURES = ("oom_training", "oom_validation", "over_headroom")
# Assumed peak-memory factor per step up each knob, until a pair of trials measures it. Only the
# order of trials depends on these, never what is pruned. A LoRA peak is dominated by the
# transformer's weights, which quantization off doubles (int8 -> bf16); LoRA optimizer states are
# small (fp32 AdamW over 8-bit: a few percent); a batch doubling adds one more sample's
# checkpointed activations; checkpointing off keeps every layer's activations.
GROWTH_PRIOR = {"quantization": 1.6, "optimizer_type": 1.03, "batch_size": 1.15,
                "enable_gradient_checkpointing": 1.5}


# Of the swept knobs, only these change the step-0 validation pass's memory. That pass runs before the
# first optimizer step (facts: trainer.train() validates at step 0, then trains), so no optimizer state
# exists yet (AdamW and its 8-bit variant allocate their moments lazily, at the first step); it runs
# under no_grad at its own dims with one prompt at a time, so the training batch size and gradient
# checkpointing (which only changes what backward keeps) never reach it. What it holds is the model:
# the weights, which quantization changes. So trials with the same quantization share one validation
# figure, and a validation over the limit rules out every config with that quantization.
VALIDATION_KNOBS = ("quantization",)


# A training whose peak memory differs from what the sweep predicted for its config by more than this
# share is a miss of the memory model, recorded against it (the study keeps every miss).
MISS_TOLERANCE = 0.10


def prediction_miss(predicted_gb: float | None, measured_gb: float | None,
                    tolerance: float = MISS_TOLERANCE) -> float | None:
    """The relative error of a memory prediction when it is a miss (beyond ``tolerance``), else None."""
    if not predicted_gb or measured_gb is None:
        return None
    error = measured_gb / predicted_gb - 1
    return error if abs(error) > tolerance else None


def validation_key(knobs: Knobs) -> tuple[Any, ...]:
    """What the step-0 validation memory of a config depends on, among the swept knobs."""
    return tuple(knobs.get(k) for k in VALIDATION_KNOBS)


@dataclass
class TrialResult:
    """What one trial measured. ``step_time_s`` is the micro-step (one batch) time."""

    knobs: Knobs
    outcome: Outcome
    step_time_s: float | None
    peak_vram_gb: float | None
    validation_peak_vram_gb: float | None
    seconds: float
    reason: str = ""
    # Relative 95 % half width of the step time (0.03: +-3 %), from the stopping rule's interval; None when
    # not measured (simulated costs, one sample with no spread known): then it counts as exact.
    step_margin: float | None = None

    @property
    def peak_gb(self) -> float | None:
        """Highest of the training and validation peaks, None when neither was measured."""
        known = [p for p in (self.peak_vram_gb, self.validation_peak_vram_gb) if p is not None]
        return max(known) if known else None


@dataclass
class Pruned:
    """A config settled without running it, and why."""

    knobs: Knobs
    reason: str


def format_knobs(knobs: Knobs) -> str:
    """Short one-line form of a config, as the trainer spells the values."""
    check = "on" if knobs.get("enable_gradient_checkpointing") else "off"
    return (f"{{quantization: {knobs.get('quantization') or 'null'}, optimizer_type: {knobs.get('optimizer_type')}, "
            f"batch_size: {knobs.get('batch_size')}, gradient_checkpointing: {check}}}")


def deltas(winner: Knobs, baseline: Knobs) -> dict[str, Any]:
    """The knobs (with ``gradient_accumulation_steps``) on which ``winner`` differs from ``baseline``."""
    return {k: winner[k] for k in SPACE_KEYS if k in winner and winner[k] != baseline.get(k)}


def _key(knobs: Knobs) -> tuple[Any, ...]:
    return tuple(knobs.get(k) for k in SPACE_KEYS)


class SweepPlanner:
    """Chooses the sweep's trials one at a time and settles what each result implies.

    Args:
        space: every config the sweep may try (``autotune_space.search_space``), baseline first.
        baseline: the plan's knobs; it must be in ``space``.
        capacity_gb: per-GPU memory in the trainer's GB.
        headroom: share of capacity kept free; a config fits only at or below capacity x (1 - headroom).
        per_gpu_batch: the plan's per-GPU batch E: batch x accumulation on one process (the effective
            batch, over every process, is E x processes).
    """

    def __init__(self, space: list[Knobs], baseline: Knobs, *, capacity_gb: float, headroom: float = 0.05,
                 per_gpu_batch: int) -> None:
        if not 0 <= headroom < 1:
            raise ValueError(f"headroom must be in [0, 1), got {headroom}")
        self.baseline = normalize(baseline, per_gpu_batch)
        self.space = [normalize(k, per_gpu_batch) for k in space]
        if _key(self.baseline) not in {_key(k) for k in self.space}:
            raise ValueError(f"the baseline {format_knobs(self.baseline)} is not in the search space")
        self.capacity_gb = capacity_gb
        self.headroom = headroom
        self.per_gpu_batch = per_gpu_batch
        self.baseline_failed = False
        self._results: dict[tuple[Any, ...], TrialResult] = {}
        self._pruned: dict[tuple[Any, ...], Pruned] = {}

    @property
    def limit_gb(self) -> float:
        """Highest peak memory a fitting config may reach."""
        return self.capacity_gb * (1 - self.headroom)

    @property
    def trials(self) -> list[TrialResult]:
        """Recorded results, in the order recorded."""
        return list(self._results.values())

    @property
    def pruned(self) -> list[Pruned]:
        """Configs settled without a run, with the reason, in the order settled."""
        return list(self._pruned.values())

    def objective(self, result: TrialResult) -> float:
        """Seconds per optimizer step at the planned per-GPU batch E (lower is better)."""
        if result.step_time_s is None:
            return math.inf
        return result.step_time_s * self.per_gpu_batch / int(result.knobs["batch_size"])

    def fits(self, result: TrialResult) -> bool:
        """Completed cleanly with a measured peak (training or validation) within the headroom."""
        peak = result.peak_gb
        return result.outcome == "fit" and peak is not None and peak <= self.limit_gb

    def remaining(self) -> list[Knobs]:
        """Configs neither run nor settled."""
        return [k for k in self.space if _key(k) not in self._results and _key(k) not in self._pruned]

    def record(self, result: TrialResult) -> None:
        """Take one trial's result and settle what it implies.

        Raises:
            ValueError: the config is not in the space or was already recorded.
        """
        knobs = normalize(result.knobs, self.per_gpu_batch)
        key = _key(knobs)
        if key not in {_key(k) for k in self.space}:
            raise ValueError(f"{format_knobs(knobs)} is not in the search space")
        if key in self._results:
            raise ValueError(f"{format_knobs(knobs)} was already recorded")
        result.knobs = knobs
        self._results[key] = result
        self._pruned.pop(key, None)  # a measurement replaces an inference (resume may replay out of order)
        if key == _key(self.baseline) and not self.fits(result):
            self.baseline_failed = True
            why = self._failure_words(result)
            for other in self.remaining():
                self._pruned[_key(other)] = Pruned(other, f"not tried: the baseline {why}, so the sweep stopped")
            return
        self._settle()

    def next_trial(self) -> Knobs | None:
        """The next config to run, or None when the sweep is over (see the module docstring)."""
        if self.baseline_failed:
            return None
        if _key(self.baseline) not in self._results:
            return dict(self.baseline)
        return self._pick(set())

    def next_trials(self, count: int, busy: list[Knobs]) -> list[Knobs]:
        """Up to ``count`` configs to run next on several hosts, leaving out ``busy`` ones (running or queued).

        The baseline comes alone and first: nothing else is chosen until it is measured. After it, each
        config is the one ``next_trial`` would choose were the ones before it (and ``busy``) already taken.
        """
        if self.baseline_failed:
            return []
        taken = {_key(normalize(k, self.per_gpu_batch)) for k in busy}
        if _key(self.baseline) not in self._results:
            return [] if _key(self.baseline) in taken else [dict(self.baseline)]
        chosen: list[Knobs] = []
        while len(chosen) < count and (knobs := self._pick(taken)) is not None:
            chosen.append(knobs)
            taken.add(_key(knobs))
        return chosen

    def _pick(self, taken: set[tuple[Any, ...]]) -> Knobs | None:
        candidates = [k for k in self.remaining() if _key(k) not in taken]
        if not candidates:
            return None
        growth = self._growth()
        order = {_key(k): i for i, k in enumerate(self.space)}

        def rank(c: Knobs) -> tuple[int, int, int, int]:
            if self._estimate(c, growth) <= self.limit_gb:
                settled = sum(1 for o in candidates if o is not c and needs_no_more_memory(o, c))
                group = 0
            else:
                settled = sum(1 for o in candidates if o is not c and needs_no_more_memory(c, o))
                group = 1
            return group, -settled, distance(c, self.baseline), order[_key(c)]

        chosen = min(candidates, key=rank)
        return dict(chosen)

    def predicted_peak(self, knobs: Knobs) -> float | None:
        """The memory model's peak for ``knobs`` (measured when it ran), None before any fit is measured."""
        result = self._results.get(_key(normalize(knobs, self.per_gpu_batch)))
        if result is not None and result.peak_gb is not None:
            return result.peak_gb
        estimate = self._estimate(normalize(knobs, self.per_gpu_batch), self._growth())
        return estimate or None

    def ranking(self) -> Ranking[TrialResult] | None:
        """The fastest fit and the winner (``_ranking``: within the noise of the fastest, the nearer config)."""
        return rank_fits([r for r in self._results.values() if self.fits(r)], self.objective, self.baseline)

    def best(self) -> TrialResult | None:
        """The winning fit: the fastest, unless a config nearer the baseline is within its measured noise."""
        ranking = self.ranking()
        return ranking.winner if ranking else None

    def winner(self) -> Knobs:
        """The best fitting config's knobs, else the baseline's."""
        best = self.best()
        return dict(best.knobs if best else self.baseline)

    def _failure_words(self, result: TrialResult) -> str:
        if result.outcome == "oom_training":
            return "ran out of memory in a training step"
        if result.outcome == "oom_validation":
            return "ran out of memory in validation"
        if result.outcome == "nan":
            return "had a NaN loss"
        if result.outcome == "crash":
            return f"crashed ({result.reason})" if result.reason else "crashed"
        if result.peak_gb is None:
            return "reported no peak memory"
        return (f"peaked at {result.peak_gb:.1f} GiB, over the {self.limit_gb:.1f} GiB limit "
                f"({self.capacity_gb:.1f} GiB less {self.headroom:.0%} headroom)")

    def _validation_over(self, result: TrialResult) -> bool:
        """The step-0 validation alone rules the config out: it ran out of memory, or peaked over the limit."""
        if result.outcome == "oom_validation":
            return True
        return result.validation_peak_vram_gb is not None and result.validation_peak_vram_gb > self.limit_gb

    def _is_memory_failure(self, result: TrialResult) -> bool:
        if result.outcome in MEMORY_FAILURES:
            return True
        return result.outcome == "fit" and result.peak_gb is not None and result.peak_gb > self.limit_gb

    def _settle(self) -> None:
        failures = [r for r in self._results.values() if self._is_memory_failure(r)]
        fitting = [r for r in self._results.values() if self.fits(r)]
        over = [r for r in self._results.values() if self._validation_over(r)]
        for cand in self.remaining():
            same = next((r for r in over if validation_key(r.knobs) == validation_key(cand)), None)
            if same is not None:
                self._pruned[_key(cand)] = Pruned(cand, f"its step-0 validation is that of "
                                                        f"{format_knobs(same.knobs)} (same quantization), which "
                                                        f"{self._failure_words(same)}")
                continue
            above = next((r for r in failures if needs_no_more_memory(r.knobs, cand)), None)
            if above is not None:
                self._pruned[_key(cand)] = Pruned(cand, f"needs at least the memory of {format_knobs(above.knobs)}, "
                                                        f"which {self._failure_words(above)}")
                continue
            below = next((r for r in fitting if needs_no_more_memory(cand, r.knobs)), None)
            if below is not None:
                self._pruned[_key(cand)] = Pruned(cand, f"uses no more memory than {format_knobs(below.knobs)}, "
                                                        "which fits, so it is no faster than the best")

    def _growth(self) -> dict[str, float]:
        """Per-knob peak-memory factor per step up, from pairs of trials that differ in one knob."""
        seen: dict[str, list[float]] = {}
        floor: dict[str, float] = {}
        results = list(self._results.values())
        for low in results:
            if not self.fits(low):
                continue
            low_peak = _measured_peak(low)
            for high in results:
                steps = {k: s for k, s in knob_steps(low.knobs, high.knobs).items() if s}
                if len(steps) != 1:
                    continue
                (knob, step), = steps.items()
                if step <= 0:
                    continue
                high_peak = high.peak_gb  # every fit has one, so this test is the same as before
                if high_peak is not None and (self.fits(high) or high.outcome == "over_headroom"):
                    seen.setdefault(knob, []).append((high_peak / low_peak) ** (1 / step))
                elif self._is_memory_failure(high):
                    # It went over the limit, so this knob grows memory at least this fast.
                    bound = (self.limit_gb / low_peak) ** (1 / step)
                    floor[knob] = max(floor.get(knob, 1.0), bound)
        growth = {}
        for knob, prior in GROWTH_PRIOR.items():
            measured = seen.get(knob)
            factor = math.exp(sum(map(math.log, measured)) / len(measured)) if measured else prior
            growth[knob] = max(factor, floor.get(knob, 1.0), 1.0)
        return growth

    def _estimate(self, cand: Knobs, growth: dict[str, float]) -> float:
        """Predicted peak of ``cand``: grown from the fits below it, else from the nearest fit."""
        fitting = [r for r in self._results.values() if self.fits(r)]
        if not fitting:
            return 0.0
        below = [r for r in fitting if needs_no_more_memory(r.knobs, cand)]
        sources = below or [min(fitting, key=lambda r: distance(r.knobs, cand))]

        def grown(r: TrialResult) -> float:
            steps = knob_steps(r.knobs, cand)
            factor: float = math.prod(growth[k] ** s for k, s in steps.items())  # growth >= 1: never complex
            return _measured_peak(r) * factor

        return max(grown(r) for r in sources)


def _measured_peak(result: TrialResult) -> float:
    """The peak memory of a trial known to fit (a fit always has a measured peak).

    Raises:
        ValueError: the trial has no measured peak.
    """
    peak = result.peak_gb
    if peak is None:
        raise ValueError(f"trial {format_knobs(result.knobs)} has no measured peak memory")
    return peak
