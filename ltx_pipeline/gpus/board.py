"""The lease book as ``queue`` and ``status`` show it: who holds which GPU, and the runs waiting, in order.

Read-only, from a ``Store`` or the light ``StoreReader``: a lease counts as held only while its holder or a
process its run launched lives (``evidence``); a queue entry keeps its place (its rank by entry order) while
its engine is gone, shown as such: it is skipped until ``resume`` re-attaches to it.
"""

from __future__ import annotations

from typing import Any

from ltx_pipeline.gpus.evidence import holder_alive, process_alive

__all__ = ["gpu_board"]


def gpu_board(store: Any) -> dict[str, Any]:
    """``{"holders": [...], "queue": [...]}``, plain JSON data (``queue --json``, ``status --json``)."""
    names = {run.id: run.name for run in store.list_runs()}
    leases = store.gpu_leases()
    # Each run's live launched processes, read once (a run holds several GPUs; they decide liveness and the board).
    live = {run_id: [p for p in store.processes(run_id) if process_alive(p)] for run_id in {le.run_id for le in leases}}
    holders = [{"gpu": lease.gpu_index, "uuid": lease.gpu_uuid, "host": lease.host, "run": names.get(lease.run_id),
                "kind": lease.kind, "pid": lease.pid, "since": _iso(lease.taken_at),
                "running": _running_on(live[lease.run_id], lease)}
               for lease in leases if holder_alive(lease) or live[lease.run_id]]
    held_by = {(h["host"], h["uuid"]): h["run"] for h in holders}
    queue: list[dict[str, Any]] = []
    for waiter in store.gpu_waiters():
        alive = holder_alive(waiter)
        queue.append({
            "position": 1 + sum(1 for q in queue if q["host"] == waiter.host), "run": names.get(waiter.run_id),
            "host": waiter.host, "pid": waiter.pid, "since": _iso(waiter.entered_at),
            "engine": "waiting" if alive else "gone (skipped until `resume` re-attaches; its place is kept)",
            "need": getattr(waiter, "need", None) or len(waiter.gpus),
            "gpus": [{"gpu": g.get("index"), "uuid": g.get("uuid"),
                      "held_by": held_by.get((waiter.host, g.get("uuid")))} for g in waiter.gpus]})
    return {"holders": holders, "queue": queue}


def _running_on(live: list[Any], lease: Any) -> list[str]:
    """The live processes of the lease's run launched on its GPU ("trial 3 (pid 412)"): pinned to it by their
    ``CUDA_VISIBLE_DEVICES``, or launched with no pin (then on every GPU the run held)."""
    found = []
    for row in live:
        if row.host != lease.host:
            continue
        env = row.env if isinstance(row.env, dict) else {}
        pinned = str(env.get("CUDA_VISIBLE_DEVICES", "")).split(",")
        if not env.get("CUDA_VISIBLE_DEVICES") or str(lease.gpu_index) in pinned:
            found.append(f"{row.kind} {row.stage} (pid {row.pid})")
    return found


def _iso(value: Any) -> str | None:
    return str(value.isoformat(timespec="seconds")) if hasattr(value, "isoformat") else value
