"""Whether a run's autotune sweep runs, and why: the user's choice, the backend and the probed GPUs.

A sweep judges each trial by the GPU memory it peaks at, and who measures that memory depends on the
backend: the ``reference`` toy trainer counts its own tensors (on the CPU too), the ``simulated``
backend reads its cost surface, and the ``ltx`` backend (any other backend too) reads the real GPU:
the engine's sampler (NVML or nvidia-smi) and the trainer's statistics. On a machine whose GPUs were
only assumed (``--assume-gpu``) and that has no nvidia-smi (a planning host, a CPU test) there is no
GPU to read a trial's memory from, so the sweep would fail at its baseline trial; the plan says so up
front, as an approval blocker whose fix is ``--autotune off``. GPUs the probe found through
nvidia-smi can always be measured. Pure: the probe's facts come in as arguments.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

__all__ = ["OFF_CHOICE", "OFF_REASON", "AutotunePlan", "autotune_plan", "memory_unmeasurable"]

# How a user turns autotune off, and why it is off when they did, as every message spells them.
OFF_CHOICE = "`--autotune off` (or `autotune: off` in run.yaml)"
OFF_REASON = f"by your choice: {OFF_CHOICE}"

# Backends that measure a trial's memory themselves, with no GPU on this machine: what measures it.
_SELF_MEASURED = {
    "reference": "the reference trainer counts its own (toy) memory, on the CPU too",
    "simulated": "the simulated backend's cost surface gives each trial's step time and memory",
}
_GPU_MEASURED = ("each trial's peak GPU memory is measured on the probed GPU (the engine's NVML or nvidia-smi "
                 "sampler, and the trainer's statistics)")
_ASSUMED_MEASURED = ("each trial's peak GPU memory is measured on this machine's GPU, which nvidia-smi finds (the "
                     "engine's sampler and the trainer's statistics), and judged against the assumed GPU's capacity")


@dataclass(frozen=True)
class AutotunePlan:
    """What the plan says about autotune.

    Attributes:
        runs: whether the autotune phase runs trials.
        reason: why (or why not), one sentence for plan.md and the phase's record.
        cannot_run: why autotune, asked for, cannot run on this machine; None when it runs or is off.
        fix: what clears ``cannot_run``.
    """

    runs: bool
    reason: str
    cannot_run: str | None = None
    fix: str | None = None

    @property
    def blocker(self) -> str | None:
        """The approval blocker, with its next step, when autotune cannot run here; else None."""
        if self.cannot_run is None:
            return None
        return f"Autotune cannot run on this machine: {self.cannot_run}. Next step: {self.fix}"

    def to_dict(self) -> dict[str, object]:
        """Plain JSON data (the plan phase's ``autotune`` output)."""
        return {"runs": self.runs, "reason": self.reason, "blocker": self.blocker}


def memory_unmeasurable(backend: str, *, gpus_assumed: bool, nvidia_smi_found: bool) -> str | None:
    """Why a trial's GPU memory cannot be measured on this machine, or None when it can.

    Args:
        backend: the trainer backend's name (``ltx``, ``reference``, ``simulated``).
        gpus_assumed: whether the probe's GPUs come from ``--assume-gpu`` rather than nvidia-smi
            (the probe's ``assumed_gpu``).
        nvidia_smi_found: whether this machine has an nvidia-smi (``--nvidia-smi``,
            ``$LTX_PIPELINE_NVIDIA_SMI`` or on PATH); only asked about when the GPUs are assumed.

    Returns:
        The reason in words, or None.
    """
    if backend in _SELF_MEASURED or not gpus_assumed or nvidia_smi_found:
        return None
    return (f"the GPUs are only assumed (--assume-gpu) and this machine has no nvidia-smi, so there is no GPU here "
            f"to measure a trial's memory on (the {backend} backend reads a real GPU's memory: the engine's NVML or "
            "nvidia-smi sampler and the trainer's statistics), and the sweep would fail at its baseline trial")


def autotune_plan(choice: Literal["on", "off"], backend: str, *, gpus_assumed: bool,
                  nvidia_smi_found: bool) -> AutotunePlan:
    """Whether autotune runs for this request on this machine, why, and what blocks approval if anything.

    Args:
        choice: the request's ``autotune`` (``--autotune on|off``).
        backend: the trainer backend's name.
        gpus_assumed: the probe's ``assumed_gpu``.
        nvidia_smi_found: whether this machine has an nvidia-smi.

    Returns:
        The plan's autotune verdict: off by the user's choice, on (and how memory is measured), or
        cannot run here (with an approval blocker naming ``--autotune off``).
    """
    if choice == "off":
        return AutotunePlan(False, f"off {OFF_REASON}; no sanity trial and no sweep run, and training uses this "
                                   "plan's baseline config as is (the Training Config table)")
    why = memory_unmeasurable(backend, gpus_assumed=gpus_assumed, nvidia_smi_found=nvidia_smi_found)
    if why is not None:
        return AutotunePlan(False, f"cannot run on this machine: {why}", cannot_run=why,
                            fix=f"pass {OFF_CHOICE} to train with the plan's baseline config as is, or run on the "
                                "training machine, where nvidia-smi finds its GPUs (without --assume-gpu, they are "
                                "probed)")
    how = _SELF_MEASURED.get(backend) or (_ASSUMED_MEASURED if gpus_assumed else _GPU_MEASURED)
    return AutotunePlan(True, f"on: {how}. {OFF_CHOICE} skips it and trains the plan's baseline config as is")
