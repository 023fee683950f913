"""The autotune sweep as a person compares it: every trial and pruned config, and memory against speed.

From ``AutotuneOutputs``: a trial that ran out of memory or failed keeps its reason; a pruned config says
which result settled it; a figure the trial did not measure is None (shown as "not measured", never 0).
The chart's points are the trials that measured both a step time and a peak; the headroom line is the
limit a config must stay under (capacity less headroom).
"""

from __future__ import annotations

import json
from typing import Any

from ltx_pipeline.outputs.autotune import AutotuneOutputs, KnobValue
from ltx_pipeline.store.location import redact

__all__ = ["autotune_view"]


def autotune_view(outputs: AutotuneOutputs | None) -> dict[str, Any] | None:
    """Table rows, chart points and the study's dashboard command; None when autotune never produced a result."""
    if outputs is None:
        return None
    if outputs.off is not None:
        return {"off": outputs.off, "trials": [], "pruned": [], "points": [], "baseline": _knobs(outputs.baseline)}
    winner = outputs.winner or {}
    trials = []
    for trial in outputs.trials:
        measured = trial.step_time_s is not None and trial.peak_vram_gb is not None
        trials.append({
            "number": trial.number, "knobs": _knobs(trial.knobs), "outcome": trial.outcome, "fits": trial.fits,
            "failed": not trial.fits and trial.outcome != "fit", "step_time_s": trial.step_time_s,
            "peak_vram_gb": trial.peak_vram_gb, "validation_peak_vram_gb": trial.validation_peak_vram_gb,
            "peak_source": trial.peak_source, "seconds": trial.seconds, "reason": trial.reason or "",
            "winner": bool(winner) and trial.fits and trial.knobs == winner, "measured": measured,
            "from_prior": trial.from_prior, "host": trial.host})
    # A config's peak is the higher of training's and validation's: both must stay under the limit.
    points = [{"x": t.step_time_s, "y": max(t.peak_vram_gb, t.validation_peak_vram_gb or 0.0), "label": f"#{t.number}",
               "fits": t.fits} for t in outputs.trials if t.step_time_s is not None and t.peak_vram_gb is not None]
    storage = redact(outputs.storage) if outputs.storage else None
    return {
        "off": None, "study": outputs.study, "storage": storage,
        "dashboard": f"optuna-dashboard {storage if '://' in (storage or '') else f'sqlite:///{storage}'}"
        if storage else None,
        "capacity_gb": outputs.capacity_gb, "headroom": outputs.headroom, "limit_gb": outputs.limit_gb,
        "winner": _knobs(outputs.winner) if outputs.winner else None, "objective": outputs.objective,
        "trials": trials, "pruned": [{"knobs": _knobs(p.knobs), "reason": p.reason} for p in outputs.pruned],
        "superseded": [{"number": s.number, "reason": s.reason} for s in outputs.superseded],
        "prior": outputs.prior.model_dump() if outputs.prior else None, "points": points,
        "predicted_peak_gb": outputs.predicted_peak_gb,
    }


def _knobs(knobs: dict[str, KnobValue]) -> str:
    """``quantization: int8-quanto, gradient_checkpointing: true, ...``: values as the trainer config spells them."""
    return ", ".join(f"{k}: {v if isinstance(v, str) else json.dumps(v)}" for k, v in knobs.items())
