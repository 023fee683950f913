"""Turn the LTX trainer's log lines into typed events, and fold those events into run progress.

This module owns the trainer's *log contract*: the exact message formats of ``ltx-trainer``
(``trainer.py``, ``validation_runner.py``, ``scripts/train.py``), the Rich handler's layout
(level column, right-aligned ``file.py:NN`` column, 80-column wrapping with 9-space continuation
lines), W&B run URLs and the error signatures that matter for classification. It also owns
``TrainingProgress``, the small accumulator that de-duplicates step lines and derives a steady-state
step time and an ETA from them. Pure standard library: the CLI imports it at start-up.

Layout facts the parser relies on (Rich ``RichHandler(show_time=False, markup=True)``, stdout not a TTY):

- A record starts with the level padded to 9 columns (``"INFO     "``); its message may be wrapped
  over several physical lines, each continuation indented by 9 spaces and padded to the width.
- The source location sits right-aligned on the *first* physical line only.
- Rich wraps at whitespace (the space is dropped) but *folds* a word longer than the message column
  mid-word; a folded piece is a single word filling the column exactly, so it is re-joined without
  a space.
- With ``markup=True`` the ``[rank N] `` format prefix is eaten as a markup tag, leaving a leading
  space; both forms are accepted.
"""

from __future__ import annotations

import math
import re
import statistics
import unicodedata
from collections.abc import Iterable
from dataclasses import dataclass

__all__ = [
    "CheckpointLoaded",
    "CheckpointLoading",
    "CheckpointRemoved",
    "CheckpointSaved",
    "DatasetLoaded",
    "ERROR_KINDS",
    "ErrorSignal",
    "Event",
    "GpuMemory",
    "LogParser",
    "OptimizerOffloaded",
    "ResumeFallback",
    "ResumingFrom",
    "SamplesSkipped",
    "StepEvent",
    "TrainableParams",
    "TrainingProgress",
    "TrainingStarted",
    "TrainingStateLoaded",
    "TrainingStateSaved",
    "TrainingStats",
    "ValidationSaved",
    "WandbRun",
    "parse_lines",
]


# --------------------------------------------------------------------------------------------------
# Events
# --------------------------------------------------------------------------------------------------


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
    | SamplesSkipped | TrainingStats | WandbRun | ErrorSignal
)

ERROR_KINDS = ("oom", "config_error", "shm_bus_error", "worker_killed", "host_memory", "missing_files",
               "traceback", "killed", "logged_error")

# --------------------------------------------------------------------------------------------------
# Patterns
# --------------------------------------------------------------------------------------------------

_LEVEL_RE = re.compile(r"(DEBUG|INFO|WARNING|ERROR|CRITICAL)(?: +|$)")
_LOCATION_TOKEN_RE = re.compile(r"[\w.\-]+\.py:\d+")
_RANK_RE = re.compile(r"\[rank \d+\]\s*")
_ANSI_RE = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
_CONTINUATION = " " * 9

