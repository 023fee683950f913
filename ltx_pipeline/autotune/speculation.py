"""Several trials of one sweep at once, with the sequential sweep's decisions: speculate, commit in order.

``SpeculativeSchedule`` wraps the sweep's ``SweepPlanner``. Free slots are filled with the configs
``planner.next_trials`` ranks next, leaving out those running or measured (the first of them is the
config the sequential sweep would run now). A measured result is *not* given to the planner when it
arrives: ``ready`` hands results back only in the order the sequential sweep would have run them
(the planner's ``next_trial``), so the planner, the stopping rule, pruning by memory dominance and the
prior see exactly the sequence of results a one-slot sweep sees, and pick the same winner, whatever
order the trials end in. A running or measured config that the committed results have settled (pruned)
was speculation the sequential sweep would never have run: ``settled`` names it, to be stopped and
recorded as superseded, never as a measurement. With one slot this is the sequential sweep itself.
Pure: no processes, no Optuna (the bench's simulation and the phase's threads both drive it).
"""

from __future__ import annotations

from typing import Any

from ltx_pipeline.ltx.autotune import SPACE_KEYS, Knobs, SweepPlanner, TrialResult, needs_no_more_memory, validation_key

__all__ = ["SpeculativeSchedule", "config_key"]


def config_key(knobs: Knobs) -> tuple[Any, ...]:
    """A config's identity among the sweep's (the swept knobs, accumulation left out)."""
    return tuple(knobs.get(k) for k in SPACE_KEYS)


class SpeculativeSchedule:
    """What to start, what to commit and what to stop, for ``slots`` trials at once.

    The caller records each result ``ready`` returns in the planner (``planner.record``, or the sweep's
    ``fold``) before asking for the next one.
    """

    def __init__(self, planner: SweepPlanner, slots: int) -> None:
        if slots < 1:
            raise ValueError(f"a sweep needs at least one slot, got {slots}")
        self.planner = planner
        self.slots = slots
        self.running: dict[tuple[Any, ...], Knobs] = {}
        self.measured: dict[tuple[Any, ...], TrialResult] = {}  # ended, not yet committed
        self.stopped: set[tuple[Any, ...]] = set()  # settled while running: their ends are dropped

    def over(self) -> bool:
        """The sequential sweep would run nothing more."""
        return self.planner.next_trial() is None

    def starts(self) -> list[Knobs]:
        """Configs to start now, one per free slot, in the planner's order; marked running."""
        free = self.slots - len(self.running)
        if free <= 0 or self.over():
            return []
        busy = [*self.running.values(), *(r.knobs for r in self.measured.values())]
        ranked = self.planner.next_trials(len(self.planner.remaining()), busy)
        head = config_key(self.planner.next_trial() or {})
        chosen: list[Knobs] = []
        for knobs in ranked:
            if len(chosen) == free:
                break
            if config_key(knobs) == head:
                chosen.append(knobs)  # the sequential sweep's own next config: always needed
            elif all(self._independent(knobs, other) for other in (*busy, *chosen)):
                chosen.append(knobs)
        for knobs in chosen:
            self.running[config_key(knobs)] = knobs
        return chosen

    def _independent(self, a: Knobs, b: Knobs) -> bool:
        """Neither result can settle the other: memory-incomparable, and not sharing a validation pass
        that is still unmeasured (a validation over the limit rules out its whole quantization)."""
        if needs_no_more_memory(a, b) or needs_no_more_memory(b, a):
            return False
        if validation_key(a) != validation_key(b):
            return True
        return any(self.planner.fits(t) and validation_key(t.knobs) == validation_key(a) for t in self.planner.trials)

    def ended(self, knobs: Knobs, result: TrialResult | None) -> bool:
        """A trial ended (``result`` None: it ended with nothing to commit). False when it had been stopped
        as settled (its result is dropped)."""
        key = config_key(knobs)
        self.running.pop(key, None)
        if key in self.stopped:
            self.stopped.discard(key)
            return False
        if result is not None:
            self.measured[key] = result
        return True

    def ready(self) -> TrialResult | None:
        """The result the sequential sweep would take next, once it is measured; None until then."""
        knobs = self.planner.next_trial()
        if knobs is None:
            return None
        return self.measured.pop(config_key(knobs), None)

    def settled(self) -> tuple[list[Knobs], list[TrialResult]]:
        """(running configs to stop, measured results to drop): what the committed results settled, or
        everything once the sweep is over. Running ones are remembered as stopped."""
        open_keys = set() if self.over() else {config_key(k) for k in self.planner.remaining()}
        stop = [k for key, k in self.running.items() if key not in open_keys and key not in self.stopped]
        self.stopped.update(config_key(k) for k in stop)
        drop = [r for key, r in self.measured.items() if key not in open_keys]
        for result in drop:
            self.measured.pop(config_key(result.knobs))
        return stop, drop
