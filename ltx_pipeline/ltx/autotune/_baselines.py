"""What a sweep would cost on a cost surface, and the two figures it is compared with.

Owns the benchmark's arithmetic, computed from a ``CostSurface`` alone (no processes): the GPU
seconds of one simulated trial, the exhaustive optimum (every config run), the official skill's
greedy procedure (train-model-skill.md §2) and our ``SweepPlanner`` run against the same surface.

Trial costs follow the trainer's order of events (facts: the step-0 validation runs before the
first training step): load, then the step-0 validation, then the steps.
- fit or over the headroom: load + validations x validation time + steps x optimizer-step time
  (micro-step time x accumulation), i.e. the whole trial runs;
- OOM in validation: load + one validation (the step-0 pass fails);
- OOM in a training step (a point the surface does not list, or one whose training peak is over
  capacity): load + one validation + one failing step, costed at the surface's slowest listed
  micro-step time (the failing config's own time is unknown);
- crash: load + one validation + its first micro-step;
- NaN loss: load + one validation + the steps up to the trainer's first loss line (every 20 steps
  with progress bars off, facts 4.4), where the phase sees the NaN and stops the trial.

Our sweep runs one validation per trial and stops once the steady steps are measured
(``SWEEP_TRIAL_STEPS``); the skill's trial config keeps 50 steps with ``validation.interval: 50``
and the default step-0 validation, so two validations per trial.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, Protocol

from ltx_pipeline.ltx.autotune._space import Knobs, distance, normalize
from ltx_pipeline.ltx.autotune._strategy import Outcome, SweepPlanner, TrialResult, format_knobs

__all__ = ["NAN_VISIBLE_AFTER_STEPS", "SKILL_TRIAL_STEPS", "SKILL_VALIDATIONS", "SWEEP_TRIAL_STEPS",
           "SWEEP_VALIDATIONS", "end_to_end_anchors", "exhaustive_optimum", "simulate_sweep", "skill_greedy",
           "trial_cost"]

SWEEP_TRIAL_STEPS = 20  # steady optimizer steps after the validation: enough for a stable mean step time
SWEEP_VALIDATIONS = 1
SKILL_TRIAL_STEPS = 50
SKILL_VALIDATIONS = 2  # step 0 and step 50
NAN_VISIBLE_AFTER_STEPS = 20
SKILL_MAX_TRIALS = 5


class CostSurface(Protocol):
    """What is read of ``ltx_pipeline.backends.surface.CostSurface`` (kept structural: the LTX rules
    sit below the backends and do not import them)."""

    load_time_s: float
    validation_time_s: float
    points: Sequence[Any]

    @property
    def capacity_gb(self) -> float: ...

    def lookup(self, knobs: dict[str, Any]) -> Any: ...


def trial_cost(surface: CostSurface, knobs: Knobs, *, steps: int, validations: int,
               headroom: float = 0.05) -> TrialResult:
    """Simulate one trial of ``knobs`` on ``surface``: its outcome, measurements and GPU seconds.

    Args:
        surface: the cost surface.
        knobs: the four knobs, with ``gradient_accumulation_steps`` (default 1).
        steps: optimizer steps the trial runs.
        validations: validation passes it runs (the first one at step 0).
        headroom: share of capacity kept free (a run over the line is ``over_headroom``).
    """
    capacity = surface.capacity_gb
    point = surface.lookup(knobs)
    load, val = surface.load_time_s, surface.validation_time_s
    first_val = val if validations > 0 else 0.0
    accumulation = int(knobs.get("gradient_accumulation_steps", 1))
    if point is not None and validations > 0 and (point.validation_peak_vram_gb or point.peak_vram_gb) > capacity:
        return TrialResult(dict(knobs), "oom_validation", None, None, point.validation_peak_vram_gb,
                           load + val, "CUDA out of memory in the step-0 validation")
    if point is None or point.peak_vram_gb > capacity:
        slowest = max(p.step_time_s for p in surface.points)
        return TrialResult(dict(knobs), "oom_training", None, None, None, load + first_val + slowest,
                           "CUDA out of memory in the first training step")
    if point.crash:
        return TrialResult(dict(knobs), "crash", None, None, None, load + first_val + point.step_time_s,
                           point.crash)
    step = point.step_time_s * accumulation
    if point.loss_nan:
        seen = min(steps, NAN_VISIBLE_AFTER_STEPS)
        return TrialResult(dict(knobs), "nan", point.step_time_s, point.peak_vram_gb,
                           point.validation_peak_vram_gb, load + first_val + seen * step, "loss is NaN")
    seconds = load + validations * val + steps * step
    peak = max(point.peak_vram_gb, point.validation_peak_vram_gb or 0.0)
    limit = capacity * (1 - headroom)
    outcome: Outcome = "fit" if peak <= limit else "over_headroom"
    reason = "" if outcome == "fit" else f"peak {peak:.1f} GiB over the {limit:.1f} GiB limit"
    return TrialResult(dict(knobs), outcome, point.step_time_s, point.peak_vram_gb,
                       point.validation_peak_vram_gb, seconds, reason)


def _objective(result: TrialResult, per_gpu_batch: int) -> float:
    if result.outcome != "fit" or result.step_time_s is None:
        return math.inf
    return result.step_time_s * per_gpu_batch / int(result.knobs["batch_size"])


def exhaustive_optimum(surface: CostSurface, space: list[Knobs], headroom: float,
                       per_gpu_batch: int) -> tuple[Knobs | None, float]:
    """The fastest config of ``space`` that fits, by running every one (ties: closer to ``space[0]``).

    Returns:
        (knobs, seconds per optimizer step at the per-GPU batch), or (None, inf) when none fits.
    """
    baseline = space[0]
    scored = []
    for i, knobs in enumerate(space):
        result = trial_cost(surface, knobs, steps=1, validations=1, headroom=headroom)
        scored.append((_objective(result, per_gpu_batch), distance(knobs, baseline), i, knobs))
    best = min(scored, key=lambda s: s[:3])
    return (dict(best[3]), best[0]) if math.isfinite(best[0]) else (None, math.inf)


def skill_greedy(surface: CostSurface, baseline: Knobs, per_gpu_batch: int, headroom: float,
                 trial_steps: int = SKILL_TRIAL_STEPS, *, multi_bucket: bool = False) -> dict[str, Any]:
    """The official skill's Phase 6 procedure (train-model-skill.md §2) on ``surface``.

    Reading of the skill: trial 1 is the baseline (a failure stops everything); each later trial is
    the current best plus one change, at most 5 trials. Low-VRAM baseline: trial 2
    ``quantization: null`` (OOM: revert and stop), trial 3 ``optimizer_type: adamw`` (OOM: revert and
    continue), then batch size. Standard baseline (80GB+): the quantization and optimizer trials are
    no-ops and are not run; the one real lever is checkpointing off (OOM: revert and continue), then
    batch size. The skill's text defers batch size (one sample cannot measure it); we give it the batch
    trial anyway, 1 -> 2 -> 4 where the size divides E and the plan is single-bucket (OOM: revert and
    stop, "found the ceiling"), so it is compared at its strongest. A fit that does not improve the
    optimizer-step time stops the sweep. The skill has no headroom rule; a run over ``headroom`` is
    treated as an OOM so that both procedures choose among the same admissible configs.

    Returns:
        dict with ``chosen`` (knobs, or None when the baseline fails), ``trials_run``, ``trials_oom``,
        ``trial_seconds``, ``objective`` and ``trials`` (per-trial knobs, outcome, seconds).
    """
    current = normalize(baseline, per_gpu_batch)
    low_vram = current["quantization"] is not None or current["optimizer_type"] == "adamw8bit"
    changes: list[tuple[dict[str, Any], str]] = []  # (change, on failure: "stop" or "continue")
    if low_vram:
        changes += [({"quantization": None}, "stop"), ({"optimizer_type": "adamw"}, "continue")]
    else:
        changes.append(({"enable_gradient_checkpointing": False}, "continue"))
    if not multi_bucket:
        changes += [({"batch_size": b, "gradient_accumulation_steps": per_gpu_batch // b}, "stop")
                    for b in (2, 4) if per_gpu_batch % b == 0 and b > current["batch_size"]]
    trials: list[TrialResult] = [_skill_trial(surface, current, trial_steps, headroom)]
    best = trials[0] if trials[0].outcome == "fit" else None
    for change, on_failure in changes:
        if best is None or len(trials) >= SKILL_MAX_TRIALS:
            break
        candidate = {**best.knobs, **change}
        if candidate == best.knobs:
            continue  # a no-op on this baseline: the skill does not run it
        result = _skill_trial(surface, candidate, trial_steps, headroom)
        trials.append(result)
        if result.outcome != "fit":
            if on_failure == "stop":
                break
            continue
        if _objective(result, per_gpu_batch) >= _objective(best, per_gpu_batch):
            break  # no step-time improvement
        best = result
    return {"chosen": dict(best.knobs) if best else None, "trials_run": len(trials),
            "trials_oom": sum(1 for t in trials if t.outcome.startswith("oom")),
            "trial_seconds": sum(t.seconds for t in trials),
            "objective": _objective(best, per_gpu_batch) if best else math.inf,
            "trials": [{"knobs": t.knobs, "outcome": t.outcome, "seconds": t.seconds} for t in trials]}


def _skill_trial(surface: CostSurface, knobs: Knobs, steps: int, headroom: float) -> TrialResult:
    return trial_cost(surface, knobs, steps=steps, validations=SKILL_VALIDATIONS, headroom=headroom)


def simulate_sweep(surface: CostSurface, space: list[Knobs], baseline: Knobs, *, headroom: float,
                   per_gpu_batch: int, trial_steps: int = SWEEP_TRIAL_STEPS) -> dict[str, Any]:
    """Run ``SweepPlanner`` against ``trial_cost`` on ``surface``.

    Returns:
        dict with ``chosen`` (the winner, or None when the baseline fails), ``trials_run``,
        ``trials_oom``, ``trial_seconds``, ``pruned`` (knobs and reason each), ``objective`` and
        ``trials`` (per-trial knobs, outcome, seconds).
    """
    planner = SweepPlanner(space, baseline, capacity_gb=surface.capacity_gb, headroom=headroom,
                           per_gpu_batch=per_gpu_batch)
    while (knobs := planner.next_trial()) is not None:
        planner.record(trial_cost(surface, knobs, steps=trial_steps, validations=SWEEP_VALIDATIONS,
                                  headroom=headroom))
    best = planner.best()
    trials = planner.trials
    return {"chosen": dict(best.knobs) if best else None, "trials_run": len(trials),
            "trials_oom": sum(1 for t in trials if t.outcome.startswith("oom")),
            "trial_seconds": sum(t.seconds for t in trials),
            "pruned": [{"knobs": p.knobs, "reason": p.reason} for p in planner.pruned],
            "objective": planner.objective(best) if best else math.inf,
            "trials": [{"knobs": t.knobs, "outcome": t.outcome, "seconds": t.seconds,
                        "summary": format_knobs(t.knobs)} for t in trials]}


def end_to_end_anchors(surface: CostSurface, space: list[Knobs], headroom: float, per_gpu_batch: int, *,
                       training_steps: int, trial_steps: int, multi_bucket: bool) -> dict[str, dict[str, Any]]:
    """GPU seconds before and during training (sweep + ``training_steps`` at the chosen config) of three anchors.

    - ``greedy``: the official skill's sweep (``skill_greedy``), then training at its choice;
    - ``exhaustive``: every config of ``space`` run as one of our trials (one validation, ``trial_steps``
      steps), then training at the optimum;
    - ``perfect_knowledge``: the baseline trial alone (the memory surface known in advance), then
      training at the optimum.

    Each entry holds ``sweep_seconds``, ``objective`` and ``end_to_end_seconds`` (None when nothing fits).
    """
    baseline = space[0]
    chosen, optimum = exhaustive_optimum(surface, space, headroom, per_gpu_batch)
    skill = skill_greedy(surface, baseline, per_gpu_batch, headroom, multi_bucket=multi_bucket)
    # Our trials time single micro-steps (accumulation 1): the anchors that run our trials do too.
    single = [{**k, "gradient_accumulation_steps": 1} for k in space]
    every = sum(trial_cost(surface, k, steps=trial_steps, validations=SWEEP_VALIDATIONS, headroom=headroom).seconds
                for k in single)
    first = trial_cost(surface, single[0], steps=trial_steps, validations=SWEEP_VALIDATIONS, headroom=headroom).seconds

    def entry(sweep: float, objective: float, knobs: Knobs | None) -> dict[str, Any]:
        total = sweep + training_steps * objective if math.isfinite(objective) else None
        return {"chosen": knobs, "sweep_seconds": round(sweep, 1),
                "objective": objective if math.isfinite(objective) else None,
                "end_to_end_seconds": round(total, 1) if total is not None else None}

    return {"greedy": entry(skill["trial_seconds"], skill["objective"], skill["chosen"]),
            "exhaustive": entry(every, optimum, chosen),
            "perfect_knowledge": entry(first, optimum, chosen)}