# Case-insensitive and whitespace-tolerant: the skill greps lower-case, wrapped lines are re-joined.
_STEP_RE = re.compile(
    r"Step\s+(\d+)/(\d+)\s+-\s+Loss:\s*([^,\s]+),\s*LR:\s*([^,\s]+),\s*Time/Step:\s*([\d.]+)s,"
    r"\s*Total Time:\s*(?:(\d+)h\s+(\d+)m|calculating\.\.\.)",
    re.IGNORECASE,
)
_CKPT_RE = re.compile(r"(Lora|LoRA|Model) weights for step (\d+) saved in (\S.*?)\s*$")
_STATE_SAVED_RE = re.compile(r"Training state saved to (\S.*?)\s*$")
_REMOVED_RE = re.compile(r"Removed old checkpoint: (\S.*?)\s*$")
_VALIDATION_RE = re.compile(r"Validation samples for step (\d+) saved in (\S.*?)\s*$")
_OFFLOAD_RE = re.compile(r"Offloading optimizer state to CPU \(([\d.]+) GB\)")
_RESUME_TRAINING_RE = re.compile(r"Resuming training from step (\d+)\s*(?:→|->)\s*(\d+)")
_RESUMING_FROM_RE = re.compile(r"Resuming from step (\d+)")
_LOADING_CKPT_RE = re.compile(r"Loading checkpoint from (\S.*?)\s*$")
_LOADED_CKPT_RE = re.compile(r"(LoRA|Full model) checkpoint loaded successfully")
_LOADED_STATE_RE = re.compile(r"Loaded training state from (\S.*?)\s*$")
_MISMATCH_RE = re.compile(r"Training state config mismatch \((.*?)\)\.?\s*Starting from step 0")
_STATE_LOAD_FAILED_RE = re.compile(r"Failed to load training state from (.*?)\. Starting from step 0")
_STATE_RESTORE_FAILED_RE = re.compile(r"Failed to restore training state: (.*?)\. Starting from step 0")
_INVALID_STEP_RE = re.compile(r"Training state has invalid global_step=(\S+?)\.? Starting from step 0")
_NOT_FOUND_RE = re.compile(r"Could not find checkpoint at (\S.*?)\s*$")
_GPU_MEM_RE = re.compile(r"GPU memory usage after models preparation: ([\d.]+) GB")
_PARAMS_RE = re.compile(r"Trainable params count: ([\d,]+)")
_DATASET_RE = re.compile(r"Loaded dataset with ([\d,]+) samples")
_SKIPPED_RE = re.compile(r"Skipped ([\d,]+) invalid samples from ([\d,]+) total")
_WANDB_RE = re.compile(r"https://wandb\.ai/\S+?/runs/[^\s'\"<>)\]]+")
_STATS_ITEMS = {
    "total_time_minutes": (re.compile(r"Total time: ([\d.]+) minutes"), float),
    "steps_per_second": (re.compile(r"Training speed: ([\d.]+) steps/second"), float),
    "samples_per_second": (re.compile(r"Samples/second: ([\d.]+)"), float),
    "peak_gpu_memory_gb": (re.compile(r"Peak GPU memory: ([\d.]+) GB"), float),
    "num_processes": (re.compile(r"Number of processes: (\d+)"), int),
    "global_batch_size": (re.compile(r"Global batch size: (\d+)"), int),
}
_STATS_ITEM_LINE_RE = re.compile(
    r"^\s*- (Total time|Training speed|Samples/second|Peak GPU memory|Number of processes|Global batch size):"
)
_STATS_REQUIRED = ("total_time_minutes", "steps_per_second", "samples_per_second", "peak_gpu_memory_gb")

# Order matters: the first matching kind wins for a line.
_ERROR_PATTERNS = (
    ("config_error", re.compile(r"Error: Invalid configuration data:")),
    ("shm_bus_error", re.compile(r"Bus error|out of shared memory|shared memory \(shm\)", re.IGNORECASE)),
    ("worker_killed", re.compile(r"DataLoader worker \(pid[^)]*\) is killed by signal")),
    ("oom", re.compile(
        r"OutOfMemoryError|out of memory|Tried to allocate|CUBLAS_STATUS_ALLOC_FAILED|CUDNN_STATUS_ALLOC_FAILED",
        re.IGNORECASE)),
    ("host_memory", re.compile(r"(?<![A-Za-z])MemoryError\b")),
    ("missing_files", re.compile(
        r"FileNotFoundError|Configuration file .* does not exist|directory does not exist|"
        r"Dataset path does not exist|No data files found|No valid samples found|Invalid checkpoint path")),
    ("traceback", re.compile(r"^Traceback \(most recent call last\):")),
    ("killed", re.compile(r"^(?:.*: )?Killed\s*$")),
)
# Cheap pre-filter so ordinary lines skip the error regexes entirely.
_ERROR_HINT_RE = re.compile(
    r"rror|emory|llocate|ALLOC|shm|killed|Killed|Traceback|exist|No data files|No valid samples|"
    r"Invalid checkpoint"
)


