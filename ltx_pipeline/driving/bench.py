"""A throw-away run driven through autotune, and what its sweep cost beside the alternatives.

``bench_autotune`` creates a run on the ``simulated`` backend for one cost surface (a tiny generated
metadata dataset, the surface's GPU, every gate approved), drives it through the same code path as
``run`` up to and including the autotune phase, then reports what the sweep chose and spent (simulated
GPU seconds, summed from each trial's ``simulated_cost.json``) next to the exhaustive optimum and the
official skill's greedy procedure computed from the surface alone. Benchmarks report; they assert nothing.
"""

from __future__ import annotations

import json
import math
import tempfile
from pathlib import Path
from typing import Any

from ltx_pipeline.errors import RunFailed
from ltx_pipeline.request import RunRequest
from ltx_pipeline.store import Run, Store
from ltx_pipeline.workspace import Workspace

__all__ = ["SIMULATED_TRIAL_STEPS", "bench_autotune"]

SIMULATED_TRIAL_STEPS = 41  # what a simulated trial runs (autotune.trial_settings)
_COLD = ("chosen", "objective", "trials_run", "trials_oom", "trial_seconds", "end_to_end_seconds",
         "end_to_end_vs_best_anchor")


def bench_autotune(surface_file: Path, *, keep: Path | None = None, on_event: Any = None,
                   prior: bool = False, parallel: int | None = None) -> dict[str, Any]:
    """Run autotune on a throw-away simulated run for ``surface_file`` and return the figures.

    Args:
        surface_file: the cost surface YAML.
        keep: a folder to use as the workspace (kept); default a temporary folder, removed afterwards.
        on_event: the runner's event sink (None: silent).
        prior: first run the same surface once in the same workspace (its study seeds the second run's
            sweep as a prior), then report the second run, with the first one's figures as ``cold``.
        parallel: also simulate the sweep with this many trials at once and with one (``parallel``:
            winners, GPU-seconds, wall time; ``autotune.parallel_sim``).
    """
    from ltx_pipeline.backends.surface import load_surface

    surface_path = surface_file.expanduser().resolve()
    surface = load_surface(surface_path)
    if keep is not None:
        figures = _bench_runs(surface_path, surface, keep, on_event, prior)
    else:
        with tempfile.TemporaryDirectory(prefix="ltx-bench-") as tmp:
            figures = _bench_runs(surface_path, surface, Path(tmp), on_event, prior)
    if parallel is not None:
        figures["parallel"] = _parallel(surface, figures.pop("_space"), parallel)
    else:
        figures.pop("_space")
    return figures


def _bench_runs(surface_path: Path, surface: Any, root: Path, on_event: Any, prior: bool) -> dict[str, Any]:
    if not prior:
        return _bench(surface_path, surface, root, on_event, "bench")
    cold = _bench(surface_path, surface, root, on_event, "bench-cold")
    warm = _bench(surface_path, surface, root, on_event, "bench")
    return {**warm, "cold": {k: cold[k] for k in _COLD}}


def _parallel(surface: Any, space: dict[str, Any], slots: int) -> dict[str, Any]:
    """The sweep simulated with one slot and with ``slots`` (same schedule code as the phase's)."""
    from ltx_pipeline.autotune.parallel_sim import simulate_slots

    runs = {n: simulate_slots(surface, space["space"], space["space"][0], headroom=space["headroom"],
                              per_gpu_batch=space["per_gpu_batch"], slots=n) for n in (1, slots)}
    one, many = runs[1], runs[slots]
    keep = ("chosen", "trials_run", "trials_started", "stopped", "dropped", "gpu_seconds", "wall_seconds")
    return {"slots": slots, "sequential": {k: one[k] for k in keep}, "parallel": {k: many[k] for k in keep},
            "winner_unchanged": one["chosen"] == many["chosen"],
            "gpu_seconds_vs_sequential": _ratio(many["gpu_seconds"], one["gpu_seconds"]),
            "wall_vs_sequential": _ratio(many["wall_seconds"], one["wall_seconds"])}


def _bench(surface_path: Path, surface: Any, root: Path, on_event: Any, run_name: str) -> dict[str, Any]:
    from ltx_pipeline.driving.drive import DriveHooks, drive, phases_through
    from ltx_pipeline.store import saved_id

    ws, store, run, request = _throwaway_run(surface_path, surface, root, run_name)
    failure: str | None = None
    try:  # a bench never trains: the registry up to and including autotune
        drive(ws, store, run, request, approve_as="bench", hooks=DriveHooks(on_event=on_event or _silent),
              phases=phases_through("autotune"))
    except RunFailed as exc:  # nothing fitted: still a figure (winner null), compared with the baselines
        failure = exc.what
    return _figures(surface_path, surface, root / "workspace" / run_name, store.latest_phase_runs(saved_id(run)),
                    request, failure)


