"""Failures in the words other trainers and launchers use, for logs ``diagnose`` reads from outside the engine.

Users bring logs from ``accelerate launch``, DeepSpeed's and torchrun's launchers and from other trainers' scripts
(kohya's sd-scripts and musubi-tuner, diffusion-pipe, SimpleTuner, ai-toolkit). Three things they share:
a bad command line or config file fails in its parser's words (argparse's ``train.py: error: ...``, TOML and YAML
decoders, schema validators such as voluptuous and pydantic) before any work; a dataset that yields no sample fails
with "empty"/"no data found" (or torch's sampler's ``num_samples=0``) deep inside a stack, often as a bare
``AssertionError``; a process killed by a signal is named only in the launcher's text
(``exits with return code = -9``, ``died with <Signals.SIGKILL: 9>``) when no exit status is passed in; and an
optional compiled package (flash-attn, xformers) that does not import is caught by the model code's own check, a
bare ``AssertionError`` under ``assert FLASH_ATTN_2_AVAILABLE``. Input lines have their launcher prefixes stripped
already. Pure standard library.
"""

from __future__ import annotations

import re

from ltx_pipeline.trainer_log._detect import Finding
from ltx_pipeline.trainer_log._kinds import FixStep

__all__ = ["config_parse_failure", "empty_dataset_failure", "scheduler_cancel", "signal_from_launcher",
           "silent_death_while_loading", "unavailable_backend_failure"]

_ARGPARSE_RE = re.compile(r"^\S+: error: (?:argument |unrecognized arguments|the following arguments are required|"
                          r"ambiguous option|invalid choice)|"
                          # click's and typer's (the LTX trainer's scripts use typer): an option by its dashes.
                          r"\b(?:Missing option ['\"]--|No such option: --|Invalid value for ['\"]--|"
                          r"Got unexpected extra arguments? \()")
# Decoders (TOML, YAML) and the schema libraries trainers validate their configs with: voluptuous (kohya's
# sd-scripts and musubi-tuner), pydantic, jsonschema.
_CONFIG_FILE_RE = re.compile(r"TomlDecodeError|TOMLDecodeError|yaml\.(?:scanner|parser)\.\w+Error|"
                             r"config file is invalid|Invalid config(?:uration)? file|Invalid user config|"
                             r"voluptuous\.error\.\w*Invalid|extra keys not allowed @ data|"
                             r"\d+ validation errors? for \w*Config\b|jsonschema\.exceptions\.ValidationError")


def config_parse_failure(lines: list[str]) -> Finding | None:
    """A command line or config file the trainer's parser refused, with the line ending hint when it applies."""
    evidence = next((ln.strip() for ln in lines if _ARGPARSE_RE.search(ln.strip()) or _CONFIG_FILE_RE.search(ln)),
                    None)
    if evidence is None:
        return None
    steps = [FixStep(None, None, f"The trainer's parser refused its arguments or config file ({evidence}): fix "
                     "the option or value it names, then launch again.")]
    if "\\r" in evidence or "\r" in evidence:
        steps.insert(0, FixStep(None, None, "A value ends in a carriage return (\\r): the config or launch script "
                                "was saved with Windows line endings; convert it to LF (`dos2unix <file>`)."))
    return Finding("config_error", evidence, steps)


# "dataset is empty" (also a class: "ConcatenatedBatchedDataset is empty"), "Processed dataset was empty", kohya's
# "No data found", "no training items found", and torch's own refusal of an empty dataset: its RandomSampler's
# "num_samples should be a positive integer value, but got num_samples=0".
_EMPTY_RE = re.compile(r"(?i)(?:\w*data ?set|\bdata|\bbatches)\b[\w\s]{0,30}\b(?:is|was) empty\b|\bNo data found\b|"
                       r"\bno (?:training )?(?:images|items|samples|videos) (?:were )?found\b(?! in the cache)|"
                       r"num_samples should be a positive integer value, but got num_samples=0\b")


def empty_dataset_failure(lines: list[str]) -> Finding | None:
    """The dataset yielded no sample to train on: a layout, path or bucketing problem, not the code."""
    evidence = next((ln.strip() for ln in reversed(lines) if _EMPTY_RE.search(ln)), None)
    if evidence is None:
        return None
    return Finding("dataset_error", evidence, [
        FixStep(None, None, f"The trainer found no sample to train on ({evidence}): check that the dataset path "
                "points where the files are, in the layout the trainer expects (kohya's scripts: train_data_dir is "
                "the parent of `<repeats>_<name>` folders), with extensions it reads."),
        FixStep(None, None, "If files were found but dropped, the buckets or the batch size leave none: fewer frames "
                "or a lower resolution per bucket, a smaller batch, or more repeats."),
    ])


_SIGNAL_RES = (
    re.compile(r"exits with return code = -(\d+)"),  # DeepSpeed's launcher
    re.compile(r"died with <Signals\.SIG\w+: (\d+)>"),  # accelerate / subprocess
    re.compile(r"returned non-zero exit status -(\d+)"),
    re.compile(r"Signal (\d+) \(SIG\w+\) received by PID"),  # torchrun
    re.compile(r"exitcode\s*:\s*-(\d+)"),  # torchrun's ChildFailedError summary
)