def _cell_len(text: str) -> int:
    """Terminal cell width as Rich counts it (wide emoji = 2, VS16 widens its base char)."""
    if text.isascii():
        return len(text)
    width = 0
    previous = 0
    for ch in text:
        if ch == "\ufe0f":
            if previous == 1:
                width += 1
                previous = 2
            continue
        if unicodedata.combining(ch) or unicodedata.category(ch) in ("Mn", "Me", "Cf"):
            continue
        previous = 2 if unicodedata.east_asian_width(ch) in ("W", "F") else 1
        width += previous
    return width


def _error_signals(text: str) -> list[ErrorSignal]:
    if not _ERROR_HINT_RE.search(text):
        return []
    for kind, pattern in _ERROR_PATTERNS:
        if pattern.search(text):
            return [ErrorSignal(kind, text.strip())]
    return []


def _step_event(match: re.Match[str]) -> StepEvent:
    step, total, loss, lr, step_time, hours, minutes = match.groups()
    total_time = int(hours) * 3600 + int(minutes) * 60 if hours is not None else None
    return StepEvent(int(step), int(total), float(loss), float(lr), float(step_time), total_time)


def _stats_event(text: str) -> TrainingStats | None:
    values: dict[str, float | int] = {}
    for name, (pattern, kind) in _STATS_ITEMS.items():
        match = pattern.search(text)
        if match:
            values[name] = kind(match.group(1))
    if not all(name in values for name in _STATS_REQUIRED):
        return None
    return TrainingStats(**values)  # type: ignore[arg-type]


def _int(text: str) -> int:
    return int(text.replace(",", ""))


def _message_events(msg: str) -> list[Event]:
    """Events for one complete logical message (a joined Rich record or a plain line)."""
    match = _STEP_RE.search(msg)
    if match:
        return [_step_event(match)]
    events: list[Event] = []
    if "weights for step" in msg and (match := _CKPT_RE.search(msg)):
        kind = "model" if match.group(1) == "Model" else "lora"
        events.append(CheckpointSaved(int(match.group(2)), match.group(3), kind))
    elif "Training state saved to" in msg and (match := _STATE_SAVED_RE.search(msg)):
        step = re.search(r"step_(\d+)", match.group(1))
        events.append(TrainingStateSaved(match.group(1), int(step.group(1)) if step else None))
    elif "Removed old checkpoint" in msg and (match := _REMOVED_RE.search(msg)):
        events.append(CheckpointRemoved(match.group(1)))
    elif "Validation samples for step" in msg and (match := _VALIDATION_RE.search(msg)):
        events.append(ValidationSaved(int(match.group(1)), match.group(2)))
    elif "Offloading optimizer state" in msg and (match := _OFFLOAD_RE.search(msg)):
        events.append(OptimizerOffloaded(float(match.group(1))))
    elif "Starting training..." in msg:
        events.append(TrainingStarted(0, None, False))
    elif "Resuming training from step" in msg and (match := _RESUME_TRAINING_RE.search(msg)):
        events.append(TrainingStarted(int(match.group(1)), int(match.group(2)), True))
    elif "Resuming from step" in msg and (match := _RESUMING_FROM_RE.search(msg)):
        events.append(ResumingFrom(int(match.group(1))))
    elif "Loading checkpoint from" in msg and (match := _LOADING_CKPT_RE.search(msg)):
        events.append(CheckpointLoading(match.group(1)))
    elif "checkpoint loaded successfully" in msg and (match := _LOADED_CKPT_RE.search(msg)):
        events.append(CheckpointLoaded("lora" if match.group(1) == "LoRA" else "full"))
    elif "Loaded training state from" in msg and (match := _LOADED_STATE_RE.search(msg)):
        events.append(TrainingStateLoaded(match.group(1)))
    elif "Starting from step 0" in msg or "Could not find checkpoint" in msg:
        events.extend(_fallback_events(msg))
    elif "GPU memory usage after models preparation" in msg and (match := _GPU_MEM_RE.search(msg)):
        events.append(GpuMemory(float(match.group(1))))
    elif "Trainable params count" in msg and (match := _PARAMS_RE.search(msg)):
        events.append(TrainableParams(_int(match.group(1))))
    elif "Loaded dataset with" in msg and (match := _DATASET_RE.search(msg)):
        events.append(DatasetLoaded(_int(match.group(1))))
    elif "invalid samples from" in msg and (match := _SKIPPED_RE.search(msg)):
        events.append(SamplesSkipped(_int(match.group(1)), _int(match.group(2))))
    elif "Training Statistics:" in msg and (stats := _stats_event(msg)):
        events.append(stats)
    if "wandb.ai/" in msg:
        events.extend(WandbRun(url.rstrip(".,;:")) for url in _WANDB_RE.findall(msg))
    events.extend(_error_signals(msg))
    return events


