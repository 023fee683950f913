"""Message vocabulary of the LTX trainer's log: one complete logical message in, typed events out.

This module owns the exact message formats of ``ltx-trainer`` (``trainer.py``,
``validation_runner.py``, ``scripts/train.py``), the end-of-run statistics block, W&B run URLs and
the error signatures that matter for classification, as regexes and the pure functions that apply
them. Invariant: its input is a whole message, already re-joined from its Rich-wrapped lines and
stripped of ANSI codes, level, location and rank prefix (that is ``_grammar``'s job); nothing here
holds state or knows the physical line layout, so the same message always gives the same events.
It imports only ``_events``. Pure standard library.
"""

from __future__ import annotations

import re

from ltx_pipeline.trainer_log._events import (
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

__all__ = ["SLURM_OOM_RE", "STATS_ITEM_LINE_RE", "STEP_RE", "message_events", "stats_event", "step_event"]

# Case-insensitive and whitespace-tolerant: the skill greps lower-case, wrapped lines are re-joined.
STEP_RE = re.compile(
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
_SHORT_VIDEO_RE = re.compile(
    r"Skipping video at (\S.*?) - has (\d+) frames, which is less than the minimum required frames \((\d+)\)")
_UNREADABLE_RE = re.compile(r"Failed to read (video|audio) at (\S.*?): (.*?)\s*$")
_SHORT_AUDIO_RE = re.compile(r"Skipping (\S.*?) \(([\d.]+)s\) \W+ shorter than (.*?)\s*$")
_WANDB_RE = re.compile(r"https://wandb\.ai/\S+?/runs/[^\s'\"<>)\]]+")
_STATS_ITEMS = {
    "total_time_minutes": re.compile(r"Total time: ([\d.]+) minutes"),
    "steps_per_second": re.compile(r"Training speed: ([\d.]+) steps/second"),
    "samples_per_second": re.compile(r"Samples/second: ([\d.]+)"),
    "peak_gpu_memory_gb": re.compile(r"Peak GPU memory: ([\d.]+) GB"),
    "num_processes": re.compile(r"Number of processes: (\d+)"),
    "global_batch_size": re.compile(r"Global batch size: (\d+)"),
}
STATS_ITEM_LINE_RE = re.compile(
    r"^\s*- (Total time|Training speed|Samples/second|Peak GPU memory|Number of processes|Global batch size):"
)
_STATS_REQUIRED = ("total_time_minutes", "steps_per_second", "samples_per_second", "peak_gpu_memory_gb")

# SLURM's cgroup OOM handler: slurmstepd's "Detected 1 oom_kill event in StepId=..." (older: "oom-kill event(s)"),
# srun's "task 0: Out Of Memory" and "exceeded memory limit (N > M), being killed": the job's RAM, not the GPU (its
# fix is the job's memory request, not the host's RAM).
SLURM_OOM_RE = re.compile(r"Detected \d+ oom[-_]kill events?|task \d+: Out Of Memory|exceeded memory limit \(\d+ > "
                          r"\d+\), being killed")
# Order matters: the first matching kind wins for a line.
_ERROR_PATTERNS = (
    ("config_error", re.compile(r"Error: Invalid configuration data:")),
    # torch's MapAllocator writing a DataLoader batch into /dev/shm ("unable to write to file </torch_...>: No space
    # left on device (28)"): the shared memory is full, the same failure as the workers' Bus error.
    # torch's DataLoader message hard-wrapped by a terminal or a paste: strsignal's "Bus" left at a line's end, or
    # its own advice that follows ("Please try to raise your shared memory limit.") on a line of its own.
    # torch's DataLoader when a worker process died without a Python exception and without a signal its handler
    # names (_MultiProcessingDataLoaderIter._try_get_data: "DataLoader worker (pid(s) {pids}) exited unexpectedly";
    # _error_if_any_worker_fails: "... exited unexpectedly with exit code N"): an exception inside a worker comes back
    # as "Caught X in DataLoader worker process N", so a worker that just vanished is, in containers above all, the
    # shared memory its batches travel through (PyTorch's README: --ipc=host or --shm-size).
    ("shm_bus_error", re.compile(r"Bus error|out of shared memory|shared memory \(shm\)|"
                                 r"unable to write to file </torch_|is killed by signal: Bus\b|"
                                 r"raise your shared memory limit|"
                                 r"DataLoader worker \(pids?(?:\(s\))? [\d, ]+\) exited unexpectedly",
                                 re.IGNORECASE)),
    ("worker_killed", re.compile(r"DataLoader worker \(pid[^)]*\) is killed by signal")),
    # The kernel's OOM killer (dmesg / journalctl -k): host RAM, not the GPU; before "oom", which it would match.
    # SLURM's cgroup OOM handler: slurmstepd's "Detected 1 oom_kill event in StepId=..." (older: "oom-kill event(s)"),
    # srun's "task 0: Out Of Memory" and "exceeded memory limit (N > M), being killed": the job's RAM, not the GPU.
    ("oom_killer", re.compile(r"(?i:out of memory): Kill(?:ed)? process \d+|oom-kill:|oom_reaper: reaped process|"
                              + SLURM_OOM_RE.pattern)),
    # The CPU allocator's refusal ("DefaultCPUAllocator: not enough memory: you tried to allocate ..."), Windows'
    # commit limit, C++'s bad_alloc: host memory, before "oom", whose "tried to allocate" it would match.
    ("host_memory", re.compile(r"DefaultCPUAllocator|paging file is too small|std::bad_alloc")),
    ("oom", re.compile(
        r"OutOfMemoryError|out of memory|Tried to allocate|CUBLAS_STATUS_ALLOC_FAILED|CUDNN_STATUS_ALLOC_FAILED",
        re.IGNORECASE)),
    ("host_memory", re.compile(r"(?<![A-Za-z])MemoryError\b")),
    # NaN losses in the formats other trainers and loops print (the trainer's own Step lines are StepEvents), and
    # the checks trainers run on their tensors ("NaN found in latents", "inf values detected in ..."): the same
    # numeric overflow, caught before it reaches the loss (fp16 VAEs are the usual source in latents).
    # The loss's value in the layouts loops log it: "loss: nan", "loss=nan", a dict's "'loss': nan" (transformers'
    # Trainer), a key-value table's "| loss | nan |" (the OpenAI/baselines logger's dumpkvs).
    ("nan_loss", re.compile(r"(?<![A-Za-z])loss['\"]?(?:\s*[:=|]\s*|\s+is\s+)[-+]?(?:nan|inf)\b|"
                            r"\b(?:nan|inf)s?(?: values?)? (?:found|detected|encountered) in\b", re.IGNORECASE)),
    # Media decoders name a file that is not there in their own words: torchcodec's (torchaudio.load since 2.9,
    # VideoDecoder) and torchaudio's FFmpeg reader before it; PIL and PyAV raise FileNotFoundError.
    ("missing_files", re.compile(
        r"FileNotFoundError|Configuration file .* does not exist|directory does not exist|"
        r"Dataset path does not exist|No data files found|No valid samples found|Invalid checkpoint path|"
        r"Could not open input file: .+ No such file or directory|No such file or directory: [\w./\\~-]|"
        r"Failed to open the input \".+\" \(No such file or directory\)|"
        # transformers/diffusers/huggingface_hub: a model folder or Hub repo without the file the loader reads.
        r"\S does not appear to have a file named \S")),
    ("traceback", re.compile(r"^Traceback \(most recent call last\):")),
    # A shell's report of a child killed by SIGKILL: strsignal's "Killed" ("Killed: 9" on macOS/BSD), alone or in
    # bash's job report "<script>: line N: <pid> Killed: 9 <command>".
    ("killed", re.compile(r"^(?:.*: )?Killed(?:: 9)?\s*$|: line \d+: +\d+ Killed(?:: 9)?(?:\s|$)")),
)
# Cheap pre-filter so ordinary lines skip the error regexes entirely.
_ERROR_HINT_RE = re.compile(
    r"rror|emory|llocate|ALLOC|shm|killed|paging file|bad_alloc|Killed|Traceback|exist|No data files|No valid samples|"
    r"oom[-_]kill|unable to write to file|exited unexpectedly|"
    r"Invalid checkpoint|No such file|oom|oss[:=\s]|OSS[:=\s]|file named|(?i:\b(?:nan|inf)s?\b)"
)


def _error_signals(text: str) -> list[ErrorSignal]:
    if not _ERROR_HINT_RE.search(text):
        return []
    for kind, pattern in _ERROR_PATTERNS:
        if pattern.search(text):
            return [ErrorSignal(kind, text.strip())]
    return []


def step_event(step: str, total: str, loss: str, lr: str, step_time: str, hours: str | None,
               minutes: str | None) -> StepEvent:
    """The ``StepEvent`` of the groups of a ``STEP_RE`` match."""
    total_time = int(hours) * 3600 + int(minutes) * 60 if hours is not None and minutes is not None else None
    return StepEvent(int(step), int(total), float(loss), float(lr), float(step_time), total_time)


def stats_event(text: str) -> TrainingStats | None:
    """The statistics block in ``text``, or None while a required item is missing."""
    found = {name: match.group(1) for name, pattern in _STATS_ITEMS.items() if (match := pattern.search(text))}
    if not all(name in found for name in _STATS_REQUIRED):
        return None

    def count(name: str) -> int | None:  # the multi-GPU items: absent on one process
        return int(found[name]) if name in found else None

    return TrainingStats(float(found["total_time_minutes"]), float(found["steps_per_second"]),
                         float(found["samples_per_second"]), float(found["peak_gpu_memory_gb"]),
                         num_processes=count("num_processes"), global_batch_size=count("global_batch_size"))


def _int(text: str) -> int:
    return int(text.replace(",", ""))


def message_events(msg: str) -> list[Event]:
    """Events for one complete logical message (a joined Rich record or a plain line)."""
    match = STEP_RE.search(msg)
    if match:
        return [step_event(*match.groups())]
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
    elif "Skipping video at" in msg and (match := _SHORT_VIDEO_RE.search(msg)):
        events.append(MediaSkipped(match.group(1), f"{match.group(2)} frames, fewer than the smallest bucket's "
                                                   f"{match.group(3)}"))
    elif "Failed to read" in msg and (match := _UNREADABLE_RE.search(msg)):
        events.append(MediaSkipped(match.group(2), f"unreadable {match.group(1)}: {match.group(3)}"))
    elif "shorter than" in msg and (match := _SHORT_AUDIO_RE.search(msg)):
        events.append(MediaSkipped(match.group(1), f"{match.group(2)} s, shorter than {match.group(3)}"))
    elif "Training Statistics:" in msg and (stats := stats_event(msg)):
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
