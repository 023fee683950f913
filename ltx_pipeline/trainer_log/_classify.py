"""Classify a failed trainer run from its exit status and log tails, and propose ordered fixes.

This module owns the mapping *symptom → failure kind → proposed config change*, following the
trainer's and the skill's troubleshooting tables. It proposes; it never edits a config (the caller
asks the user, then patches through the config layer). Pure standard library.

Validation-vs-training OOM rule (the trainer has no OOM handling, so only context tells):

1. Traceback frames decide first. Frames in ``validation_runner.py`` / ``validation_sampler.py`` /
   ``_run_distributed_validation`` / ``_sample_videos`` mean validation; frames caching the
   validation prompts (``_cache_prompt_embeddings``, ``load_text_encoder``) mean validation too, in its
   text-encoder phase. Frames in ``_training_step`` / ``backward`` / ``clip_grad_norm_`` mean training.
2. Otherwise the last event before the error decides: ``Offloading optimizer state to CPU`` (printed
   only when a validation pass begins) → validation; a validation-finished line or a Step line →
   training; the start line with no validation-finished line after it → validation when the step-0
   validation is expected (``initial_validation`` not False), because it runs before any training
   step; nothing yet (model loading) → training.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from ltx_pipeline.ltx.config_values import config_value
from ltx_pipeline.trainer_log._events import (
    ErrorSignal,
    Event,
    OptimizerOffloaded,
    StepEvent,
    TrainingStarted,
    ValidationSaved,
)
from ltx_pipeline.trainer_log._grammar import parse_lines

__all__ = ["FAILURE_KINDS", "Failure", "FixStep", "classify_failure"]

# ``host_oom`` needs the log's own evidence (a shell's "Killed", a DataLoader worker killed, MemoryError);
# a bare SIGKILL is ``killed``: a user's ``kill -9`` and the kernel's OOM killer look the same from here.
FAILURE_KINDS = ("oom_training", "oom_validation", "host_oom", "killed", "shm_bus_error", "nan_loss", "config_error",
                 "missing_files", "environment", "crash")

SIGKILL = 9
SIGBUS = 7

_VALIDATION_FRAME_RE = re.compile(
    r"validation_runner\.py|validation_sampler\.py|_run_distributed_validation|_sample_videos|run_validation"
)
_ENCODER_FRAME_RE = re.compile(r"_cache_prompt_embeddings|_load_text_encoder_and_cache_embeddings|load_text_encoder")
_TRAINING_FRAME_RE = re.compile(r"_training_step|in backward|clip_grad_norm_|torch/autograd/")
_PYDANTIC_TITLE_RE = re.compile(r"(\d+) validation errors? for (\w+)")
_RICH_LEVEL_RE = re.compile(r"^(?:DEBUG|INFO|WARNING|ERROR|CRITICAL) +")
_RICH_LOCATION_RE = re.compile(r" +[\w.\-]+\.py:\d+$")
_NAN_LINE_RE = re.compile(r"Loss:\s*(?:nan|-?inf)\b", re.IGNORECASE)


class FixStep(NamedTuple):
    """One proposed change: ``path`` is a dotted config path, or None for advice that is no config diff."""

    path: str | None
    value: Any
    reason: str


@dataclass(frozen=True)
class Failure:
    """A classified failure: its kind, the line that proves it, config fields at fault, ordered fixes."""

    kind: str
    evidence: str
    field_paths: list[str] = field(default_factory=list)
    fix: list[FixStep] = field(default_factory=list)

    @property
    def config_changes(self) -> list[FixStep]:
        """Only the fixes that are config diffs (``path`` is not None), in order."""
        return [step for step in self.fix if step.path is not None]


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
        The ``Failure``; kinds are checked in the order config error, GPU OOM, shared-memory bus error,
        missing files, NaN loss, environment, host OOM (the log's evidence of it), killed (a bare SIGKILL:
        by a user or the kernel's OOM killer, the log cannot tell), and anything else is a crash.
    """
    stderr_tail = list(stderr_tail or [])
    lines = list(log_tail) + stderr_tail
    events = parse_lines(log_tail) + parse_lines(stderr_tail)
    signals = [e for e in events if isinstance(e, ErrorSignal)]

    def last(kind: str) -> ErrorSignal | None:
        # The last match is the exception line itself, after any traceback source lines quoting it.
        return next((s for s in reversed(signals) if s.kind == kind), None)

    if (found := _config_error(log_tail)) or (found := _config_error(stderr_tail)):
        return found
    if oom := [s for s in signals if s.kind == "oom"]:
        return _oom_failure(oom, lines, parse_lines(log_tail), config, initial_validation)
    if (shm := last("shm_bus_error")) or signal == SIGBUS or exit_code in (128 + SIGBUS, -SIGBUS):
        evidence = shm.text if shm else f"terminated by SIGBUS (exit code {exit_code}, signal {signal})"
        return Failure("shm_bus_error", evidence, fix=_shm_fix(config))
    if missing := last("missing_files"):
        return Failure("missing_files", missing.text, fix=[FixStep(None, None, (
            "A path the trainer needs does not exist; check model.model_path, model.text_encoder_path, "
            "data.preprocessed_data_root, model.load_checkpoint and validation media against the evidence line."
        ))])
    nan_steps = [e for e in events if isinstance(e, StepEvent) and not math.isfinite(e.loss)]
    if nan_steps:
        evidence = next((_message(ln) for ln in lines if _NAN_LINE_RE.search(ln)), f"Step {nan_steps[0].step}: nan")
        return Failure("nan_loss", evidence, fix=_nan_fix(config, events))
    if environment := _environment_failure(lines):
        return environment
    if killed := last("killed") or last("worker_killed") or last("host_memory"):
        return Failure("host_oom", killed.text, fix=_host_oom_fix())
    if signal == SIGKILL or exit_code in (128 + SIGKILL, -SIGKILL):
        # No out-of-memory line: who sent the signal is not in the log, so it is not guessed.
        return Failure("killed", f"killed (SIGKILL): by a user, or the kernel's OOM killer (exit code {exit_code}, "
                       f"signal {signal}; the log shows no out-of-memory line)", fix=_killed_fix())
    return Failure("crash", _crash_evidence(lines, signals, exit_code, signal), fix=[FixStep(None, None, (
        "Unclassified crash: read the traceback in the run's log, fix the cause, then resume from the newest "
        "checkpoint pair."
    ))])


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


