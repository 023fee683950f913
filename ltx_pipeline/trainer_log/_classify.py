"""Classify a failed trainer run from its exit status and log tails, and propose ordered fixes.

This module owns the mapping *symptom → failure kind → proposed config change*, following the
trainer's and the skill's troubleshooting tables. It proposes; it never edits a config (the caller
asks the user, then patches through the config layer). Pure standard library.

Order of work: launcher prefixes (``[rank1]: ``, ``[default0]:``) are stripped first and the failing
rank kept (``_launcher``); the phase comes from the trainer's own log lines, the last before the
failure, with traceback frames as the second witness (``_phase``). A GPU out-of-memory in embedding
pre-computation or validation sampling is ``oom_validation`` (with the 8-bit text encoder first when it
came while caching the validation prompts); anywhere else ``oom_training``. Environment and data
failures come from ``_detect``. Kind names and the stored-name mapping live in ``_kinds``.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from ltx_pipeline.ltx.config_values import config_value
from ltx_pipeline.trainer_log._crash_causes import crash_advice
from ltx_pipeline.trainer_log._detect import (
    dataset_failure,
    dependency_failure,
    missing_file_fix,
    stale_embeddings_failure,
)
from ltx_pipeline.trainer_log._dropped import dropped_items_failure
from ltx_pipeline.trainer_log._events import ErrorSignal, Event, StepEvent
from ltx_pipeline.trainer_log._exceptions import (
    exception_failure,
    logged_error_failure,
    missing_program_failure,
    root_exception,
)
from ltx_pipeline.trainer_log._generic import (
    config_parse_failure,
    empty_dataset_failure,
    scheduler_cancel,
    signal_from_launcher,
    silent_death_while_loading,
    unavailable_backend_failure,
)
from ltx_pipeline.trainer_log._grammar import parse_lines
from ltx_pipeline.trainer_log._kinds import FAILURE_KINDS, ConfigChange, FixStep
from ltx_pipeline.trainer_log._launcher import error_records, failed_rank_from_summary, strip_launcher_prefixes
from ltx_pipeline.trainer_log._messages import SLURM_OOM_RE
from ltx_pipeline.trainer_log._oom_fixes import (
    caching_prompts,
    prompt_caching_oom_fix,
    training_oom_fix,
    validation_oom_fix,
)
from ltx_pipeline.trainer_log._phase import find_phase

__all__ = ["FAILURE_KINDS", "ConfigChange", "Failure", "FixStep", "classify_failure"]

SIGKILL = 9
SIGBUS = 7

_PYDANTIC_TITLE_RE = re.compile(r"(\d+) validation errors? for (\w+)")
_RICH_LEVEL_RE = re.compile(r"^(?:DEBUG|INFO|WARNING|ERROR|CRITICAL) +")
_RICH_LOCATION_RE = re.compile(r" +[\w.\-]+\.py:\d+$")
_NAN_LINE_RE = re.compile(r"Loss:\s*(?:nan|-?inf)\b", re.IGNORECASE)


@dataclass(frozen=True)
class Failure:
    """A classified failure: its kind, the line that proves it, config fields at fault, ordered fixes."""

    kind: str
    evidence: str
    field_paths: list[str] = field(default_factory=list)
    fix: list[FixStep] = field(default_factory=list)
    phase: str | None = None  # one of ``PHASES``, from the trainer's own lines (None: not known)
    rank: int | None = None  # the failing process's rank in a multi-process launch (None: one process/unknown)
    phase_evidence: str | None = None  # the trainer's line (or traceback frame) the phase was read from

    @property
    def config_changes(self) -> list[ConfigChange]:
        """Only the fixes that are config diffs (``path`` is not None), in order."""
        return [ConfigChange(step.path, step.value, step.reason) for step in self.fix if step.path is not None]


def classify_failure(exit_code: int | None, signal: int | None, log_tail: list[str],
                     stderr_tail: list[str] | None = None, *, config: Mapping[str, Any] | None = None,
                     initial_validation: bool | None = None) -> Failure:
    """Classify a failed run and propose fixes.

    Args:
        exit_code: the process's exit status (137 or -9 mean SIGKILL), or None if unknown.
        signal: the terminating signal number, or None.
        log_tail: the last lines of the trainer's stdout log.
        stderr_tail: the last lines of stderr (tracebacks go there), when kept separately.
        config: the run's trainer config as a mapping; when given, fix values are derived from it and
            fixes it already satisfies are dropped.
        initial_validation: whether the step-0 validation was expected to run (``validation.interval``
            set and ``skip_initial_validation`` false); None assumes the trainer default (yes).

    Returns:
        The ``Failure`` with its phase and failing rank; kinds are checked in the order config error, data
        error, stale embeddings, GPU OOM, shared-memory bus error, missing files, NaN loss, dependency error,
        host OOM (the log's evidence of it), killed (a bare SIGKILL: by a user or the kernel's OOM killer,
        the log cannot tell), and anything else is a crash.
    """
    log_lines, log_ranks = strip_launcher_prefixes(list(log_tail))
    err_lines, err_ranks = strip_launcher_prefixes(list(stderr_tail or []))
    lines, ranks = log_lines + err_lines, log_ranks + err_ranks
    finding = find_phase(lines, initial_validation=initial_validation)
    logged = error_records(list(log_tail) + list(stderr_tail or []))  # records a logging header marks as errors
    failure = _classify(exit_code, signal, log_lines, err_lines, config, finding.phase, logged)
    return replace(failure, phase=finding.phase, phase_evidence=finding.witness,
                   rank=_failing_rank(lines, ranks, failure.evidence))


def _failing_rank(lines: list[str], ranks: list[int | None], evidence: str) -> int | None:
    """The rank that printed the evidence line, else the root cause torchrun's summary names."""
    for line, rank in zip(reversed(lines), reversed(ranks), strict=True):
        if rank is not None and evidence and evidence in line:
            return rank
    return failed_rank_from_summary(lines)


