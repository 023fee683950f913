"""A reference-backend run through autotune on 4 assumed GPUs, and its trials' GPUs and times (#46).

Shared by tests/phases/test_parallel_trials.py and benchmarks/bench_autotune_parallel.py.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any


def sweep(root: Path, dataset: Path, parallel: int | str) -> dict[str, Any]:
    """Drive one run through autotune; return its winner, trials and the autotune phase's wall seconds."""
    import phases
    from ltx_pipeline.backends.reference import ReferenceBackend
    from ltx_pipeline.engine import Outcome, Runner, approve_plan
    from ltx_pipeline.request import build_request
    from ltx_pipeline.store import Store
    from ltx_pipeline.workspace import Workspace

    names = [p.name for p in phases.PHASES]
    registry = phases.PHASES[: names.index("autotune") + 1]
    ws = Workspace.at(root)
    ws.create()
    store = Store.open(ws.db_file)
    request = build_request({"dataset": str(dataset), "backend": "reference", "assume_gpu": "Toy GPU,32768,4",
                             "buckets": "64x64x17", "autotune_parallel": parallel})
    run = store.create_run("r", request.model_dump(mode="json"))
    runner = Runner(store, ws, registry, backend=ReferenceBackend(capacity_mib=32768, memory_scale=22500.0))
    if runner.drive(run, request).outcome is Outcome.AWAITING_APPROVAL:
        approve_plan(store, run, approved_by="bench")
        runner.drive(run, request)
    row = store.latest_phase_runs(run.id)["autotune"]
    seconds = (row.finished_at - row.started_at).total_seconds()
    return {"winner": row.outputs["winner"], "seconds": seconds, "trials": trial_times(root / "optuna.db"),
            "outputs": row.outputs}


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