def _fallback_events(msg: str) -> list[Event]:
    for kind, pattern in (
        ("config_mismatch", _MISMATCH_RE),
        ("state_load_failed", _STATE_LOAD_FAILED_RE),
        ("state_restore_failed", _STATE_RESTORE_FAILED_RE),
        ("invalid_step", _INVALID_STEP_RE),
        ("checkpoint_not_found", _NOT_FOUND_RE),
    ):
        match = pattern.search(msg)
        if match:
            return [ResumeFallback(kind, match.group(1))]
    return []


# --------------------------------------------------------------------------------------------------
# The stateful parser
# --------------------------------------------------------------------------------------------------


class LogParser:
    """Stateful line → event parser that re-joins Rich-wrapped records.

    Feed physical lines in order; a Rich record is complete when the next record or a plain line
    starts, or on ``flush()``. ``Step`` records are emitted as soon as they match in full, so live
    progress never waits for the next line; other records (checkpoint, validation, stats) surface
    when the next line arrives. Call ``flush()`` once the trainer has exited, or whenever pending
    events are needed now, accepting that a record whose continuation lines are not yet written would
    be parsed without them. Keep one parser per followed file so records split across reads re-join.
    """

    def __init__(self) -> None:
        self._pieces: list[str] = []
        self._first_line = ""
        self._location_end = -1
        self._level = ""
        self._line_widths: list[int] = []
        self._emitted = False
        self._plain_stats: list[str] | None = None

    def feed(self, line: str) -> list[Event]:
        """Parse one physical line (with or without its newline) and return any completed events."""
        line = line.rstrip("\r\n")
        if "\r" in line:
            # Carriage-return redraws (progress bars): only the last state was visible.
            line = line.rsplit("\r", 1)[-1]
        if "\x1b" in line:
            line = _ANSI_RE.sub("", line)
        level = _LEVEL_RE.match(line) if line[:1] in "DIWEC" else None
        if level:
            events = self._finish_record()
            events.extend(self._start_record(line, level))
            return events
        if self._pieces and line.startswith(_CONTINUATION):
            self._pieces.append(line[9:].rstrip())
            self._line_widths.append(_cell_len(line[9:].rstrip()))
            if not self._emitted and self._pieces[0].startswith("Step"):
                return self._try_eager_step()
            return []
        events = self._finish_record()
        events.extend(self._plain(line.rstrip()))
        return events

    def flush(self) -> list[Event]:
        """Complete any pending record or plain statistics block and return its events."""
        events = self._finish_record()
        events.extend(self._finish_plain_stats())
        return events

    # -- Rich records ------------------------------------------------------------------------------

    def _start_record(self, line: str, level: re.Match[str]) -> list[Event]:
        self._level = level.group(1)
        body = line.rstrip()
        # The location is the last space-separated token; rfind avoids a regex scan of the padding.
        cut = body.rfind(" ")
        has_location = cut >= 9 and _LOCATION_TOKEN_RE.fullmatch(body, cut + 1) is not None
        self._first_line = body
        self._location_end = cut + 1 if has_location else -1
        msg = body[level.end():cut] if has_location else body[level.end():]
        if msg.startswith("[rank "):
            msg = _RANK_RE.sub("", msg, count=1)
        msg = msg.strip()
        self._pieces = [msg]
        self._line_widths = [-1]
        self._emitted = False
        if msg.startswith("Step"):
            return self._try_eager_step()
        return []

    def _try_eager_step(self) -> list[Event]:
        match = _STEP_RE.match(self._joined())
        if match:
            self._emitted = True
            return [_step_event(match)]
        return []

    def _column_width(self) -> int | None:
        """Cells of the message column, known only when the first line carried a location."""
        if self._location_end < 0:
            return None
        return _cell_len(self._first_line[: self._location_end]) - 1 - 9

    def _joined(self) -> str:
        if len(self._pieces) == 1:
            return self._pieces[0]
        width = self._column_width()
        first_text = self._first_line[9: self._location_end].rstrip() if width is not None else ""
        widths = [_cell_len(first_text)] + self._line_widths[1:]
        text = self._pieces[0]
        for index in range(1, len(self._pieces)):
            # Rich folds only a word longer than the column, starting it on a fresh line: such a piece
            # is one word filling the column exactly. A piece with spaces that fills the column merely
            # ended at a word boundary, so the dropped space is restored.
            previous = self._pieces[index - 1]
            folded = width is not None and widths[index - 1] >= width and " " not in previous
            text += ("" if folded else " ") + self._pieces[index]
        return text

    def _finish_record(self) -> list[Event]:
        if not self._pieces:
            return []
        events: list[Event] = []
        if not self._emitted:
            text = self._joined()
            events = _message_events(text)
            if self._level in ("ERROR", "CRITICAL") and not any(isinstance(e, ErrorSignal) for e in events):
                events.append(ErrorSignal("logged_error", text))
        self._pieces = []
        self._emitted = False
        return events

    # -- plain lines (stderr, typer.echo, wandb, tracebacks) ---------------------------------------

    def _plain(self, line: str) -> list[Event]:
        if self._plain_stats is not None:
            if _STATS_ITEM_LINE_RE.match(line):
                self._plain_stats.append(line.strip())
                return []
            events = self._finish_plain_stats()
        else:
            events = []
        if not line:
            return events
        if "Training Statistics:" in line and _stats_event(line) is None:
            self._plain_stats = [line.strip()]
            return events
        msg = line.strip()
        if msg.startswith("[rank "):
            msg = _RANK_RE.sub("", msg, count=1)
        events.extend(_message_events(msg) if msg else [])
        return events

    def _finish_plain_stats(self) -> list[Event]:
        if self._plain_stats is None:
            return []
        stats = _stats_event(" ".join(self._plain_stats))
        self._plain_stats = None
        return [stats] if stats else []


def parse_lines(lines: Iterable[str]) -> list[Event]:
    """Parse a finished sequence of lines (a whole log or a tail) into events, flushing at the end."""
    parser = LogParser()
    events: list[Event] = []
    for line in lines:
        events.extend(parser.feed(line))
    events.extend(parser.flush())
    return events


# --------------------------------------------------------------------------------------------------
# Progress accumulator
# --------------------------------------------------------------------------------------------------


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
        for event in events:
            self.update(event)

    def _on_step(self, event: StepEvent) -> None:
        self.total_steps = event.total
        self.last_step = event.step if self.last_step is None else max(self.last_step, event.step)
        self.losses[event.step] = event.loss
        if self.start_step is None and event.total_time_s is None:
            # No start line seen (a log tail): "calculating..." marks the start step's micro-steps.
            self.start_step = event.step
        if event.total_time_s is None or self._is_contaminated(event.step):
            self.step_times.pop(event.step, None)
        else:
            self.step_times[event.step] = event.step_time

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