def _classify(exit_code: int | None, signal: int | None, log_tail: list[str], stderr_tail: list[str],
              config: Mapping[str, Any] | None, phase: str | None, logged: list[str]) -> Failure:
    lines = log_tail + stderr_tail
    if exit_code is None and signal is None:
        signal = signal_from_launcher(lines)  # a log from outside the engine: its launcher names the signal
    events = parse_lines(log_tail) + parse_lines(stderr_tail)
    signals = [e for e in events if isinstance(e, ErrorSignal)]
    steps_logged = any(isinstance(e, StepEvent) for e in events)

    def last(kind: str) -> ErrorSignal | None:
        # The last match is the exception line itself, after any traceback source lines quoting it.
        return next((s for s in reversed(signals) if s.kind == kind), None)

    if (found := _config_error(log_tail)) or (found := _config_error(stderr_tail)):
        return found
    if (data := config_parse_failure(lines)) or (data := dataset_failure(lines, config)) or (
            data := empty_dataset_failure(lines)):
        return Failure(data.kind, data.evidence, fix=data.fix)
    if stale := stale_embeddings_failure(lines, phase, steps_logged, config):
        return Failure(stale.kind, stale.evidence, fix=stale.fix)
    if oom := [s for s in signals if s.kind == "oom"]:
        return _oom_failure(oom, config, phase, lines)
    # The line naming the bus error or the shared memory, before torch's bare "worker ... exited unexpectedly".
    shm = next((s for s in reversed(signals) if s.kind == "shm_bus_error" and "exited unexpectedly" not in s.text),
               last("shm_bus_error"))
    if shm or signal == SIGBUS or exit_code in (128 + SIGBUS, -SIGBUS):
        evidence = shm.text if shm else f"terminated by SIGBUS (exit code {exit_code}, signal {signal})"
        return Failure("shm_bus_error", evidence, fix=_shm_fix(config))
    if missing := last("missing_files"):
        if program := missing_program_failure(lines):  # the missing file is the program a launch runs
            return Failure(program.kind, program.evidence, fix=program.fix)
        return Failure("missing_files", missing.text, fix=missing_file_fix(missing.text, lines, config))
    nan_steps = [e for e in events if isinstance(e, StepEvent) and not math.isfinite(e.loss)]
    nan_signal = last("nan_loss")
    if nan_steps or nan_signal:
        evidence = next((_message(ln) for ln in lines if _NAN_LINE_RE.search(ln)), None) or (
            nan_signal.text if nan_signal else f"Step {nan_steps[0].step}: nan")
        return Failure("nan_loss", evidence, fix=_nan_fix(config, events, evidence))
    if (dependency := dependency_failure(lines, config)) or (dependency := unavailable_backend_failure(lines)):
        return Failure(dependency.kind, dependency.evidence, fix=dependency.fix)
    if killer := last("oom_killer"):
        # The "Killed process N" line names the victim; oom-kill/oom_reaper lines only bracket it.
        killer = next((s for s in reversed(signals) if s.kind == "oom_killer" and "Killed process" in s.text), killer)
        return Failure("host_oom", killer.text, fix=_host_oom_fix(config, kernel=True,
                                                                  cgroup=bool(SLURM_OOM_RE.search(killer.text))))
    if killed := last("killed") or last("worker_killed") or last("host_memory"):
        return Failure("host_oom", killed.text, fix=_host_oom_fix(config, kernel=False))
    if exit_code is None and signal is None and not signals and (silent := silent_death_while_loading(lines)):
        return Failure(silent.kind, silent.evidence, fix=silent.fix)
    if killed_by := _killed(exit_code, signal, lines):
        return killed_by
    return _last_resort(lines, signals, logged, exit_code, signal)


