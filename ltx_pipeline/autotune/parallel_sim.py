"""A sweep on a cost surface in simulated time, with one slot or several: what ``bench autotune
--parallel N`` compares.

Drives the same ``SpeculativeSchedule`` the phase uses, with trials costed by ``ltx.autotune.trial_cost``
as the simulated trainer costs them (the first trial times two lines, 41 steps; later ones one line, 21
steps, once the baseline measured the step-time spread; one validation pass per quantization, carried
from the first committed trial that measured it). Events are taken in simulated time: a trial ends
``seconds`` after it starts; a running trial the committed results settle is stopped at once and costs
what it ran. GPU-seconds are trial seconds x GPUs per trial; wall time is the makespan over the slots.
"""

from __future__ import annotations

import heapq
import math
from typing import Any

from ltx_pipeline.autotune.slots import GPUS_PER_TRIAL
from ltx_pipeline.autotune.speculation import SpeculativeSchedule, config_key
from ltx_pipeline.ltx.autotune import Knobs, SweepPlanner, TrialResult, trial_cost, validation_key

__all__ = ["FIRST_TRIAL_STEPS", "LATER_TRIAL_STEPS", "simulate_slots"]

FIRST_TRIAL_STEPS = 41  # two clean lines (autotune.trial_settings for the simulated backend)
LATER_TRIAL_STEPS = 21  # one line once the spread is known (trial_runner.ONE_LINE_STEPS)


def simulate_slots(surface: Any, space: list[Knobs], baseline: Knobs, *, headroom: float, per_gpu_batch: int,
                   slots: int, per_trial: int = GPUS_PER_TRIAL) -> dict[str, Any]:
    """The sweep with ``slots`` trials at once on ``surface``.

    Returns:
        dict with ``chosen`` (None when nothing fits), ``objective``, ``trials_run`` (committed),
        ``trials_started``, ``stopped`` (settled while running) and ``dropped`` (measured, never used),
        ``gpu_seconds``, ``wall_seconds`` and ``trials`` (knobs, start, end, slot) in start order.
    """
    planner = SweepPlanner(space, baseline, capacity_gb=surface.capacity_gb, headroom=headroom,
                           per_gpu_batch=per_gpu_batch)
    schedule = SpeculativeSchedule(planner, slots)
    now, gpu_seconds, seq = 0.0, 0.0, 0
    events: list[tuple[float, int, Knobs, TrialResult]] = []
    started: dict[tuple[Any, ...], dict[str, Any]] = {}
    log: list[dict[str, Any]] = []
    free = list(range(slots))
    stopped = dropped = 0
    while True:
        for knobs in schedule.starts():
            result = _trial(surface, knobs, planner, headroom)
            entry: dict[str, Any] = {"knobs": knobs, "start": now, "end": now + result.seconds, "slot": free.pop(0)}
            started[config_key(knobs)] = entry
            log.append(entry)
            heapq.heappush(events, (entry["end"], seq, knobs, result))
            seq += 1
        if not events:
            break
        now, _, knobs, result = heapq.heappop(events)
        entry = started.pop(config_key(knobs))
        free.append(entry["slot"])
        gpu_seconds += (now - entry["start"]) * per_trial
        schedule.ended(knobs, result)
        while (ready := schedule.ready()) is not None:
            planner.record(ready)
        stop, drop = schedule.settled()
        dropped += len(drop)
        for knobs in stop:  # stopped at once: it costs what it ran, and frees its slot
            key = config_key(knobs)
            events = [e for e in events if config_key(e[2]) != key]
            heapq.heapify(events)
            entry = started.pop(key)
            entry["end"], entry["stopped"] = now, True
            free.append(entry["slot"])
            gpu_seconds += (now - entry["start"]) * per_trial
            schedule.ended(knobs, None)
            stopped += 1
    best = planner.best()
    return {"chosen": dict(best.knobs) if best else None,
            "objective": planner.objective(best) if best else math.inf, "trials_run": len(planner.trials),
            "trials_started": len(log), "stopped": stopped, "dropped": dropped,
            "gpu_seconds": gpu_seconds, "wall_seconds": now, "trials": log}


def _trial(surface: Any, knobs: Knobs, planner: SweepPlanner, headroom: float) -> TrialResult:
    """One trial as the simulated trainer costs it, given what the committed trials measured."""
    done = planner.trials
    steps = LATER_TRIAL_STEPS if any(planner.fits(t) for t in done) else FIRST_TRIAL_STEPS
    carried = any(t.validation_peak_vram_gb is not None and validation_key(t.knobs) == validation_key(knobs)
                  for t in done)
    single = {**knobs, "gradient_accumulation_steps": 1}  # a trial times single micro-steps
    result = trial_cost(surface, single, steps=steps, validations=0 if carried else 1, headroom=headroom)
    result.knobs = dict(knobs)
    return result
