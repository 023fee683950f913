"""Whether a lease's or a queue entry's holder is alive, judged from evidence only.

A lease lives while its holder (the engine: pid and start time) runs, or while any process its run launched
runs (a detached trainer keeps its GPUs after the engine returned; a SIGKILLed engine's trainer too). A queue
entry lives while its waiter runs. Nothing is judged dead by age alone. Rows are a ``Store``'s or a
``StoreReader``'s (``status`` reads through the light one), so only their columns are used.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ltx_pipeline.engine.processes import exit_record, heartbeat_fresh, host_id, is_alive
from ltx_pipeline.store.states import ProcessState

__all__ = ["holder_alive", "lease_alive", "process_alive"]


def holder_alive(row: Any) -> bool:
    """The process a lease or a queue entry names (pid, create_time, host) runs."""
    return bool(is_alive(int(row.pid), float(row.create_time), str(row.host)))


def process_alive(row: Any) -> bool:
    """A launched process's row (``processes``) still runs: here by pid and start time (or its supervisor's
    command line), on another host while its heartbeat is fresh and no exit record says it ended."""
    if row.status != ProcessState.RUNNING or str(row.host).startswith("slurm:"):
        return False  # a SLURM job's GPUs are on its nodes, never leased here
    exit_file = Path(f"{row.log_path}.exit")
    if row.host != host_id():
        return heartbeat_fresh(row.heartbeat_at) and exit_record(exit_file) is None
    return is_alive(int(row.pid), float(row.create_time), str(row.host), marker=str(exit_file))


def lease_alive(row: Any, store: Any) -> bool:
    """A lease is held while its holder or a process its run launched lives."""
    return holder_alive(row) or any(process_alive(p) for p in store.processes(row.run_id))