def _last_resort(lines: list[str], signals: list[ErrorSignal], logged: list[str], exit_code: int | None,
                 signal: int | None) -> Failure:
    """No phrase known: the root exception's type and message shape, then error records, else a crash."""
    if raised := exception_failure(lines):
        return Failure(raised.kind, raised.evidence, fix=raised.fix)
    records = [s.text for s in signals if s.kind == "logged_error"] + logged  # Rich's level column, then headers
    if (dropped := dropped_items_failure(lines)) or (  # skipped files or missing caches, no exception after them
            dropped := logged_error_failure(lines, records)):
        return Failure(dropped.kind, dropped.evidence, fix=dropped.fix)
    evidence = _crash_evidence(lines, signals, exit_code, signal)
    # A mechanism the libraries name (a kernel fault, a full disk, a collective timeout): its advice; else generic.
    return Failure("crash", evidence, fix=[FixStep(None, None, crash_advice(evidence) or (
        "Unclassified crash: read the traceback in the run's log, fix the cause, then resume from the newest "
        "checkpoint pair."
    ))])


def _killed(exit_code: int | None, signal: int | None, lines: list[str]) -> Failure | None:
    """A SIGKILL, or a job the scheduler stopped: its own line (SLURM's ``*** JOB ... CANCELLED ***``) says why."""
    cancelled = scheduler_cancel(lines)
    if signal == SIGKILL or exit_code in (128 + SIGKILL, -SIGKILL):
        if cancelled:
            return Failure("killed", f"killed (SIGKILL) by SLURM: {cancelled.evidence}", fix=cancelled.fix)
        # No out-of-memory line: who sent the signal is not in the log, so it is not guessed.
        return Failure("killed", f"killed (SIGKILL): by a user, or the kernel's OOM killer (exit code {exit_code}, "
                       f"signal {signal}; the log shows no out-of-memory line)", fix=_killed_fix())
    return Failure(cancelled.kind, cancelled.evidence, fix=cancelled.fix) if cancelled else None


def _message(line: str) -> str:
    """A physical line without the Rich level column and the trailing ``file.py:NN`` column."""
    return _RICH_LOCATION_RE.sub("", _RICH_LEVEL_RE.sub("", line.rstrip())).strip()


# -- config errors -----------------------------------------------------------------------------------


