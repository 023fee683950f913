"""The autotune sweep's rules, pure Python (no trainer, no Optuna): the room's one door.

``search_space`` builds the knob combinations a run may try; ``SweepPlanner`` orders the trials,
prunes by the memory order (``needs_no_more_memory``) and says when nothing untried can win;
``exhaustive_optimum``, ``skill_greedy``, ``simulate_sweep`` and ``trial_cost`` are the baselines the
benchmark compares against. Inside: ``_space``, ``_strategy`` (with ``_ranking``, ``_stopping``) and
``_baselines``. Nothing outside this package imports those modules.
"""

from ltx_pipeline.ltx.autotune._baselines import (
    end_to_end_anchors,
    exhaustive_optimum,
    simulate_sweep,
    skill_greedy,
    trial_cost,
)
from ltx_pipeline.ltx.autotune._space import (
    SPACE_KEYS,
    Knobs,
    batch_candidates,
    distance,
    needs_no_more_memory,
    search_space,
)
from ltx_pipeline.ltx.autotune._stopping import PRECISION, StepTimeEstimate, estimate_step_time, relative_spread
from ltx_pipeline.ltx.autotune._strategy import (
    MEMORY_FAILURES,
    MISS_TOLERANCE,
    VALIDATION_KNOBS,
    Pruned,
    Ranking,
    SweepPlanner,
    TrialResult,
    deltas,
    format_knobs,
    prediction_miss,
    validation_key,
)

__all__ = [
    "MEMORY_FAILURES",
    "MISS_TOLERANCE",
    "PRECISION",
    "SPACE_KEYS",
    "StepTimeEstimate",
    "VALIDATION_KNOBS",
    "Knobs",
    "Pruned",
    "Ranking",
    "SweepPlanner",
    "TrialResult",
    "batch_candidates",
    "deltas",
    "distance",
    "end_to_end_anchors",
    "estimate_step_time",
    "exhaustive_optimum",
    "format_knobs",
    "needs_no_more_memory",
    "prediction_miss",
    "relative_spread",
    "search_space",
    "simulate_sweep",
    "skill_greedy",
    "trial_cost",
    "validation_key",
]