def _silent(*_: Any) -> None:
    return None


def _throwaway_run(surface_path: Path, surface: Any, root: Path,
                   run_name: str) -> tuple[Workspace, Store, Run, RunRequest]:
    """The bench's dataset (made once per root), workspace, store, and a new simulated run for the surface."""
    from ltx_pipeline.request import build_request

    data = root / "data"
    if not (data / "dataset.json").is_file():
        _write_dataset(data)
    ws = Workspace.at(root / "workspace")
    ws.create()
    store = Store.open(ws.db_file)  # a benchmark's throw-away store: always the embedded one
    request = build_request({"dataset": str(data / "dataset.json"), "backend": "simulated",
                             "surface": str(surface_path), "strategy": _strategy(surface_path),
                             **_buckets(surface_path),
                             "effective_batch": surface.per_gpu_batch * surface.gpu.count})
    return ws, store, store.create_run(run_name, request.model_dump(mode="json")), request


def _write_dataset(data: Path) -> None:
    """Real clips, read by the probe and the data check: 321 frames outlast every bucket (the chained
    default's longest); one small clip (with sound: t2v trains on audio) is encoded and copied, the
    simulated trainer reads no pixels."""
    from ltx_pipeline.ltx.sample_clips import write_clip
    from ltx_pipeline.workspace import atomic_write

    rows = [{"caption": f"bench clip {i}", "video": f"videos/clip{i}.mp4"} for i in range(4)]
    clip = write_clip(data / "videos" / "clip0.mp4", 321, 32, 32, audio=True)
    for i in range(1, len(rows)):
        atomic_write(data / "videos" / f"clip{i}.mp4", clip.read_bytes())
    atomic_write(data / "dataset.json", json.dumps(rows))


def _figures(surface_path: Path, surface: Any, run_root: Path, phase_runs: dict[str, Any], request: RunRequest,
             failure: str | None) -> dict[str, Any]:
    """The sweep's figures from the run's stored outputs (or, when nothing fitted, its trial logs)."""
    from ltx_pipeline.outputs.autotune import AutotuneOutputs
    from ltx_pipeline.outputs.plan import PlanOutputs

    plan = phase_runs["plan"]
    recipe = PlanOutputs.from_stored(plan.outputs, plan.outputs_version).recipe
    if failure is None:  # the sweep as stored, read through its versioned model
        row = phase_runs["autotune"]
        outputs = AutotuneOutputs.from_stored(row.outputs, row.outputs_version).to_stored()
    else:
        outputs = _failed_outputs(run_root, dict(recipe.knobs), request.headroom)
    training_steps = recipe.steps * len(recipe.stages)
    multi = any(len(s.buckets) > 1 for s in recipe.stages)
    space = _space(phase_runs["probe"], outputs, multi)
    anchors, greedy = _anchors(surface, space, outputs, training_steps, multi)
    seconds = _trial_seconds(outputs)
    return {"failure": failure, "surface": str(surface_path), "gpu": surface.gpu.name,
            "capacity_gb": round(surface.capacity_gb, 2), **_sweep(outputs, seconds, training_steps, anchors),
            "anchors": anchors, **_versus(seconds, outputs["objective"], anchors, greedy),
            "_space": {"space": space, "headroom": outputs["headroom"], "per_gpu_batch": outputs["per_gpu_batch"]}}


def _trial_seconds(outputs: dict[str, Any]) -> float:
    """Simulated GPU seconds the sweep's own trials spent (a prior's trials were paid by another run)."""
    seconds = 0.0
    for log in [t["log"] for t in outputs["trials"] if t.get("log") and not t.get("from_prior")]:
        cost = Path(log).parent / "outputs" / "simulated_cost.json"
        if cost.is_file():
            seconds += float(json.loads(cost.read_text(encoding="utf-8"))["gpu_seconds"])
    return seconds


def _space(probe: Any, outputs: dict[str, Any], multi: bool) -> list[dict[str, Any]]:
    """The space the sweep searched: one process's batch x accumulation kept fixed, the baseline first."""
    from ltx_pipeline.ltx.autotune import search_space
    from ltx_pipeline.outputs.probe import ProbeOutputs

    base = ProbeOutputs.from_stored(probe.outputs, probe.outputs_version).tier.base
    return search_space(base, outputs["per_gpu_batch"], multi, outputs["baseline"])


