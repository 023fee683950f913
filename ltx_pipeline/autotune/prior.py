"""An earlier run's finished sweep as the prior of this one: what keys it, and when its baseline agrees.

A study is tagged with ``prior_key`` (what the memory surface depends on); a later sweep with the same
key finds it (``study.find_prior``), measures its own baseline, and uses the prior's other results
only when ``prior_disagreement`` finds none: both baselines fit, their step times within
``PRIOR_STEP_TIME_MARGIN`` and their peaks within ``PRIOR_MEMORY_MARGIN``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ltx_pipeline.engine.fingerprint import digest, file_digest
from ltx_pipeline.ltx.autotune import SPACE_KEYS, SweepPlanner
from ltx_pipeline.outputs.config_patch import ConfigPatchOutputs
from ltx_pipeline.outputs.data_check import DataCheckOutputs
from ltx_pipeline.outputs.plan import PlanOutputs
from ltx_pipeline.outputs.probe import ProbeOutputs
from ltx_pipeline.phase_context import LtxContext

__all__ = ["PRIOR_MEMORY_MARGIN", "PRIOR_STEP_TIME_MARGIN", "prior_disagreement", "prior_key", "same_knobs"]


# A prior is used only when this run's baseline measures like the prior's: beyond these margins the
# surface has changed (another driver, another model build, another host) and the prior says nothing.
PRIOR_STEP_TIME_MARGIN = 0.10
PRIOR_MEMORY_MARGIN = 0.05


def prior_key(ctx: LtxContext, space: list[dict[str, Any]]) -> str:
    """What the memory surface depends on: GPU model, bucket, mode, training mode, model file, LoRA rank,
    validation dims, the knobs the sweep keeps fixed, the search space, and (simulated) the surface itself."""
    recipe = ctx.output(PlanOutputs).recipe
    gpus = ctx.output(ProbeOutputs).gpus.gpus
    model = Path(ctx.output(ConfigPatchOutputs).model_path)
    parts: dict[str, Any] = {
        "gpu": sorted({(g.name, g.memory_mib) for g in gpus}),
        "bucket": ctx.output(DataCheckOutputs).sanity.bucket, "mode": recipe.mode,
        "training_mode": recipe.training_mode, "rank": recipe.rank,
        "validation_dims": recipe.validation_dims,
        "model": {"name": model.name, "size": model.stat().st_size if model.is_file() else None},
        "fixed_knobs": {k: v for k, v in recipe.knobs.items() if k not in SPACE_KEYS},
        "space": space, "backend": ctx.request.backend,
    }
    if ctx.request.backend == "simulated" and ctx.request.surface:  # the request requires it for simulated
        parts["surface"] = file_digest(Path(ctx.request.surface))
    return digest(parts)


def same_knobs(a: dict[str, Any], b: dict[str, Any]) -> bool:
    return all(a.get(k) == b.get(k) for k in SPACE_KEYS)


def prior_disagreement(ours: dict[str, Any], theirs: Any, planner: SweepPlanner) -> str | None:
    """Why the prior's baseline contradicts this one, or None when it agrees within the margins."""
    if theirs is None:
        return "it has no result for this baseline"
    if not ours["fits"] or not planner.fits(theirs):
        return f"the baseline is {ours['outcome']} here and {theirs.outcome} there"
    if not ours["step_time_s"] or not theirs.step_time_s:
        return "a baseline step time was not measured"
    drift = abs(theirs.step_time_s / ours["step_time_s"] - 1)
    if drift > PRIOR_STEP_TIME_MARGIN:
        return (f"its baseline step time {theirs.step_time_s:.2f}s differs from this {ours['step_time_s']:.2f}s "
                f"by {drift:.0%} (more than {PRIOR_STEP_TIME_MARGIN:.0%})")
    measured = [v for v in (ours["peak_vram_gb"], ours["validation_peak_vram_gb"]) if v is not None]
    if not measured and not theirs.peak_gb:
        return None  # neither sweep measured memory (a backend without a memory figure): nothing to compare
    if not measured or not theirs.peak_gb:
        return "a baseline peak memory was measured in one sweep only"
    peak = max(measured)
    gap = abs((theirs.peak_gb or 0.0) / peak - 1)
    if gap > PRIOR_MEMORY_MARGIN:
        return (f"its baseline peak {theirs.peak_gb:.1f} GiB differs from this {peak:.1f} GiB by {gap:.0%} "
                f"(more than {PRIOR_MEMORY_MARGIN:.0%})")
    return None