def signal_from_launcher(lines: list[str]) -> int | None:
    """The signal that ended the trainer as its launcher reports it (the last report wins), else None."""
    for line in reversed(lines):
        for pattern in _SIGNAL_RES:
            if match := pattern.search(line):
                return int(match.group(1))
    return None


# slurmstepd's notice when it stops a job or step: "*** JOB 123 ON node CANCELLED AT <time> DUE TO TIME LIMIT ***",
# "... DUE TO PREEMPTION ***", "... DUE TO NODE FAILURE ***", or no reason (scancel by a user or an admin).
_SLURM_CANCEL_RE = re.compile(r"\*\*\* (?:JOB|STEP) [\w.]+ ON \S+ CANCELLED AT \S+(?: DUE TO (?P<why>[\w ]+?))? "
                              r"\*\*\*")


def scheduler_cancel(lines: list[str]) -> Finding | None:
    """SLURM stopped the job: its own line names the reason (time limit, preemption, node failure) or a cancel."""
    match = next((m for ln in reversed(lines) if (m := _SLURM_CANCEL_RE.search(ln))), None)
    if match is None:
        return None
    evidence, why = match.string.strip(), match.group("why") or ""
    if why.upper() == "TIME LIMIT":
        reason = ("SLURM stopped the job at its time limit: resume it in a new job (`ltx-pipeline resume` continues "
                  "from the newest checkpoint pair), ask for more time (`#SBATCH --time=`), and save checkpoints "
                  "often enough that one job's time covers at least one.")
    else:
        reason = (f"SLURM cancelled the job ({why.lower() if why else 'scancel, by a user or an administrator'}): "
                  "nothing in the trainer failed; `sacct -j <job>` shows who and when. Resume it in a new job "
                  "(`ltx-pipeline resume` continues from the newest checkpoint pair).")
    return Finding("killed", evidence, [FixStep(None, None, reason)])


# A loading progress bar (tqdm's "Loading checkpoint shards:  20%|##  | 1/5 [...]") left unfinished as the log's
# last line, with no traceback or error anywhere: Python printed nothing as it died. What kills a process silently
# while it reads weights into host RAM is the kernel's OOM killer (or Windows' commit limit): the log's evidence is
# the bar it stopped in.
_LOADING_BAR_RE = re.compile(r"(?i)\bload\w*\b[^|\n]*?:?\s*\d{1,3}%\|[^|]*\|\s*(\d+)/(\d+)\b")


def silent_death_while_loading(lines: list[str]) -> Finding | None:
    """The process vanished mid-way through loading weights, with no error printed: host memory ran out."""
    tail = [ln.strip() for ln in lines if ln.strip()]
    if not tail or any(ln.startswith("Traceback") or "Error" in ln for ln in tail):
        return None
    match = _LOADING_BAR_RE.search(tail[-1])
    if match is None or int(match.group(1)) >= int(match.group(2)):
        return None
    return Finding("host_oom", tail[-1], [
        FixStep(None, None, "The process died with no error while loading model weights into host RAM: that is the "
                "kernel's OOM killer (`dmesg | grep -i 'killed process'`) or, on Windows, a page file too small for "
                "the commit. Free RAM, add swap or page file, or load a smaller (quantized) checkpoint."),
    ])


# The model code's own check that an optional package imported: ``assert FLASH_ATTN_2_AVAILABLE`` (Wan's attention),
# ``assert HAS_XFORMERS``, ``assert is_flash_attn_available()``. The package's import failed quietly earlier (a
# wheel built for another torch or CUDA), so the only trace is the flag it left False.
_AVAILABLE_ASSERT_RE = re.compile(r"^assert\s+\(?\s*(?:[\w.]+\.)?(?P<flag>[A-Z0-9_]*_AVAILABLE|HAS_[A-Z0-9_]+|"
                                  r"is_(?P<name>\w+?)_available\(\))\s*\)?\s*(?:,.*)?$")


def unavailable_backend_failure(lines: list[str]) -> Finding | None:
    """An ``AssertionError`` raised by an availability check: an optional package is not importable."""
    text = [ln.strip() for ln in lines if ln.strip() and not set(ln.strip()) <= set("^~ ")]  # drop caret lines
    for index in range(len(text) - 1, 0, -1):
        if not text[index].startswith("AssertionError"):
            continue
        match = _AVAILABLE_ASSERT_RE.match(text[index - 1])
        if match is None:
            return None  # the last assertion is another one
        flag = match.group("name") or re.sub(r"^HAS_|_AVAILABLE$", "", match.group("flag"))
        package = re.sub(r"_\d+$", "", flag).lower().replace("_", "-")
        return Finding("dependency_error", text[index - 1], [
            FixStep(None, None, f"The model code asserted that an optional package is importable ({text[index - 1]}) "
                    f"and it is not: `<trainer python> -c \"import {package.replace('-', '_')}\"` shows why (most "
                    f"often a {package} wheel built for another torch or CUDA). Install the build matching the "
                    "installed torch, or pick another attention backend in the trainer's config."),
        ])
    return None
