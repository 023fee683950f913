"""The typed events of the LTX trainer's log: one frozen dataclass per message the pipeline acts on.

This module owns the *vocabulary* of the log contract: ``StepEvent`` … ``ErrorSignal``, their union
``Event`` and the error kinds ``ERROR_KINDS``. It holds data only; which line produces which event
is decided in ``_messages`` and ``_grammar``, and how events add up to run progress in ``_progress``.
Invariant: this module imports nothing from the rest of the package, so every other module may
import it and none of them can form a cycle through it. Every event is frozen, hashable and
compares by value. Pure standard library.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = [
    "ERROR_KINDS",
    "CheckpointLoaded",
    "CheckpointLoading",
    "CheckpointRemoved",
    "CheckpointSaved",
    "DatasetLoaded",
    "ErrorSignal",
    "Event",
    "GpuMemory",
    "OptimizerOffloaded",
    "ResumeFallback",
    "ResumingFrom",
    "MediaSkipped",
    "SamplesSkipped",
    "StepEvent",
    "TrainableParams",
    "TrainingStarted",
    "TrainingStateLoaded",
    "TrainingStateSaved",
    "TrainingStats",
    "ValidationSaved",
    "WandbRun",
]


@dataclass(frozen=True)
class StepEvent:
    """``Step N/M - Loss: X, LR: Y, Time/Step: Zs, Total Time: Hh Mm`` (logged every 20 steps).

    ``step_time`` is the last micro-step's time times gradient accumulation; ``total_time_s`` is the
    trainer's estimate of the whole run's duration, None while it printed ``calculating...``.
    """

    step: int
    total: int
    loss: float
    lr: float
    step_time: float
    total_time_s: int | None

    def __init__(self, step: int, total: int, loss: float, lr: float, step_time: float,
                 total_time_s: int | None) -> None:
        # One dict update instead of the frozen __init__'s six object.__setattr__ calls: Step lines are
        # most of a log, so this is the parser's hottest allocation. The dataclass keeps eq, hash, repr.
        self.__dict__.update(step=step, total=total, loss=loss, lr=lr, step_time=step_time,
                             total_time_s=total_time_s)


@dataclass(frozen=True)
class CheckpointSaved:
    """``💾 Lora|Model weights for step N saved in <path>``; ``kind`` is "lora" or "model"."""

    step: int
    path: str
    kind: str


@dataclass(frozen=True)
class TrainingStateSaved:
    """``Training state saved to <path>`` (DEBUG); step parsed from ``step_NNNNN`` when present."""

    path: str
    step: int | None


@dataclass(frozen=True)
class CheckpointRemoved:
    """``Removed old checkpoint: <path>`` (keep_last_n retention)."""

    path: str


@dataclass(frozen=True)
class ValidationSaved:
    """``🎥 Validation samples for step N saved in <dir>``: a validation pass finished."""

    step: int
    directory: str


@dataclass(frozen=True)
class OptimizerOffloaded:
    """``Offloading optimizer state to CPU (X GB)``: emitted only when a validation pass begins."""

    gb: float


@dataclass(frozen=True)
class TrainingStarted:
    """``🚀 Starting training...`` (initial_step 0) or ``🚀 Resuming training from step A → B``."""

    initial_step: int
    total_steps: int | None
    resumed: bool


@dataclass(frozen=True)
class ResumingFrom:
    """``📌 Resuming from step N``: the training-state file matched and was accepted."""

    step: int


@dataclass(frozen=True)
class CheckpointLoading:
    """``📥 Loading checkpoint from <path>``."""

    path: str


@dataclass(frozen=True)
class CheckpointLoaded:
    """``✅ LoRA|Full model checkpoint loaded successfully``; ``kind`` is "lora" or "full"."""

    kind: str


@dataclass(frozen=True)
class TrainingStateLoaded:
    """``📥 Loaded training state from <path>``."""

    path: str


@dataclass(frozen=True)
class ResumeFallback:
    """A resume that silently became a fresh start (weights may still be loaded).

    ``kind``: "config_mismatch", "state_load_failed", "state_restore_failed", "invalid_step" or
    "checkpoint_not_found"; ``detail`` is the mismatch list, the error text or the path.
    """

    kind: str
    detail: str


@dataclass(frozen=True)
class GpuMemory:
    """``GPU memory usage after models preparation: X GB`` (torch memory_allocated, DEBUG)."""

    gb: float


@dataclass(frozen=True)
class TrainableParams:
    """``Trainable params count: N`` (DEBUG)."""

    count: int


@dataclass(frozen=True)
class DatasetLoaded:
    """``Loaded dataset with N samples from sources: [...]`` (DEBUG)."""

    samples: int


@dataclass(frozen=True)
class SamplesSkipped:
    """``Skipped k invalid samples from m total``."""

    skipped: int
    total: int


@dataclass(frozen=True)
class MediaSkipped:
    """Preprocessing left a media file out: ``Skipping video at <path> - has N frames, which is less
    than the minimum required frames (M)``, ``Failed to read video at <path>: <error>`` or, for audio
    datasets, ``Skipping <name> (D s) — shorter than ...`` (process_videos.py)."""

    path: str
    reason: str


@dataclass(frozen=True)
class TrainingStats:
    """The end-of-run ``📊 Training Statistics:`` block; the process fields only on multi-GPU runs."""

    total_time_minutes: float
    steps_per_second: float
    samples_per_second: float
    peak_gpu_memory_gb: float
    num_processes: int | None = None
    global_batch_size: int | None = None


@dataclass(frozen=True)
class WandbRun:
    """A W&B run URL (``https://wandb.ai/<entity>/<project>/runs/<id>``) seen anywhere in the log."""

    url: str


@dataclass(frozen=True)
class ErrorSignal:
    """A line carrying a failure signature; ``kind`` is one of ``ERROR_KINDS``, ``text`` the line."""

    kind: str
    text: str


Event = (
    StepEvent | CheckpointSaved | TrainingStateSaved | CheckpointRemoved | ValidationSaved
    | OptimizerOffloaded | TrainingStarted | ResumingFrom | CheckpointLoading | CheckpointLoaded
    | TrainingStateLoaded | ResumeFallback | GpuMemory | TrainableParams | DatasetLoaded
    | SamplesSkipped | MediaSkipped | TrainingStats | WandbRun | ErrorSignal
)

ERROR_KINDS = ("oom", "config_error", "shm_bus_error", "worker_killed", "oom_killer", "host_memory", "nan_loss",
               "missing_files", "traceback", "killed", "logged_error")