def _config_error(lines: list[str]) -> Failure | None:
    start = next((i for i, ln in enumerate(lines) if "Error: Invalid configuration data:" in ln), None)
    if start is None:
        return None
    block = [ln.rstrip("\r\n") for ln in lines[start:]]
    paths, messages = _pydantic_errors(block)
    fix = [FixStep(None, None, f"{path or '(whole config)'}: {msg}") for path, msg in zip(paths, messages, strict=True)]
    if not fix:
        fix = [FixStep(None, None, "Fix the config as the pydantic message says, then re-validate.")]
    return Failure("config_error", block[0].strip(), field_paths=[p for p in paths if p], fix=fix)


def _pydantic_errors(block: list[str]) -> tuple[list[str], list[str]]:
    """Dotted locations and messages of a pydantic ValidationError printed after the error marker.

    Layout (pydantic 2): a title ``N validation error(s) for Model``, then per error an unindented
    location line (absent for model-level validators), a two-space-indented message ending in
    ``[type=...]``, and a four-space ``For further information`` line.
    """
    paths: list[str] = []
    messages: list[str] = []
    title = _PYDANTIC_TITLE_RE.search(block[0])
    body = block[1:]
    for index, line in enumerate(body):
        is_message = line.startswith("  ") and not line.startswith("    ")
        if not is_message:
            continue
        previous = body[index - 1] if index > 0 else ""
        is_location = bool(previous) and not previous[0].isspace() and "[type=" not in previous
        paths.append(previous.strip() if is_location else "")
        messages.append(re.sub(r"\s*\[type=.*$", "", line.strip()))
        if title and len(messages) >= int(title.group(1)):
            break
    return paths, messages


# -- OOM ---------------------------------------------------------------------------------------------


def _oom_failure(oom: list[ErrorSignal], config: Mapping[str, Any] | None, phase: str | None,
                 lines: list[str]) -> Failure:
    preferred = [s for s in oom if re.search(r"OutOfMemoryError|out of memory", s.text, re.IGNORECASE)]
    evidence = (preferred or oom)[-1].text
    # The trainer logs this line only when the offload is on (trainer.py): never offer it again.
    offloaded = any(_OFFLOADED_LINE in line for line in lines)
    if phase == "embedding_precomputation" and caching_prompts(lines):
        return Failure("oom_validation", evidence, fix=prompt_caching_oom_fix(config))
    if phase == "embedding_precomputation":
        return Failure("oom_validation", evidence,
                       fix=validation_oom_fix(config, text_encoder=True, offloaded=offloaded))
    if phase == "validation_sampling":
        return Failure("oom_validation", evidence,
                       fix=validation_oom_fix(config, text_encoder=False, offloaded=offloaded))
    return Failure("oom_training", evidence, fix=training_oom_fix(config, loading=phase == "model_loading"))


_OFFLOADED_LINE = "Offloading optimizer state to CPU"


def _keep(config: Mapping[str, Any] | None, steps: list[FixStep]) -> list[FixStep]:
    """Drop config changes the given config already satisfies (no-op diffs are noise)."""
    if config is None:
        return steps
    missing = object()
    return [s for s in steps if s.path is None or config_value(config, s.path, missing) != s.value]


def _shm_fix(config: Mapping[str, Any] | None) -> list[FixStep]:
    return _keep(config, [
        FixStep("data.num_dataloader_workers", 0, "loads batches in the main process, no shared memory needed"),
        FixStep(None, None, "Or give the container a larger /dev/shm (docker run --shm-size=16g) and keep the "
                "workers."),
    ])


