"""How many training processes a run launches, and how: one rule for the plan and for validate.

The plan states the launch it will make and validate builds it; both call ``launch_shape``, so the
process count, the distributed strategy (DDP for LoRA, FSDP for a full fine-tune, facts §3) and the
effective batch (batch x accumulation x processes) in plan.md are the ones launched. The toy
reference trainer runs one CPU process unless ``--processes`` asks for more, whatever GPUs the plan
assumes; the ltx and simulated backends run one process per GPU. Over ``--nodes N`` machines every
node runs the same number of processes (this machine's, as probed: the nodes are assumed alike), so
the launch has N x P processes in all and the effective batch is counted over all of them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

__all__ = ["Distributed", "LaunchShape", "distributed_mode", "launch_shape"]


# The launch modes the trainer's accelerate configs provide (configs/accelerate/*.yaml); "none": one process.
Distributed = Literal["none", "ddp", "ddp-compile", "fsdp", "fsdp-compile"]


def distributed_mode(training_mode: str, processes: int) -> Distributed:
    """DDP for LoRA and FSDP for full fine-tunes on several processes (the skill's rule); else none."""
    if processes <= 1:
        return "none"
    return "fsdp" if training_mode == "full" else "ddp"


@dataclass(frozen=True)
class LaunchShape:
    """The launch a run will make."""

    processes: int  # on each node
    distributed: Distributed
    reason: str  # why this many processes
    nodes: int = 1

    @property
    def total(self) -> int:
        """Processes over all nodes: what the batch rules and the effective batch count."""
        return self.processes * self.nodes

    def words(self) -> str:
        """One line for plan.md and status, e.g. ``accelerate launch, 4 processes, DDP``."""
        strategy = "FSDP (configs/accelerate/fsdp.yaml)" if self.distributed == "fsdp" else "DDP"
        if self.nodes > 1:
            how = (f"accelerate launch on {self.nodes} nodes: {self.nodes} node(s) x {self.processes} process(es) "
                   f"= {self.total} processes, {strategy}")
        elif self.processes == 1:
            how = "single process (python scripts/train.py)"
        else:
            how = f"accelerate launch, {self.processes} processes, {strategy}"
        return f"{how}; {self.reason}"


def launch_shape(*, backend: str, gpu_count: int, requested: int | None, training_mode: str,
                 nodes: int = 1, samples: int | None = None) -> LaunchShape:
    """The process count and strategy for a run.

    Args:
        backend: ``ltx``, ``reference`` or ``simulated``.
        gpu_count: GPUs the probe found (or assumed).
        requested: ``--processes`` when given (per node).
        training_mode: ``lora`` or ``full``.
        nodes: machines (``--nodes``), each running the same number of processes.
        samples: the samples the plan counted to train on, when it could: one process per GPU stops there, since
            a process with no sample has no batch (with ``drop_last`` every epoch would be empty).
    """
    if requested:
        processes, reason = requested, f"{requested} process(es) as requested (--processes)"
    elif backend == "reference":
        processes = 1
        reason = ("the reference toy trainer runs one process on this machine"
                  + (f" ({gpu_count} GPU(s) planned for; pass --processes N for N processes)"
                     if gpu_count > 1 else ""))
    else:
        processes = max(1, gpu_count)
        reason = f"one process per GPU ({processes})"
        if samples is not None and nodes == 1 and 0 < samples < processes:
            processes = samples
            reason = (f"{processes} process(es): one per GPU, but the dataset gives {samples} sample(s) to train on "
                      f"and a process with no sample has no batch ({gpu_count - samples} GPU(s) left idle)")
    if nodes > 1:
        reason += f", on each of {nodes} nodes" + ("" if requested or backend == "reference"
                                                   else " (assumed alike: this machine's GPUs)")
    return LaunchShape(processes, distributed_mode(training_mode, processes * nodes), reason, nodes)
