"""``RunGpus``: a run's GPUs, taken right before each heavy phase and given back when its drive ends.

The driving layer hands one to the runner; the runner calls ``claim`` before each heavy phase it runs, with
what that phase can use (preprocessing and autotune: one rank or trial per free GPU; training: its launch's
processes): GPUs already held are kept when enough (the ones it cannot use are given back), else taken
afresh, never added to while held (no hold-and-wait between two runs). Every process the phase launches is
pinned to the GPUs held. ``release`` runs when the drive ends, whatever ended it.
Without ``--queue`` a busy GPU refuses the run in one line; with it (or when the run already has a queue
entry: a ``resume`` re-attaches to its place) the run waits its turn, first come, first served. Ctrl-C while
waiting removes the entry and says so. ``release`` keeps the leases while a process the run launched still
runs (a detached trainer holds its GPUs), else deletes them.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from typing import Any

import psutil

from ltx_pipeline.engine.processes import host_id
from ltx_pipeline.env_names import QUEUE_POLL_ENV
from ltx_pipeline.errors import Refused
from ltx_pipeline.gpus.book import Verdict, try_take
from ltx_pipeline.gpus.devices import GpuNeed, GpuRef, run_gpus
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
        self._say: Callable[[str], None] | None = None  # the current phase's narrate: a give-back is said

    def claim(self, ctx: Any, span: tuple[int, int] | None = None) -> None:
        """Hold the GPUs a heavy phase needs (``span``: its (least, most), else its launch's processes): keep
        those held when enough (giving back what it cannot use), else take them, wait in the queue, or refuse.
        Every process the phase launches is pinned to the GPUs held (``ctx.journal.pin``).

        Raises:
            Refused: too few candidate GPUs are free and the run is not queued.
            KeyboardInterrupt: Ctrl-C while queued (the entry is removed first).
        """
        need, smi = _wanted(ctx, span)
        if need is None or not need.candidates:
            self.held = []
            return
        self.kind = getattr(ctx, "phase", "") or self.kind  # the board says what the GPUs are held for
        self._say = getattr(ctx, "narrate", None)
        if self.held and len(self.held) >= need.least:
            self._keep(self.held[:need.most])
            self.store.relabel_gpus(self.run_id, self.kind)
        else:
            if self.held:  # too few for this phase: give them back and queue as any run (no hold-and-wait)
                self.store.release_gpus(self.run_id)
            self._take(ctx, need, smi)
        ctx.journal.pin([g.index for g in self.held or []], narrow=self._narrowed)

    def _narrowed(self, count: int) -> list[int]:
        """Keep the first ``count`` GPUs held, give the rest back; the indices kept."""
        self._keep((self.held or [])[:count])
        return [g.index for g in self.held or []]

    def _keep(self, kept: list[GpuRef]) -> None:
        extra = [g for g in self.held or [] if g not in kept]
        if extra:
            self.store.release_some_gpus(self.run_id, [g.uuid for g in extra])
            if self._say is not None:
                self._say(f"Gave back {_words(extra)}: {self.kind} uses {len(kept)}; holding {_words(kept)}.")
        self.held = kept

    def _take(self, ctx: Any, need: GpuNeed, smi: str | None) -> None:
        holder = _me()
        entry = next((w for w in self.store.gpu_waiters() if w.run_id == self.run_id), None)
        queued_id: int | None = None
        if self.queue or entry is not None:  # a queued run's resume keeps its place without --queue
            queued_id = self.store.enter_queue(self.run_id, self.kind, [(g.index, g.uuid) for g in need.candidates],
                                               holder, need=need.least).id
        try:
            self._wait(ctx, need, holder, smi, queued_id)
        except KeyboardInterrupt:
            if queued_id is not None and self.store.leave_queue(self.run_id, "interrupted (Ctrl-C)"):
                ctx.warn(f"Run {self.run_name} left the GPU queue (Ctrl-C); `ltx-pipeline resume --workspace "
                         f"{self.workspace} --run {self.run_name} --queue` queues it again, at the end.")
            raise

    def _wait(self, ctx: Any, need: GpuNeed, holder: Holder, smi: str | None, queued_id: int | None) -> None:
        said = ""
        while True:
            verdict = try_take(self.store, self.run_id, self.kind, need, holder, queued_id=queued_id, smi=smi)
            if verdict.taken:
                self.held = list(verdict.gpus)
                ctx.narrate(f"Holding {_words(self.held)} (every process the run launches is pinned to "
                            f"{'it' if len(self.held) == 1 else 'them'}) until the run finishes, fails or is "
                            "stopped; a GPU a later step does not use is given back, and said.")
                return
            if queued_id is None:
                raise self._busy(need, verdict)
            line = (f"Waiting in the GPU queue, position {verdict.position}: {'; '.join(verdict.blockers)}. "
                    "Ctrl-C leaves the queue.")
            if line != said:
                ctx.narrate(line)
                said = line
            time.sleep(_poll_s())

    def _busy(self, need: GpuNeed, verdict: Verdict) -> Refused:
        return Refused(f"Run {self.run_name} needs {need.words()}, and too few are free: "
                       f"{'; '.join(verdict.blockers)}",
                       where=", ".join(f"{g.words()} ({g.uuid})" for g in need.candidates),
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


def _wanted(ctx: Any, span: tuple[int, int] | None) -> tuple[GpuNeed | None, str | None]:
    """What this phase needs of this machine's GPUs, and the nvidia-smi that reads foreign use on them."""
    if getattr(ctx.request, "slurm", False) or not ctx.has_output("probe"):
        return None, None  # a SLURM job's GPUs are on its nodes
    probe = ctx.output(ProbeOutputs).gpus
    launch = ctx.output(PlanOutputs).launch if ctx.has_output("plan") else None
    need = run_gpus(probe.gpus, launch.processes if launch else None, span)
    return need, None if probe.assumed else probe.source


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
