"""A reference-backend run through autotune on 4 assumed GPUs, and its trials' GPUs and times (#46).

Shared by tests/phases/test_parallel_trials.py and benchmarks/bench_autotune_parallel.py.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any


def sweep(root: Path, dataset: Path, parallel: int | str, *, effective_batch: int = 1,
          memory_scale: float = 22500.0) -> dict[str, Any]:
    """Drive one run through autotune; return its winner, trials, the autotune phase's wall seconds and the
    sweep's own (first trial's start to last trial's end, the sanity set's preprocessing before it left out)."""
    import phases
    from ltx_pipeline.backends.reference import ReferenceBackend
    from ltx_pipeline.engine import Outcome, Runner, approve_plan
    from ltx_pipeline.request import build_request
    from ltx_pipeline.store import Store, saved_id
    from ltx_pipeline.workspace import Workspace

    names = [p.name for p in phases.PHASES]
    registry = phases.PHASES[: names.index("autotune") + 1]
    ws = Workspace.at(root)
    ws.create()
    store = Store.open(ws.db_file)
    request = build_request({"dataset": str(dataset), "backend": "reference", "assume_gpu": "Toy GPU,32768,4",
                             "buckets": "64x64x17", "autotune_parallel": parallel,
                             "effective_batch": effective_batch})
    run = store.create_run("r", request.model_dump(mode="json"))
    runner = Runner(store, ws, registry, backend=ReferenceBackend(capacity_mib=32768, memory_scale=memory_scale))
    if runner.drive(run, request).outcome is Outcome.AWAITING_APPROVAL:
        approve_plan(store, run, approved_by="bench")
        runner.drive(run, request)
    row = store.latest_phase_runs(saved_id(run))["autotune"]
    assert row.finished_at is not None
    seconds = (row.finished_at - row.started_at).total_seconds()
    spans = [(p.create_time, _ended(p)) for p in store.processes(saved_id(run), "trial")]
    sweep_seconds = max(end for _, end in spans) - min(start for start, _ in spans) if spans else 0.0
    return {"winner": row.outputs["winner"], "seconds": seconds, "sweep_seconds": round(sweep_seconds, 2),
            "trials": trial_times(root / "optuna.db"), "outputs": row.outputs}


def _ended(process: Any) -> float:
    """When a trial process ended: its exit record's modification time (the supervisor writes it at exit)."""
    return Path(f"{process.log_path}.exit").stat().st_mtime


def trial_times(optuna_db: Path) -> list[dict[str, Any]]:
    """Each trial's number, GPUs, start and end as its Optuna trial keeps them (parallel sweeps record them)."""
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    storage = f"sqlite:///{optuna_db}"
    out = []
    for summary in optuna.get_all_study_summaries(storage):
        study = optuna.load_study(study_name=summary.study_name, storage=storage)
        for t in study.get_trials(deepcopy=False):
            attrs = t.user_attrs
            if attrs.get("trial_number") is not None:
                out.append({"number": attrs["trial_number"], "knobs": t.params, "state": t.state.name,
                            "gpus": attrs.get("gpus"), "start": attrs.get("started_at"),
                            "end": attrs.get("ended_at"), "reason": attrs.get("reason")})
    return out
