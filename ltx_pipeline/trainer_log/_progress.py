"""Run progress from the LTX trainer's log: fold typed events into steps, losses, checkpoints and an ETA.

This module owns ``TrainingProgress``, the small accumulator that de-duplicates step lines (with
gradient accumulation the trainer logs a step several times), keeps the last loss per step, and
derives a steady-state step time and an ETA from the Time/Step samples that no validation pass,
checkpoint save or warm-up contaminated. Invariant: it reads events only, never log text, so it
imports ``_events`` and nothing else from the package; folding the same events in the same order
always gives the same state. Pure standard library.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable

from ltx_pipeline.trainer_log._events import (
    CheckpointRemoved,
    CheckpointSaved,
    ErrorSignal,
    Event,
    GpuMemory,
    ResumeFallback,
    StepEvent,
    TrainingStarted,
    TrainingStateSaved,
    TrainingStats,
    ValidationSaved,
    WandbRun,
)

__all__ = ["TrainingProgress"]


class TrainingProgress:
    """Folds events into the run's progress: last step, losses, checkpoints and a clean ETA.

    De-duplication: with gradient accumulation A > 1 the trainer logs the same step A times (and
    ``Step 0/N`` before the first optimizer step); losses are kept per step, the last value wins.

    Which Time/Step samples are *contaminated* (the rule, from the trainer's timing code): Time/Step is
    the last micro-step's wall time times A, measured after the batch fetch, and it includes any
    validation pass and checkpoint save that ran inside that micro-step. So a sample is excluded when

    - its step had a validation or checkpoint event (those lines precede the Step line of the same
      step), or is a multiple of ``validation_interval`` / ``checkpoint_interval`` when given; or
    - its step is the start step of the current process (step 0, or the resumed step): those lines
      come from the first micro-steps before any optimizer step (CUDA/compile warm-up) and are the
      ones printing ``Total Time: calculating...``.

    Model load and the step-0 validation happen before the loop, so they never enter Time/Step; the
    trainer's own ``Total Time`` does include them, which is why the ETA here ignores it.
    """

    def __init__(self, total_steps: int | None = None, *, validation_interval: int | None = None,
                 checkpoint_interval: int | None = None, window: int = 5) -> None:
        self.total_steps = total_steps
        self.validation_interval = validation_interval
        self.checkpoint_interval = checkpoint_interval
        self.window = window
        self.last_step: int | None = None
        self.start_step: int | None = None
        self.resumed = False
        self.losses: dict[int, float] = {}
        self.step_times: dict[int, float] = {}
        self.busy_steps: set[int] = set()
        self.checkpoints: list[CheckpointSaved] = []
        self.removed: list[str] = []
        self.validations: list[ValidationSaved] = []
        self.resume_fallbacks: list[ResumeFallback] = []
        self.errors: list[ErrorSignal] = []
        self.stats: TrainingStats | None = None
        self.wandb_url: str | None = None
        self.gpu_memory_gb: float | None = None

    def update(self, event: Event) -> None:
        """Fold one event in."""
        if isinstance(event, StepEvent):
            self._on_step(event)
        elif isinstance(event, ValidationSaved):
            self.validations.append(event)
            self._mark_busy(event.step)
        elif isinstance(event, CheckpointSaved):
            self.checkpoints.append(event)
            self._mark_busy(event.step)
        elif isinstance(event, TrainingStateSaved) and event.step is not None:
            self._mark_busy(event.step)
        elif isinstance(event, CheckpointRemoved):
            self.removed.append(event.path)
        elif isinstance(event, TrainingStarted):
            self.start_step = event.initial_step
            self.resumed = event.resumed
            if event.total_steps is not None:
                self.total_steps = event.total_steps
        elif isinstance(event, ResumeFallback):
            self.resume_fallbacks.append(event)
        elif isinstance(event, ErrorSignal):
            self.errors.append(event)
        elif isinstance(event, TrainingStats):
            self.stats = event
        elif isinstance(event, WandbRun):
            self.wandb_url = event.url
        elif isinstance(event, GpuMemory):
            self.gpu_memory_gb = event.gb

    def feed(self, events: Iterable[Event]) -> None:
        """Fold several events in, in order."""
        update, losses, step_times, busy = self.update, self.losses, self.step_times, self.busy_steps
        for event in events:
            if type(event) is not StepEvent:
                update(event)
                continue
            # _on_step inlined over the log's bulk (same rule; test_log_parse_speedups checks they agree).
            step, total_time = event.step, event.total_time_s
            self.total_steps = event.total
            last = self.last_step
            if last is None or step > last:
                self.last_step = step
            losses[step] = event.loss
            start = self.start_step
            if start is None and total_time is None:
                self.start_step = start = step
            if (total_time is None or step in busy or step == start
                    or ((self.validation_interval or self.checkpoint_interval) and self._is_contaminated(step))):
                step_times.pop(step, None)
            else:
                step_times[step] = event.step_time

    def _on_step(self, event: StepEvent) -> None:
        step, total_time = event.step, event.total_time_s
        self.total_steps = event.total
        if self.last_step is None or step > self.last_step:
            self.last_step = step
        self.losses[step] = event.loss
        if self.start_step is None and total_time is None:
            # No start line seen (a log tail): "calculating..." marks the start step's micro-steps.
            self.start_step = step
        if (total_time is None or step in self.busy_steps or step == self.start_step
                or ((self.validation_interval or self.checkpoint_interval) and self._is_contaminated(step))):
            # The set and start-step tests inline, the interval rule only when an interval is known:
            # the same rule as _is_contaminated, at a cost the log's bulk can afford.
            self.step_times.pop(step, None)
        else:
            self.step_times[step] = event.step_time

    def _mark_busy(self, step: int) -> None:
        self.busy_steps.add(step)
        self.step_times.pop(step, None)

    def _is_contaminated(self, step: int) -> bool:
        if step in self.busy_steps or step == self.start_step:
            return True
        validation, checkpoint = self.validation_interval, self.checkpoint_interval
        return bool(validation and step % validation == 0) or bool(checkpoint and step % checkpoint == 0)

    # -- queries -----------------------------------------------------------------------------------

    def clean_step_times(self) -> list[float]:
        """Clean Time/Step samples (one per step, step order)."""
        return [self.step_times[step] for step in sorted(self.step_times)]

    def steady_step_time(self) -> float | None:
        """Median of the last ``window`` clean samples; None until there are at least 2."""
        samples = self.clean_step_times()
        if len(samples) < 2:
            return None
        return statistics.median(samples[-self.window:])

    def eta_seconds(self) -> float | None:
        """Remaining steps × steady step time; None means "measuring step time..."."""
        steady = self.steady_step_time()
        if steady is None or self.total_steps is None or self.last_step is None:
            return None
        return max(self.total_steps - self.last_step, 0) * steady

    def last_losses(self, n: int = 5) -> list[float]:
        """The losses of the last ``n`` distinct steps, oldest first (see ``losses`` for the steps)."""
        return [self.losses[step] for step in sorted(self.losses)[-n:]]

    @property
    def percent(self) -> float | None:
        """Completion in percent of the target step count, when both are known."""
        if self.last_step is None or not self.total_steps:
            return None
        return 100.0 * self.last_step / self.total_steps

    @property
    def has_nan(self) -> bool:
        """True once any logged loss is NaN or infinite."""
        return any(not math.isfinite(loss) for loss in self.losses.values())

    @property
    def latest_checkpoint(self) -> CheckpointSaved | None:
        """The highest-step checkpoint saved in this log (the trainer has no final-weights alias)."""
        return max(self.checkpoints, key=lambda c: c.step, default=None)

    @property
    def latest_validation(self) -> ValidationSaved | None:
        """The last validation pass that finished."""
        return self.validations[-1] if self.validations else None