def _oom_failure(oom: list[ErrorSignal], lines: list[str], log_events: list[Event],
                 config: Mapping[str, Any] | None, initial_validation: bool | None) -> Failure:
    preferred = [s for s in oom if re.search(r"OutOfMemoryError|out of memory", s.text, re.IGNORECASE)]
    evidence = (preferred or oom)[-1].text
    frames = [ln for ln in lines if ln.lstrip().startswith('File "')]
    frame_text = "\n".join(frames)
    if _ENCODER_FRAME_RE.search(frame_text):
        return Failure("oom_validation", evidence, fix=_validation_oom_fix(config, text_encoder=True))
    if _VALIDATION_FRAME_RE.search(frame_text):
        return Failure("oom_validation", evidence, fix=_validation_oom_fix(config, text_encoder=False))
    if _TRAINING_FRAME_RE.search(frame_text):
        return Failure("oom_training", evidence, fix=_training_oom_fix(config))
    phase = "startup"
    for event in log_events:
        if isinstance(event, TrainingStarted):
            phase = "validation" if initial_validation is not False else "training"
        elif isinstance(event, OptimizerOffloaded):
            phase = "validation"
        elif isinstance(event, (ValidationSaved, StepEvent)):
            phase = "training"
    if phase == "validation":
        return Failure("oom_validation", evidence, fix=_validation_oom_fix(config, text_encoder=False))
    return Failure("oom_training", evidence, fix=_training_oom_fix(config))


def _keep(config: Mapping[str, Any] | None, steps: list[FixStep]) -> list[FixStep]:
    """Drop config changes the given config already satisfies (no-op diffs are noise)."""
    if config is None:
        return steps
    missing = object()
    return [s for s in steps if s.path is None or config_value(config, s.path, missing) != s.value]