def _nan_fix(config: Mapping[str, Any] | None, events: list[Event], evidence: str) -> list[FixStep]:
    steps = [FixStep("acceleration.mixed_precision_mode", "bf16", "fp16 overflows; bf16 has fp32's range")]
    if re.search(r"(?i)\blatents?\b", evidence):
        # NaN already in the latents: the VAE overflowed while encoding, before any training step.
        steps.insert(0, FixStep(None, None, "The VAE produced the NaN while encoding: run it in fp32 or bf16, not "
                                "fp16 (in kohya's scripts, the no_half_vae option; or an fp16-fixed VAE), and "
                                "re-encode cached latents."))
    lr = config_value(config, "optimization.learning_rate", None)
    if lr is None:
        # The highest LR logged is the best guess of the base LR (schedulers decay from it).
        logged = [e.lr for e in events if isinstance(e, StepEvent) and math.isfinite(e.lr)]
        lr = max(logged) if logged else None
    if lr is not None:
        steps.append(FixStep("optimization.learning_rate", float(lr) / 2, "halve the learning rate"))
    else:
        steps.append(FixStep(None, None, "Lower optimization.learning_rate (for example halve it)."))
    steps += [
        FixStep("acceleration.quantization", None, "rule out quantization error as the NaN source"),
        FixStep("optimization.max_grad_norm", 1.0, "clip gradients"),
        FixStep(None, None, "If NaN persists, decode a few preprocessed latents to check the data."),
    ]
    return _keep(config, steps)


def _host_oom_fix(config: Mapping[str, Any] | None, *, kernel: bool, cgroup: bool = False) -> list[FixStep]:
    workers = int(config_value(config, "data.num_dataloader_workers", 2) or 0)
    proof = ("SLURM's cgroup OOM handler ended the trainer: the job used all the memory it asked for (GPU memory "
             "was not the limit); ask for more (`#SBATCH --mem=...`; `sacct -j <job> -o MaxRSS,ReqMem` shows "
             "both) or use less." if cgroup else
             "The kernel's OOM killer ended the trainer: the host ran out of RAM (GPU memory was not the limit)."
             if kernel else
             "Most likely the host ran out of RAM (the evidence line); `dmesg -T | grep -i -E 'out of memory|killed "
             "process'` or `journalctl -k | grep -i oom` confirms it: the kernel's OOM killer logs each process "
             "it kills.")
    # Advice, not a config diff: other processes may hold the RAM, and only the user knows which.
    steps = [FixStep(None, None, proof)]
    if workers > 0:
        steps.append(FixStep(None, None, f"Lower data.num_dataloader_workers ({workers} -> {workers // 2}): each "
                             "DataLoader worker holds its own batches in host RAM."))
    steps.append(FixStep(None, None, "Free host memory (close other jobs, add RAM or swap; in a container raise its "
                         "memory limit, e.g. `docker run --memory`), then `ltx-pipeline resume` continues from the "
                         "newest checkpoint pair."))
    return steps


def _killed_fix() -> list[FixStep]:
    return [
        FixStep(None, None, "Find out who killed the trainer: `dmesg -T | grep -i -E 'out of memory|killed process'` "
                "(or `journalctl -k | grep -i oom`) names it when the kernel's OOM killer did; nothing there means "
                "a user or a tool sent SIGKILL (`kill -9`, a job scheduler's limit, a container's memory limit: "
                "check `docker inspect` / the scheduler's log)."),
        FixStep(None, None, "If it was the OOM killer, free host memory (close other jobs, add RAM or swap) or lower "
                "data.num_dataloader_workers; either way `ltx-pipeline resume` continues from the newest "
                "checkpoint pair."),
    ]


def _crash_evidence(lines: list[str], signals: list[ErrorSignal], exit_code: int | None,
                    signal: int | None) -> str:
    if raised := root_exception(lines):  # the exception itself, not the prose a user wrote after the paste
        return raised.line.strip()
    last_traceback = max((i for i, ln in enumerate(lines) if ln.startswith("Traceback (most recent call last)")),
                         default=None)
    if last_traceback is not None:
        tail = [ln.rstrip() for ln in lines[last_traceback + 1:] if ln.strip() and not ln[0].isspace()]
        if tail:
            return tail[-1]
        # A traceback cut before its exception line (a pasted excerpt): its innermost frame is what is known.
        frames = [ln.strip() for ln in lines[last_traceback + 1:] if ln.strip().startswith('File "')]
        if frames:
            return f"traceback cut before its exception line; innermost frame: {frames[-1]}"
    logged = [s for s in signals if s.kind == "logged_error"]
    if logged:
        return logged[-1].text
    non_empty = [ln.strip() for ln in lines if ln.strip()]
    return non_empty[-1] if non_empty else f"exit code {exit_code}, signal {signal}"
