"""Launch rules: what the trainer checks only at runtime, or never, on a schema-valid config.

Owns ``launch_checks`` (the validate phase's second pass after the schema mirror) and
``fixes_for`` (the findings the config-patch mechanism may fix on its own). The rules come from
facts §1.13 (geometry, quantization, positive counts), §1.5 (flexible modalities), §4.7 (the
``keep_last_n`` bug that deletes the final weights), §4.8 (resume needs the state file beside the
weights), §5 (zero batches from ``drop_last``; DataLoader bus errors from a small ``/dev/shm``,
seed 004) and the skill's self-check (§1.9). Every finding names its dotted config path. It reads
the filesystem only to resolve ``model.load_checkpoint``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from ltx_pipeline.checkpoints.discovery import load_target
from ltx_pipeline.checkpoints.files import state_beside, step_in_name
from ltx_pipeline.ltx.buckets import SPATIAL_FACTOR, TEMPORAL_FACTOR, Bucket
from ltx_pipeline.ltx.config_values import config_value, lax_int
from ltx_pipeline.ltx.data_check import Check, Severity, format_checks

__all__ = ["DEFAULT_VIDEO_DIMS", "MIN_SHM_BYTES", "device_placement_line", "device_problem", "fixes_for",
           "format_checks", "launch_checks", "visible_gpus"]

DEFAULT_VIDEO_DIMS = (960, 544, 89)  # ValidationConfig.video_dims default (facts §1.9)
MIN_SHM_BYTES = 1 << 30
_AUDIO_FORBIDDEN = ("first_frame", "spatial_crop")
_PATCH = re.compile(r"^([\w.]+): (-?\d+)\b")
# Findings with one right answer: their fix text starts with "<dotted.path>: <int>", which
# ``fixes_for`` turns into a patch with this reason.
_AUTO_FIXES = {
    "keep-last-n-deletes-final": "keep_last_n 1 with steps a multiple of checkpoints.interval deletes the final "
                                 "weights (trainer bug, facts 4.7)",
    "keep-last-n-keeps-fewer": "with steps a multiple of checkpoints.interval the trainer keeps one checkpoint "
                               "fewer than keep_last_n (facts 4.7)",
    "multi-bucket-batch": "clips of different buckets cannot be stacked into one batch",
}




def _frames_fix(frames: int) -> int:
    return max(1, (frames - 1) // TEMPORAL_FACTOR * TEMPORAL_FACTOR + 1)


def _round32(value: int) -> int:
    return max(SPATIAL_FACTOR, round(value / SPATIAL_FACTOR) * SPATIAL_FACTOR)


def _dims(dims: Any, path: str, severity: Severity) -> list[Check]:
    raw = [lax_int(v) for v in dims] if isinstance(dims, (list, tuple)) else []
    values = [v for v in raw if v is not None]
    if len(values) != 3 or len(raw) != 3:
        return []  # the schema mirror reports malformed dims
    width, height, frames = values
    problems = []
    if width % SPATIAL_FACTOR or height % SPATIAL_FACTOR:
        problems.append(f"width and height must be multiples of 32 (got {width}x{height})")
    if frames < 1 or (frames - 1) % TEMPORAL_FACTOR:
        problems.append(f"frames must be 8k+1 (got {frames})")
    if not problems:
        return []
    good = [_round32(width), _round32(height), _frames_fix(frames)]
    return [Check(severity, "bad-video-dims", f"{path} = [{width}, {height}, {frames}]: " + "; ".join(problems),
                  path, f"{path}: {good}")]


def _validation(config: Mapping[str, Any]) -> list[Check]:
    samples = config_value(config, "validation.samples") or []
    samples = samples if isinstance(samples, list) else []
    # Geometry is checked by the trainer only for listed samples; without any it is a latent problem.
    severity: Severity = "error" if samples or config_value(config, "validation.prompts") else "warning"
    checks = _dims(config_value(config, "validation.video_dims", DEFAULT_VIDEO_DIMS), "validation.video_dims", severity)
    for i, sample in enumerate(samples):
        if not isinstance(sample, Mapping):
            continue
        if sample.get("video_dims") is not None:
            checks += _dims(sample["video_dims"], f"validation.samples.{i}.video_dims", "error")
        for j, cond in enumerate(sample.get("conditions") or []):
            if not isinstance(cond, Mapping) or cond.get("type") not in ("prefix", "suffix") or not cond.get("video"):
                continue
            n = lax_int(cond.get("num_frames"))
            prefix = cond["type"] == "prefix"
            if n is not None and ((n - 1) % TEMPORAL_FACTOR if prefix else n % TEMPORAL_FACTOR):
                rule = "8k+1" if prefix else "a multiple of 8"
                good = _frames_fix(n) if prefix else max(TEMPORAL_FACTOR, n // TEMPORAL_FACTOR * TEMPORAL_FACTOR)
                where = f"validation.samples.{i}.conditions.{j}.num_frames"
                checks.append(Check("error", "bad-condition-frames",
                                    f"{where} = {n}: a video {cond['type']} needs {rule} frames", where,
                                    f"{where}: {good}"))
    return checks


def _strategy(config: Mapping[str, Any]) -> list[Check]:
    strategy = config_value(config, "training_strategy", {})
    strategy = strategy if isinstance(strategy, Mapping) else {}
    name = strategy.get("name", "text_to_video")
    if name != "flexible":
        return [Check("warning", "legacy-strategy",
                      f"training_strategy.name is {name!r}, a deprecated legacy strategy"
                      + (" (the default when name is absent)" if "name" not in strategy else ""),
                      "training_strategy.name",
                      "use name: flexible with video/audio modalities, as every shipped config does")]
    checks = []
    modalities: dict[str, Any] = {key: strategy.get(key) for key in ("video", "audio")
                                  if isinstance(strategy.get(key), Mapping)}
    if not any(m.get("is_generated") is True for m in modalities.values()):
        checks.append(Check("error", "nothing-generated",
                            "training_strategy: no modality has is_generated: true, so nothing would be trained",
                            "training_strategy", "set is_generated: true on training_strategy.video or .audio"))
    for j, cond in enumerate((modalities.get("audio") or {}).get("conditions") or []):
        if isinstance(cond, Mapping) and cond.get("type") in _AUDIO_FORBIDDEN:
            where = f"training_strategy.audio.conditions.{j}.type"
            checks.append(Check("error", "audio-condition",
                                f"{where} is {cond['type']}, which audio does not support", where,
                                "audio takes prefix, suffix, mask or reference; put this condition on "
                                "training_strategy.video"))
    return checks


def _batches(config: Mapping[str, Any], num_processes: int, dataset_samples: int | None,
             buckets: list[Bucket] | None) -> list[Check]:
    checks = []
    counts = {"optimization.batch_size": 2, "optimization.steps": 3000, "optimization.gradient_accumulation_steps": 1}
    values = {}
    for where, default in counts.items():
        values[where] = value = lax_int(config_value(config, where, default))
        if value is not None and value < 1:
            checks.append(Check("error", "non-positive", f"{where} is {value}; it must be at least 1", where,
                                f"{where}: 1 or more"))
    batch = values["optimization.batch_size"]
    for bucket in buckets or []:
        if bucket.width % SPATIAL_FACTOR or bucket.height % SPATIAL_FACTOR or (bucket.frames - 1) % TEMPORAL_FACTOR:
            checks.append(Check("error", "bad-bucket", f"Bucket {bucket}: W and H must be multiples of 32 and "
                                "F must be 8k+1", "buckets", "choose buckets such as 960x544x49"))
    if buckets and len(buckets) > 1 and batch is not None and batch > 1:
        checks.append(Check("error", "multi-bucket-batch",
                            f"optimization.batch_size is {batch} with {len(buckets)} resolution buckets: clips of "
                            "different shapes cannot be stacked into one batch", "optimization.batch_size",
                            "optimization.batch_size: 1 (raise gradient_accumulation_steps to keep the "
                            "effective batch)"))
    if dataset_samples is not None and batch is not None and batch > 0:
        need = batch * max(1, num_processes)
        if dataset_samples < need:
            checks.append(Check("error", "zero-batches",
                                f"The dataset has {dataset_samples} sample(s), fewer than optimization.batch_size "
                                f"{batch} x {num_processes} process(es): with drop_last every epoch has zero "
                                "batches", "optimization.batch_size",
                                _zero_batches_fix(dataset_samples, batch, max(1, num_processes))))
    return checks


def _zero_batches_fix(samples: int, batch: int, processes: int) -> str:
    """Only fixes that give every process a batch as written: a smaller batch, fewer processes, or both, and
    more clips (a batch of 1 on every GPU cannot be lowered further)."""
    fixes = []
    if samples >= processes and samples // processes < batch:
        fixes.append(f"lower optimization.batch_size to {samples // processes}")
    if processes > 1 and samples >= batch:
        fixes.append(f"train on fewer GPUs: `--processes {samples // batch}` (run.yaml processes)")
    if samples < processes and samples < batch:
        fixes.append(f"lower optimization.batch_size to 1 and train on {samples} GPU(s): `--processes {samples}`")
    return ", or ".join([*fixes, f"add clips (at least {batch * processes} samples)"])


def _checkpoints(config: Mapping[str, Any]) -> list[Check]:
    keep = lax_int(config_value(config, "checkpoints.keep_last_n", 1))
    interval = lax_int(config_value(config, "checkpoints.interval"))
    steps = lax_int(config_value(config, "optimization.steps", 3000))
    if not (interval and steps and keep and keep > 0 and steps % interval == 0):
        return []
    where = "checkpoints.keep_last_n"
    stated = "" if config_value(config, where) is not None else " (the default)"
    if keep == 1:
        return [Check("error", "keep-last-n-deletes-final",
                      f"{where} is 1{stated} and optimization.steps {steps} is a multiple of checkpoints.interval "
                      f"{interval}: the trainer deletes its own final weights file", where, f"{where}: -1")]
    return [Check("warning", "keep-last-n-keeps-fewer",
                  f"{where} is {keep} and optimization.steps {steps} is a multiple of checkpoints.interval "
                  f"{interval}: only {keep - 1} distinct checkpoints survive", where,
                  f"{where}: {keep + 1} (keeps the {keep} asked for), or -1 to keep all")]


def _load_checkpoint(config: Mapping[str, Any], cwd: Path | None) -> list[Check]:
    value = config_value(config, "model.load_checkpoint")
    if not value:
        return []
    where = "model.load_checkpoint"
    path = Path(str(value)).expanduser()
    path = path if path.is_absolute() else (cwd or Path.cwd()) / path
    if not path.exists():
        return [Check("error", "bad-load-checkpoint", f"{where} {path} does not exist", where,
                      "point it at a lora_weights_step_*.safetensors file or its checkpoints folder")]
    if path.is_file() and path.suffix != ".safetensors":
        return [Check("error", "bad-load-checkpoint", f"{where} {path} is not a .safetensors file", where,
                      "point it at a *_weights_step_*.safetensors file")]
    weights = load_target(path) if path.is_dir() else path
    if weights is None:
        return [Check("warning", "checkpoint-not-found", f"{where} {path} holds no *step_*.safetensors: the "
                      "trainer starts from scratch", where, "point it at a folder with checkpoints, or remove it")]
    digits = step_in_name(weights.name)
    state = state_beside(weights)
    no_resume = config_value(config, "checkpoints.no_resume") is True
    if state is None or not state.is_file():
        if no_resume:
            return [Check("info", "no-training-state", f"{where} loads {weights.name} and starts at step 0 "
                          "(checkpoints.no_resume: true)", where, None)]
        return [Check("warning", "no-training-state",
                      f"{where} {weights} has no training_state_step_*.pt beside it: the trainer loads the weights, "
                      "restarts at step 0 and overwrites earlier checkpoint files", where,
                      "put the matching training_state_step_N.pt beside it, or set checkpoints.no_resume: true "
                      "with a fresh output_dir to start a new count deliberately")]
    steps = lax_int(config_value(config, "optimization.steps", 3000))
    step = int(digits) if digits is not None else 0
    if not no_resume and steps is not None and steps <= step:
        return [Check("error", "nothing-to-train", f"optimization.steps {steps} is not above the resumed step "
                      f"{step} of {weights.name}: the trainer stops with no remaining steps",
                      "optimization.steps", f"optimization.steps: a total above {step}")]
    return []


def launch_checks(config: Mapping[str, Any], *, num_processes: int = 1, dataset_samples: int | None = None,
                  buckets: list[Bucket] | None = None, shm_bytes: int | None = None,
                  cwd: Path | None = None) -> list[Check]:
    """Find what would fail or silently go wrong at runtime in a schema-valid trainer config.

    Args:
        config: the trainer config mapping (as ``yaml.safe_load`` reads it; absent keys take the
            trainer's defaults, e.g. ``keep_last_n`` 1, ``batch_size`` 2, two DataLoader workers).
        num_processes: training processes (GPUs) the launch will use.
        dataset_samples: usable preprocessed samples, when known.
        buckets: the resolution buckets the data was (or will be) preprocessed at, when known.
        shm_bytes: size of ``/dev/shm`` on the training host, when known.
        cwd: directory the trainer will run in (relative ``load_checkpoint`` resolves there).

    Returns:
        The findings, each with its dotted path; an empty list means nothing was found.
    """
    checks = _validation(config) + _strategy(config) + _batches(config, num_processes, dataset_samples, buckets)
    checks += _checkpoints(config) + _load_checkpoint(config, cwd)
    full = config_value(config, "model.training_mode", "lora") == "full"
    if config_value(config, "acceleration.quantization") and full:
        checks.append(Check("error", "quantization-full",
                            "acceleration.quantization is set with model.training_mode: full, which the trainer "
                            "refuses", "acceleration.quantization",
                            "remove acceleration.quantization, or train a LoRA (model.training_mode: lora)"))
    workers = lax_int(config_value(config, "data.num_dataloader_workers", 2))
    if workers and workers > 0 and shm_bytes is not None and shm_bytes < MIN_SHM_BYTES:
        checks.append(Check("warning", "small-shm",
                            f"data.num_dataloader_workers is {workers} but /dev/shm is {shm_bytes // (1 << 20)} MiB: "
                            "DataLoader workers die with 'Bus error' / 'out of shared memory'",
                            "data.num_dataloader_workers",
                            "data.num_dataloader_workers: 0, or give the host a larger /dev/shm "
                            "(e.g. docker run --shm-size=8g)"))
    return checks


def fixes_for(checks: Iterable[Check]) -> list[tuple[str, Any, str]]:
    """The findings with one safe fix, as config patches ``(dotted path, new value, reason)``.

    Only rules with a single correct answer are patched automatically (``keep_last_n`` -1, or one
    more than asked when it already keeps several; several buckets -> ``batch_size`` 1); every
    other finding needs the user's choice.
    """
    patches: dict[str, tuple[str, Any, str]] = {}
    for check in checks:
        match = _PATCH.match(check.fix or "") if check.code in _AUTO_FIXES else None
        if match:
            patches.setdefault(match.group(1), (match.group(1), int(match.group(2)), _AUTO_FIXES[check.code]))
    return list(patches.values())


def visible_gpus(gpu_count: int, cuda_visible_devices: str | None) -> int:
    """GPUs a launch can use: those found, narrowed by ``CUDA_VISIBLE_DEVICES`` when it is set."""
    if cuda_visible_devices is None:
        return gpu_count
    listed = [d for d in cuda_visible_devices.split(",") if d.strip() and d.strip() != "-1"]
    return min(gpu_count, len(listed))


def device_problem(*, backend: str, slurm: bool, processes_per_node: int, gpu_count: int,
                   cuda_visible_devices: str | None) -> tuple[str, str, str] | None:
    """``(what, where, fix)`` when a node would run more training processes than it has visible GPUs.

    The trainer puts each rank on ``cuda:LOCAL_RANK``; a rank past the last GPU fails with "invalid device
    ordinal", and an older trainer that loads onto bare ``cuda`` stacks every rank's models on GPU 0 (real users
    launched 4 processes on 2 GPUs). Only the real trainer on this machine is checked: the toy backends
    simulate their GPUs, and under SLURM the job's nodes, not this one, have the GPUs. No GPU found at all
    (a CPU run, or GPUs only assumed) is left to the probe's own findings.
    """
    if backend != "ltx" or slurm or gpu_count < 1:
        return None
    visible = visible_gpus(gpu_count, cuda_visible_devices)
    if processes_per_node <= visible:
        return None
    narrowed = f" (CUDA_VISIBLE_DEVICES={cuda_visible_devices})" if visible < gpu_count else ""
    return (f"{processes_per_node} training processes per node but only {visible} visible GPU(s){narrowed}: each "
            f"process needs a GPU of its own (the trainer puts rank N on cuda:N)",
            "--processes (processes: in run.yaml)",
            f"run with --processes {max(1, visible)} (one process per GPU)"
            + (", or unset/widen CUDA_VISIBLE_DEVICES" if visible < gpu_count else "")
            + ", then `ltx-pipeline resume`")


def device_placement_line(trainer_root: Path | None, processes_per_node: int) -> str | None:
    """The plan's line on where a multi-process launch puts each rank's models, read from the trainer's source.

    ltx-trainer 1.2 loads the embeddings processor (``trainer.py`` ``_load_models``) and, while caching the
    validation prompts, the Gemma text encoder (``validation_runner.py`` ``_local_rank_device``) onto
    ``cuda:LOCAL_RANK``; a checkout whose source lacks that loads them onto bare ``cuda`` (GPU 0) on every rank.
    """
    if processes_per_node <= 1 or trainer_root is None:
        return None
    source = Path(trainer_root) / "packages" / "ltx-trainer" / "src" / "ltx_trainer"
    try:
        texts = [(source / name).read_text(encoding="utf-8") for name in ("trainer.py", "validation_runner.py")]
    except OSError:
        return None  # no readable checkout: the probe reports that
    if all("LOCAL_RANK" in text for text in texts):
        return (f"- Devices: each of the {processes_per_node} processes per node loads the embeddings processor and, "
                "while caching the validation prompts, the Gemma text encoder onto its own GPU (cuda:LOCAL_RANK, "
                "ltx_trainer/trainer.py and validation_runner.py); preprocessing runs one process on cuda:0")
    return (f"- Devices: this checkout's trainer loads the text encoder and embeddings processor onto one fixed "
            f"device (bare `cuda`, GPU 0) on every rank: {processes_per_node} copies share GPU 0. Set "
            "acceleration.load_text_encoder_in_8bit: true, or update the checkout (`git pull && uv sync`)")