def _anchors(surface: Any, space: list[dict[str, Any]], outputs: dict[str, Any], training_steps: int,
             multi: bool) -> tuple[dict[str, Any], dict[str, Any]]:
    """The end-to-end anchors and the skill's greedy procedure, over the space the sweep searched."""
    from ltx_pipeline.ltx.autotune import end_to_end_anchors, skill_greedy

    per_gpu, headroom = outputs["per_gpu_batch"], outputs["headroom"]
    anchors = end_to_end_anchors(surface, space, headroom, per_gpu, training_steps=training_steps,
                                 trial_steps=SIMULATED_TRIAL_STEPS, multi_bucket=multi)
    return anchors, skill_greedy(surface, outputs["baseline"], per_gpu, headroom, multi_bucket=multi)


def _sweep(outputs: dict[str, Any], seconds: float, training_steps: int, anchors: dict[str, Any]) -> dict[str, Any]:
    """What the sweep chose and spent, and its end-to-end cost against the better anchor and perfect knowledge."""
    objective = outputs["objective"]
    ran = [t for t in outputs["trials"] if not t.get("from_prior")]
    end_to_end = seconds + training_steps * objective if objective is not None else None
    best_anchor = min((a["end_to_end_seconds"] for a in (anchors["greedy"], anchors["exhaustive"])
                       if a["end_to_end_seconds"] is not None), default=None)
    return {
        "chosen": outputs["winner"], "objective": objective, "trials_run": len(ran),
        "trials_oom": sum(1 for t in ran if t["outcome"].startswith("oom")),
        "trial_seconds": round(seconds, 1), "pruned": len(outputs["pruned"]), "study": outputs["study"],
        "prior": outputs.get("prior"), "training_steps": training_steps,
        "end_to_end_seconds": round(end_to_end, 1) if end_to_end is not None else None,
        "end_to_end_vs_best_anchor": _ratio(end_to_end, best_anchor),
        "end_to_end_vs_perfect_knowledge": _ratio(end_to_end, anchors["perfect_knowledge"]["end_to_end_seconds"]),
    }


def _versus(seconds: float, objective: float | None, anchors: dict[str, Any],
            greedy: dict[str, Any]) -> dict[str, Any]:
    """The exhaustive optimum and the skill, and the sweep's ratios to them."""
    skill, exhaustive = anchors["greedy"], anchors["exhaustive"]
    return {
        "exhaustive": {"chosen": exhaustive["chosen"], "objective": exhaustive["objective"]},
        "skill": {"chosen": skill["chosen"], "trials_run": greedy["trials_run"], "trials_oom": greedy["trials_oom"],
                  "trial_seconds": skill["sweep_seconds"], "objective": skill["objective"]},
        "seconds_vs_skill": _ratio(seconds, skill["sweep_seconds"]),
        "objective_vs_optimum": _ratio(objective, exhaustive["objective"]),
        "skill_objective_vs_optimum": _ratio(skill["objective"], exhaustive["objective"]),
    }


def _failed_outputs(run_root: Path, knobs: dict[str, Any], headroom: float) -> dict[str, Any]:
    """What a sweep that found no fitting config leaves: its trials (from their logs) and the plan's knobs."""
    trials = []
    for log in sorted((run_root / "overfit").glob("trial-*/train.log")):
        text = log.read_text(encoding="utf-8", errors="replace")
        trials.append({"log": str(log), "outcome": "oom" if "OutOfMemoryError" in text else "failed"})
    per_gpu = int(knobs["batch_size"]) * int(knobs.get("gradient_accumulation_steps") or 1)
    baseline = {k: knobs[k] for k in ("quantization", "optimizer_type", "batch_size",
                                      "enable_gradient_checkpointing", "gradient_accumulation_steps") if k in knobs}
    return {"trials": trials, "pruned": [], "winner": None, "objective": None, "study": None,
            "per_gpu_batch": per_gpu, "headroom": headroom, "baseline": baseline}


def _surface_plan(surface_path: Path) -> dict[str, Any]:
    from ltx_pipeline.yaml_io import load_yaml

    data = load_yaml(surface_path.read_text(encoding="utf-8")) or {}
    return data.get("plan") or {}


def _strategy(surface_path: Path) -> str:
    """A multi-bucket surface (its name says so, or its ``plan.strategy``) benches a mixed plan."""
    plan = _surface_plan(surface_path)
    if plan.get("strategy"):
        return str(plan["strategy"])
    return "mixed" if "multibucket" in surface_path.stem.replace("-", "").replace("_", "") else "single"


def _buckets(surface_path: Path) -> dict[str, str]:
    plan = _surface_plan(surface_path)
    return {"buckets": str(plan["buckets"])} if plan.get("buckets") else {}


def _ratio(a: float | None, b: float | None) -> float | None:
    if a is None or b is None or not math.isfinite(a) or not math.isfinite(b) or b == 0:
        return None
    return round(a / b, 3)
