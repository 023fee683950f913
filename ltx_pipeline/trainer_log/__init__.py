"""The LTX trainer's log contract: parse its lines, follow its log file, classify its failures.

Public API (pure standard library, safe to import from the CLI at start-up):

- ``LogParser``: stateful ``feed(line) -> list[Event]``, ``feed_lines(lines)`` (a block at once),
  ``feed_text(text)`` (a decoded block of whole lines, the fastest) and ``flush()``; re-joins
  Rich-wrapped records.
- ``parse_lines(lines)``: parse a finished sequence of lines.
- ``TrainingProgress``: de-duplicated steps and losses, clean step time, ``eta_seconds()``,
  ``last_losses(n)``, latest checkpoint/validation, W&B URL, end-of-run stats.
- Event types (frozen dataclasses): ``StepEvent``, ``CheckpointSaved``, ``TrainingStateSaved``,
  ``CheckpointRemoved``, ``ValidationSaved``, ``OptimizerOffloaded``, ``TrainingStarted``,
  ``ResumingFrom``, ``CheckpointLoading``, ``CheckpointLoaded``, ``TrainingStateLoaded``,
  ``ResumeFallback``, ``GpuMemory``, ``TrainableParams``, ``DatasetLoaded``, ``SamplesSkipped``, ``MediaSkipped``,
  ``TrainingStats``, ``WandbRun``, ``ErrorSignal`` (kinds in ``ERROR_KINDS``); ``Event`` is their union.
- ``LogFollower(path, offset).read_new(max_bytes, final=False) -> (lines, new_offset)``,
  ``.read_text(...) -> (text, new_offset)`` (the same lines as one string, for ``feed_text``) and
  ``read_tail(path, n)``; ``failure_tail(path)``: the lines every failure is classified from (the last
  ``FAILURE_TAIL_LINES`` after the last ``LAUNCH_BOUNDARY``).
- ``classify_failure(exit_code, signal, log_tail, stderr_tail=None, *, config=None,
  initial_validation=None) -> Failure`` with ``Failure.kind`` in ``FAILURE_KINDS``, ``Failure.phase`` in
  ``PHASES`` (or None), ``Failure.rank`` (multi-process launches) and ordered ``FixStep(path, value,
  reason)`` entries (``path`` None = advice, not a config diff; ``Failure.config_changes`` gives the
  diffs alone as ``ConfigChange``, whose ``path`` is always set). ``canonical_kind`` maps a stored kind
  of an earlier version (``LEGACY_KINDS``: ``environment`` -> ``dependency_error``) to today's name.

Import from this package only; the inner modules are private and import one way
(``_events`` <- ``_messages`` <- ``_grammar`` <- ``_classify``; ``_events`` <- ``_progress``):

- ``_events``: the event dataclasses, the ``Event`` union and ``ERROR_KINDS`` (data only).
- ``_messages``: the trainer's message formats, W&B URLs and error signatures: one message -> events.
- ``_grammar``: the Rich line layout (ANSI, level, location, wrapping): ``LogParser``, ``parse_lines``.
- ``_progress``: ``TrainingProgress``, folding events into steps, losses, checkpoints and the ETA.
- ``_follow``: ``LogFollower`` and ``read_tail``, incremental reading of the log file.
- ``_classify``: ``classify_failure``, symptom -> failure kind -> proposed fixes.
- ``_kinds`` (the kind vocabulary, ``FixStep``), ``_launcher`` (``[rankN]: ``, SLURM ``0: `` and front ends'
  prefixes), ``_phase`` (the trainer's phase lines and frames), ``_detect`` (dependency, dataset and
  stale-embedding failures), ``_generic`` (other trainers' and launchers' words: parser refusals, empty datasets,
  signals named in text), ``_exceptions`` (the root exception of a traceback, its type and message shape -> a
  kind), ``_library_errors`` (the libraries' exception types and message shapes -> kind and advice),
  ``_crash_causes`` (advice for crashes whose mechanism a library names), ``_oom_fixes`` (OOM fixes, each
  strictly cheaper than what the run used): leaves that ``_classify`` imports.
"""

from ltx_pipeline.trainer_log._classify import Failure, classify_failure
from ltx_pipeline.trainer_log._events import (
    ERROR_KINDS,
    CheckpointLoaded,
    CheckpointLoading,
    CheckpointRemoved,
    CheckpointSaved,
    DatasetLoaded,
    ErrorSignal,
    Event,
    GpuMemory,
    MediaSkipped,
    OptimizerOffloaded,
    ResumeFallback,
    ResumingFrom,
    SamplesSkipped,
    StepEvent,
    TrainableParams,
    TrainingStarted,
    TrainingStateLoaded,
    TrainingStateSaved,
    TrainingStats,
    ValidationSaved,
    WandbRun,
)
from ltx_pipeline.trainer_log._follow import (
    DEFAULT_MAX_BYTES,
    FAILURE_TAIL_LINES,
    LAUNCH_BOUNDARY,
    LogFollower,
    failure_tail,
    read_tail,
)
from ltx_pipeline.trainer_log._grammar import LogParser, parse_lines
from ltx_pipeline.trainer_log._kinds import FAILURE_KINDS, LEGACY_KINDS, PHASES, ConfigChange, FixStep, canonical_kind
from ltx_pipeline.trainer_log._progress import TrainingProgress

__all__ = [
    "DEFAULT_MAX_BYTES",
    "FAILURE_TAIL_LINES",
    "LAUNCH_BOUNDARY",
    "ERROR_KINDS",
    "FAILURE_KINDS",
    "LEGACY_KINDS",
    "PHASES",
    "CheckpointLoaded",
    "CheckpointLoading",
    "CheckpointRemoved",
    "CheckpointSaved",
    "ConfigChange",
    "DatasetLoaded",
    "ErrorSignal",
    "Event",
    "Failure",
    "FixStep",
    "GpuMemory",
    "LogFollower",
    "LogParser",
    "OptimizerOffloaded",
    "ResumeFallback",
    "ResumingFrom",
    "MediaSkipped",
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
    "canonical_kind",
    "classify_failure",
    "failure_tail",
    "parse_lines",
    "read_tail",
]
