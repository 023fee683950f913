"""The few stored phase outputs ``status`` shows, read from the store's JSON with the standard library alone.

``status`` must start light (no pydantic, tests/cli/test_startup_imports.py), so it does not build the
phase's ``PhaseOutputs`` models; each reader here takes one field of a row's stored JSON, named as the
model names it (``ltx_pipeline.outputs``), and tests/unit/test_status_stored.py checks every reader
against the typed model on stores written by this version and by the one before typed outputs. A row
that has no result (never ran, failed, running) or lacks the field reads as nothing.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ltx_pipeline.store.states import PhaseState

if TYPE_CHECKING:
    from collections.abc import Mapping

    from ltx_pipeline.store import PhaseRun
    from ltx_pipeline.store.reader import Record

    Row = PhaseRun | Record

__all__ = ["TRIAL_FIELDS", "autotune_sweep", "planned_audio", "planned_steps", "probe_findings", "stage_count",
           "stage_finished", "stage_output_dirs"]

_HAS_RESULT = (PhaseState.SUCCEEDED, PhaseState.DETACHED)


def _outputs(row: Row | None) -> Mapping[str, Any]:
    if row is None or row.status not in _HAS_RESULT or not isinstance(row.outputs, dict):
        return {}
    return row.outputs


def probe_findings(probe: Row | None) -> list[dict[str, Any]]:
    """``ProbeOutputs.findings``, as stored (item, status, detail, next_step)."""
    return [dict(f) for f in _outputs(probe).get("findings") or [] if isinstance(f, dict)]


def planned_steps(plan: Row | None) -> int | None:
    """``PlanOutputs.recipe.steps``: the steps per stage the plan set."""
    steps = (_outputs(plan).get("recipe") or {}).get("steps")
    return steps if isinstance(steps, int) else None


def planned_audio(plan: Row | None) -> Mapping[str, Any] | None:
    """``PlanOutputs.audio``: the plan's audio choice (``AudioPlan.to_dict()``); None without a plan or a choice."""
    audio = _outputs(plan).get("audio")
    return audio if isinstance(audio, dict) else None


def stage_output_dirs(config_patch: Row | None) -> dict[int, str]:
    """``ConfigPatchOutputs.configs``: each stage's output folder, by stage (older runs may lack one)."""
    return {int(c["stage"]): str(c["output_dir"]) for c in _outputs(config_patch).get("configs") or []
            if isinstance(c, dict) and c.get("output_dir")}


def stage_count(config_patch: Row | None) -> int:
    """``len(ConfigPatchOutputs.configs)``: the stages configured."""
    return len(_outputs(config_patch).get("configs") or [])


def stage_finished(train: Row | None, stage: int | None) -> bool:
    """Whether ``TrainOutputs.stages`` holds a trained (not pending) ``stage`` with a final checkpoint, in a
    train phase that succeeded."""
    if train is None or train.status != PhaseState.SUCCEEDED:
        return False
    return any(isinstance(s, dict) and s.get("stage") == stage and s.get("final_checkpoint") and not s.get("pending")
               for s in _outputs(train).get("stages") or [])


# ``AutotuneOutputs.trials``' fields status shows.
TRIAL_FIELDS = ("number", "knobs", "outcome", "fits", "step_time_s", "peak_vram_gb", "peak_source",
                "validation_peak_vram_gb", "validation_peak_source", "seconds", "reason")


def autotune_sweep(autotune: Row | None) -> dict[str, Any] | None:
    """``AutotuneOutputs``' study, winner, deltas, trials and pruned configs; None when no trial ran."""
    outputs = _outputs(autotune)
    trials = [t for t in outputs.get("trials") or [] if isinstance(t, dict)]
    if not trials:
        return None
    return {"study": outputs.get("study"), "winner": outputs.get("winner"), "deltas": outputs.get("deltas"),
            "trials": [{k: t.get(k) for k in TRIAL_FIELDS} for t in trials], "pruned": outputs.get("pruned") or []}
