"""``RunGpus``: a run's GPUs, taken right before its first heavy phase and given back when its drive ends.

The driving layer hands one to the runner; the runner calls ``claim`` before each heavy phase it runs (the
first call takes the GPUs, later ones find them held) and ``release`` when the drive ends, whatever ended it.
Without ``--queue`` a busy GPU refuses the run in one line; with it (or when the run already has a queue
entry: a ``resume`` re-attaches to its place) the run waits its turn, first come, first served. Ctrl-C while
waiting removes the entry and says so. ``release`` keeps the leases while a process the run launched still
runs (a detached trainer holds its GPUs), else deletes them.
"""

from __future__ import annotations

import os
import time
from typing import Any

import psutil

from ltx_pipeline.engine.processes import host_id
from ltx_pipeline.env_names import QUEUE_POLL_ENV
from ltx_pipeline.errors import Refused
from ltx_pipeline.gpus.book import Verdict, try_take
from ltx_pipeline.gpus.devices import GpuRef, run_gpus
from ltx_pipeline.gpus.evidence import process_alive
from ltx_pipeline.outputs.plan import PlanOutputs
from ltx_pipeline.outputs.probe import ProbeOutputs
from ltx_pipeline.store.leases import Holder

__all__ = ["RunGpus"]



class RunGpus:
    """The GPUs of one run's drive (see the module docstring)."""

    def __init__(self, store: Any, run_id: int, run_name: str, workspace: str, *, queue: bool = False,
                 kind: str = "run") -> None:
        self.store, self.run_id, self.run_name, self.workspace = store, run_id, run_name, workspace
        self.queue, self.kind = queue, kind
        self.held: list[GpuRef] | None = None

    def claim(self, ctx: Any) -> None:
        """Hold the run's GPUs before a heavy phase: take them, wait in the queue, or refuse.

        Raises:
            Refused: a wanted GPU is busy and the run is not queued.
            KeyboardInterrupt: Ctrl-C while queued (the entry is removed first).
        """
        if self.held is not None:
            return
        wanted, smi = _wanted(ctx)
        if not wanted:
            self.held = []
            return
        holder = _me()
        entry = next((w for w in self.store.gpu_waiters() if w.run_id == self.run_id), None)
        queued_id: int | None = None
        if self.queue or entry is not None:  # a queued run's resume keeps its place without --queue
            queued_id = self.store.enter_queue(self.run_id, self.kind, [(g.index, g.uuid) for g in wanted],
                                               holder).id
        try:
            self._wait(ctx, wanted, holder, smi, queued_id)
        except KeyboardInterrupt:
            if queued_id is not None and self.store.leave_queue(self.run_id, "interrupted (Ctrl-C)"):
                ctx.warn(f"Run {self.run_name} left the GPU queue (Ctrl-C); `ltx-pipeline resume --workspace "
                         f"{self.workspace} --run {self.run_name} --queue` queues it again, at the end.")
            raise

    def _wait(self, ctx: Any, wanted: list[GpuRef], holder: Holder, smi: str | None, queued_id: int | None) -> None:
        said = ""
        while True:
            verdict = try_take(self.store, self.run_id, self.kind, wanted, holder, queued_id=queued_id, smi=smi)
            if verdict.taken:
                self.held = wanted
                ctx.narrate(f"Holding {_words(wanted)} until the run finishes, fails or is stopped.")
                return
            if queued_id is None:
                raise self._busy(wanted, verdict)
            line = (f"Waiting in the GPU queue, position {verdict.position}: {'; '.join(verdict.blockers)}. "
                    "Ctrl-C leaves the queue.")
            if line != said:
                ctx.narrate(line)
                said = line
            time.sleep(_poll_s())

    def _busy(self, wanted: list[GpuRef], verdict: Verdict) -> Refused:
        return Refused(f"Run {self.run_name} needs {_words(wanted)}, which is busy: {'; '.join(verdict.blockers)}",
                       where=", ".join(f"{g.words()} ({g.uuid})" for g in wanted),
                       fix=f"wait your turn with `ltx-pipeline resume --workspace {self.workspace} --run "
                           f"{self.run_name} --queue`, or resume once it is free")

    def release(self) -> None:
        """Give the GPUs back, unless a process the run launched still runs on them (then it keeps them)."""
        if not self.held:
            self.held = None
            return
        self.held = None
        if not any(process_alive(p) for p in self.store.processes(self.run_id)):
            self.store.release_gpus(self.run_id)


def _wanted(ctx: Any) -> tuple[list[GpuRef], str | None]:
    """The GPUs this run's launch uses on this machine, and the nvidia-smi that reads foreign use on them."""
    if getattr(ctx.request, "slurm", False) or not ctx.has_output("probe"):
        return [], None  # a SLURM job's GPUs are on its nodes
    probe = ctx.output(ProbeOutputs).gpus
    launch = ctx.output(PlanOutputs).launch if ctx.has_output("plan") else None
    return run_gpus(probe.gpus, launch.processes if launch else None), None if probe.assumed else probe.source


def _me() -> Holder:
    return os.getpid(), psutil.Process(os.getpid()).create_time(), host_id()


def _words(gpus: list[GpuRef]) -> str:
    return ", ".join(g.words() for g in gpus)


def _poll_s() -> float:
    try:
        value = float(os.environ.get(QUEUE_POLL_ENV, "") or 2.0)
    except ValueError:
        value = 2.0
    return value if value > 0 else 2.0