def _smaller_dims(config: Mapping[str, Any] | None) -> list[int]:
    width, height, frames = (list(config_value(config, "validation.video_dims", None) or (960, 544, 89)) + [89])[:3]
    # Runtime geometry rule: W and H multiples of 32, frames 8k+1.
    return [max(256, width // 2 // 32 * 32), max(256, height // 2 // 32 * 32), max(9, (frames - 1) // 2 // 8 * 8 + 1)]


def _training_oom_fix(config: Mapping[str, Any] | None) -> list[FixStep]:
    batch = int(config_value(config, "optimization.batch_size", 1) or 1)
    accumulation = int(config_value(config, "optimization.gradient_accumulation_steps", 1) or 1)
    steps = [FixStep("optimization.batch_size", 1, "batch 1 is the cheapest per-step memory; raise "
                     "gradient_accumulation_steps to keep the effective batch")]
    if batch > 1:
        steps.append(FixStep("optimization.gradient_accumulation_steps", batch * accumulation,
                             f"keeps the effective batch at {batch * accumulation} with batch 1"))
    steps += [
        FixStep("optimization.enable_gradient_checkpointing", True, "trades recompute for activation memory"),
        FixStep("optimization.optimizer_type", "adamw8bit", "8-bit optimizer states take a quarter of the memory"),
    ]
    if config_value(config, "model.training_mode", "lora") == "lora":
        steps.append(FixStep("acceleration.quantization", "int8-quanto", "int8 base weights halve the model's memory"))
    steps += [
        FixStep(None, None, "Fewer frames: re-preprocess the dataset with a shorter frame bucket (8k+1 frames); "
                "this is not a config.yaml change."),
        FixStep(None, None, "Lower resolution: re-preprocess with smaller resolution buckets (multiples of 32); "
                "this is not a config.yaml change."),
        FixStep("validation.video_dims", _smaller_dims(config), "cheaper validation passes leave more headroom"),
    ]
    return _keep(config, steps)


def _validation_oom_fix(config: Mapping[str, Any] | None, *, text_encoder: bool) -> list[FixStep]:
    steps: list[FixStep] = []
    if text_encoder:
        steps.append(FixStep("acceleration.load_text_encoder_in_8bit", True,
                             "the OOM came while caching validation prompts with the full-precision Gemma"))
    inference_steps = int(config_value(config, "validation.inference_steps", 30) or 30)
    interval = config_value(config, "validation.interval", 100)
    steps += [
        FixStep("acceleration.offload_optimizer_during_validation", True,
                "moves optimizer state to CPU while sampling (no effect under FSDP)"),
        FixStep("validation.video_dims", _smaller_dims(config), "smaller validation videos need less memory"),
        FixStep("validation.inference_steps", max(5, inference_steps // 2), "fewer denoising steps per sample"),
    ]
    if interval:
        steps.append(FixStep("validation.interval", int(interval) * 2, "fewer validation passes"))
    return _keep(config, steps)


def _shm_fix(config: Mapping[str, Any] | None) -> list[FixStep]:
    return _keep(config, [
        FixStep("data.num_dataloader_workers", 0, "loads batches in the main process, no shared memory needed"),
        FixStep(None, None, "Or give the container a larger /dev/shm (docker run --shm-size=16g) and keep the "
                "workers."),
    ])


def _nan_fix(config: Mapping[str, Any] | None, events: list[Event]) -> list[FixStep]:
    steps = [FixStep("acceleration.mixed_precision_mode", "bf16", "fp16 overflows; bf16 has fp32's range")]
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


def _host_oom_fix() -> list[FixStep]:
    return [
        FixStep(None, None, "Most likely the host ran out of RAM (the evidence line); `dmesg -T | grep -i oom` or "
                "`journalctl -k | grep -i oom` confirms it: the kernel's OOM killer logs each process it kills."),
        FixStep(None, None, "Free host memory (close other jobs, add RAM or swap) or lower "
                "data.num_dataloader_workers, then resume from the newest checkpoint pair."),
    ]


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


# The trainer's environment, not the run: what real users hit most (a module missing, a torch build that its
# companions do not match, a system library absent). Each pattern, the fix it implies.
_ENVIRONMENT_PATTERNS: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"ModuleNotFoundError: No module named '([\w.]+)'"),
     "Module {0} is missing from the trainer's environment: install it there (`<trainer python> -m pip install "
     "{1}`, or `uv sync` in the checkout), then run `ltx-pipeline smoke` to check the whole environment."),
    (re.compile(r"8-bit Gemma quantization requires a CUDA device"),
     "acceleration.load_text_encoder_in_8bit needs a CUDA GPU: set it to false on this machine."),
    (re.compile(r"Could not load libtorchcodec|libavutil\.so|libavcodec\.so|libavformat\.so"),
     "torchcodec cannot load FFmpeg's shared libraries: install FFmpeg 4-7 where the trainer runs (Debian 12: "
     "apt-get install libavcodec59 libavformat59 libavutil57 libswresample4 libswscale6), or train video only."),
    (re.compile(r"operator torchvision::\w+ does not exist|(lib\w+\.so[.\d]*): cannot open shared object file"),
     "The torch build does not match torchvision/torchaudio (or a system library is missing): install the "
     "versions the trainer pins together, from one index (e.g. the default torch build, not +cpu, with the "
     "registry's torchvision and torchaudio)."),
    (re.compile(r"^(?:\S+: )?ImportError: .+"),
     "An import failed in the trainer's environment: reinstall ltx-trainer and its pinned dependencies there, "
     "then run `ltx-pipeline smoke`."),
)


def _environment_failure(lines: list[str]) -> Failure | None:
    """A failure of the trainer's environment, from its exception line, with the fix that line implies."""
    for pattern, advice in _ENVIRONMENT_PATTERNS:
        for line in reversed(lines):
            found = pattern.search(line.strip())
            if found:
                module = found.group(1) if found.groups() and found.group(1) else ""
                package = module.split(".")[0] if module else ""
                advice_text = advice.format(module, package) if "{0}" in advice else advice
                return Failure("environment", line.strip(), fix=[FixStep(None, None, advice_text)])
    return None


def _crash_evidence(lines: list[str], signals: list[ErrorSignal], exit_code: int | None,
                    signal: int | None) -> str:
    last_traceback = max((i for i, ln in enumerate(lines) if ln.startswith("Traceback (most recent call last)")),
                         default=None)
    if last_traceback is not None:
        tail = [ln.rstrip() for ln in lines[last_traceback + 1:] if ln.strip() and not ln[0].isspace()]
        if tail:
            return tail[-1]
    logged = [s for s in signals if s.kind == "logged_error"]
    if logged:
        return logged[-1].text
    non_empty = [ln.strip() for ln in lines if ln.strip()]
    return non_empty[-1] if non_empty else f"exit code {exit_code}, signal {signal}"
