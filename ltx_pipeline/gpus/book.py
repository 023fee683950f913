"""Taking a run's GPUs from the lease book: which ones, what blocks it, or the leases, in one transaction.

A run needs some of its candidate GPUs (``GpuNeed``); it gets the free ones, lowest index first. Blockers,
each one phrase: fewer free candidates than it needs (each busy one named: a live lease of another run, or
foreign memory use no live lease explains); a live queue entry ahead of this run (or, for a run not queued,
any live entry) waiting for one of the same candidates: strict first come, first served, so a later run
that would fit never jumps ahead of one whose GPUs it shares. Leases judged dead, and this run's own earlier
leases (a ``resume`` after the engine was killed: the driver lock proves no other engine drives it), are
deleted as the new ones are inserted; the store's unique ``(host, gpu_uuid)`` decides a race between two engines.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ltx_pipeline.gpus.devices import FOREIGN_MIB, GpuNeed, GpuRef, foreign_use
from ltx_pipeline.gpus.evidence import holder_alive, lease_alive
from ltx_pipeline.store.leases import Holder

__all__ = ["Verdict", "try_take"]


@dataclass(frozen=True)
class Verdict:
    """One try: taken (``gpus``, the ones leased), or the blockers; ``position`` is 1 + the live queue entries
    ahead (this host)."""

    taken: bool
    blockers: tuple[str, ...] = ()
    position: int = 1
    gpus: tuple[GpuRef, ...] = ()


def try_take(store: Any, run_id: int, kind: str, need: GpuNeed, holder: Holder, *,
             queued_id: int | None = None, smi: str | None = None) -> Verdict:
    """Lease ``need`` for ``run_id`` unless something blocks it (see the module docstring).

    The GPUs taken are the free candidates, this run's own (a live trainer it launched) first, then by index,
    as many as are free up to ``need.most``; fewer free than ``need.least`` blocks.

    Args:
        store: the ``Store``.
        holder: this engine (pid, start time, host).
        queued_id: this run's queue entry id (None: not queued, every live entry is ahead of it).
        smi: the nvidia-smi that reads foreign memory use (None for assumed GPUs: nothing to read).
    """
    host = holder[2]
    names = {run.id: run.name for run in store.list_runs()}
    uuids = {gpu.uuid: gpu for gpu in need.candidates}
    stale: list[int] = []
    held: dict[str, Any] = {}
    for lease in store.gpu_leases():
        if lease.host != host or (lease.run_id != run_id and lease.gpu_uuid not in uuids):
            continue
        if lease.run_id == run_id:
            stale.append(lease.id)
            if lease.gpu_uuid in uuids and lease_alive(lease, store):
                held[lease.gpu_uuid] = lease  # this run's own live trainer: its memory is not foreign
        elif lease_alive(lease, store):
            held[lease.gpu_uuid] = lease
        else:
            stale.append(lease.id)
    busy = {u: f"{uuids[u].words()} is held by run {names.get(lease.run_id, lease.run_id)} ({lease.kind}, "
               f"pid {lease.pid})" for u, lease in held.items() if lease.run_id != run_id}
    busy.update(_foreign(smi, need.candidates, held))
    ahead = [w for w in store.gpu_waiters() if w.host == host and w.run_id != run_id
             and (queued_id is None or w.id < queued_id) and holder_alive(w)]
    queued = [f"run {names.get(w.run_id, w.run_id)} waits ahead of it in the GPU queue for "
              f"{_shared(w, uuids)}" for w in ahead if _shared(w, uuids)]
    mine = {u for u, lease in held.items() if lease.run_id == run_id}
    free = sorted((g for g in need.candidates if g.uuid not in busy), key=lambda g: (g.uuid not in mine, g.index))
    if queued or len(free) < need.least:
        blockers = queued + ([] if len(free) >= need.least else [*busy.values()] or ["not enough GPUs"])
        return Verdict(False, tuple(blockers), len(ahead) + 1)
    taken = tuple(sorted(free[:need.most]))
    if not store.take_gpus(run_id, kind, [(g.index, g.uuid) for g in taken], holder, stale):
        return Verdict(False, ("another engine took one of them at the same instant",), len(ahead) + 1)
    return Verdict(True, gpus=taken)


def _foreign(smi: str | None, wanted: Sequence[GpuRef], held: dict[str, Any]) -> dict[str, str]:
    """Wanted GPUs no live lease explains that hold more than ``FOREIGN_MIB`` of memory, by UUID."""
    if smi is None:
        return {}
    used = foreign_use(smi)
    return {gpu.uuid: f"{gpu.words()} has {used[gpu.uuid]} MiB in use by a process ltx-pipeline did not start"
            for gpu in wanted if gpu.uuid not in held and used.get(gpu.uuid, 0) > FOREIGN_MIB}


def _shared(waiter: Any, uuids: dict[str, GpuRef]) -> str:
    """The wanted GPUs a queue entry waits for too ("GPU 0, GPU 1"), or "" when none."""
    return ", ".join(uuids[g["uuid"]].words() for g in waiter.gpus if g.get("uuid") in uuids)
