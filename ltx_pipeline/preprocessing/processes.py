"""How many processes preprocess: one per GPU this run may use, never more than the rows one command encodes.

Owns the choice and the words that narrate it. The GPUs are the probe's, after ``CUDA_VISIBLE_DEVICES``; GPUs a
plan only assumed (``--assume-gpu``) are other hardware, not GPUs here, and a machine with no CUDA has none.
``preprocess_processes`` in the request caps the count on GPUs, and on a machine without one asks for that many
CPU ranks (gloo: for tests and development; one process is the default there). A backend whose scripts do not
shard (``Capabilities.shards_preprocessing`` False: the toy's) always gets one. The count changes how long
preprocessing takes, never what it writes: the trainer's ranks take interleaved rows and write the files one
process would (``tests/real_trainer/test_preprocess_sharded.py`` compares them byte for byte).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ltx_pipeline.outputs.probe import ProbeOutputs
from ltx_pipeline.probing.gpus import cuda_present

__all__ = ["ProcessBudget", "choose_processes", "preprocess_span", "process_budget"]


@dataclass(frozen=True)
class ProcessBudget:
    """The most ranks a preprocessing command may start, and why (in words for the narration)."""

    count: int
    why: str
    say_one: bool = False  # more were asked for than can run: the narration says why one process runs

    def for_rows(self, rows: int) -> int:
        """Ranks for a command over ``rows`` rows: a rank with no row would only load the models."""
        return max(1, min(self.count, rows))

    def words(self, processes: int) -> str:
        """The sentence the narration adds for a command of ``processes`` ranks ("" for one, as before sharding)."""
        if processes == 1:
            return f" One process: {self.why}." if self.say_one else ""
        why = self.why if processes == self.count else f"{self.why}; no more than its {processes} rows"
        return f" {processes} processes under accelerate launch share its rows ({why})."


def choose_processes(*, shards: bool, asked: int | None, gpus: int) -> ProcessBudget:
    """The budget for a backend that ``shards`` (or not), ``asked`` ranks (None: auto) and ``gpus`` usable here."""
    if not shards:
        return ProcessBudget(1, "this backend's preprocessing runs one process", say_one=bool(asked and asked > 1))
    if asked is None:
        if gpus > 1:
            return ProcessBudget(gpus, f"one per GPU: {gpus} visible")
        return ProcessBudget(1, "one GPU visible" if gpus == 1 else "no GPU here")
    if gpus and asked > gpus:
        return ProcessBudget(gpus, f"preprocess_processes {asked}, capped at the {gpus} GPU(s) visible")
    if gpus:
        return ProcessBudget(asked, f"preprocess_processes {asked}, one per GPU")
    return ProcessBudget(asked, f"preprocess_processes {asked}: CPU ranks, no GPU here")


def process_budget(ctx: Any) -> ProcessBudget:
    """The budget of this run's preprocessing (``ctx``: a phase's context, or what tests give in its place)."""
    asked = getattr(ctx.request, "preprocess_processes", None)  # tests' stand-in requests may leave it out
    if not ctx.backend.capabilities.shards_preprocessing:
        return choose_processes(shards=False, asked=asked, gpus=0)
    return choose_processes(shards=True, asked=asked, gpus=_gpus_here(ctx))


def _gpus_here(ctx: Any) -> int:
    """The GPUs this run holds for the phase (``ctx.journal.pinned``), else the probe's visible ones, when they
    are this machine's (probed, not assumed) and CUDA is here."""
    if not cuda_present():
        return 0
    probe = ctx.output(ProbeOutputs).gpus
    pinned = getattr(getattr(ctx, "journal", None), "pinned", None)
    return 0 if probe.assumed else len(pinned) if pinned else len(probe.gpus)


def preprocess_span(ctx: Any, least: int) -> tuple[int, int]:
    """The GPUs a phase that preprocesses and then launches ``least`` processes can use: (least, ranks)."""
    return least, max(least, process_budget(ctx).count)
