"""The smoke test's steps, in order; each one a real command of the user's trainer or a check of its files.

Every command is an argv list built by the ``ltx`` backend (``uv run`` or ``--trainer-python``), run in
the trainer package with its output in ``<scratch>/logs/``. The first failure stops the test and becomes
a ``SmokeFailed`` carrying the step, the trainer's own words (the classified evidence line) and the fix.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ltx_pipeline.backends.launch import LOG_ENV
from ltx_pipeline.backends.ltx import LtxBackend
from ltx_pipeline.checkpoints.files import WEIGHTS_GLOB
from ltx_pipeline.ltx.config_patch import Patch, apply_patches
from ltx_pipeline.ltx.metadata import read_metadata_rows
from ltx_pipeline.ltx.modes import MODES, Mode
from ltx_pipeline.probing.gpus import cuda_present
from ltx_pipeline.probing.trainer_python import TRAINER_SIDE, environment_report
from ltx_pipeline.smoke.data import align_reference_audio, write_data
from ltx_pipeline.smoke.diagnose import diagnose_log
from ltx_pipeline.smoke.failure import SmokeFailed
from ltx_pipeline.smoke.samples import check_sample, condition_patches, sample_suffix
from ltx_pipeline.workspace import atomic_write

__all__ = ["SMOKE_MODES", "SmokeFailed", "SmokeResult", "SmokeStep", "prepare_smoke", "run_mode", "run_smoke"]

# The smoke data: two rows of 2 s media (clips at 24 fps), one bucket of 25 frames. Validation renders the
# bucket's size: the conditions are fitted to the bucket as a run's are (a video-extend prefix of 17 frames),
# and a smaller render would leave a prefix nothing to generate.
BUCKET = "64x64x25"
_BUCKET_DIMS = (64, 64, 25)
_ROWS, _CLIP_FRAMES, _SIDE = 2, 48, 64
_VALIDATION_DIMS = list(_BUCKET_DIMS)
STEPS = 2
#: Every mode: ``ltx.sample_datasets.write_mode_dataset`` writes the media of every column a mode reads.
SMOKE_MODES: tuple[str, ...] = tuple(MODES)
_TIMEOUT_S = 900


@dataclass(frozen=True)
class SmokeStep:
    """One finished step: its name, what it found, and how long it took."""

    name: str
    detail: str
    seconds: float


@dataclass
class SmokeResult:
    """The finished steps, the environment's versions, and the tiny model every mode shares."""

    steps: list[SmokeStep] = field(default_factory=list)
    versions: dict[str, Any] = field(default_factory=dict)
    cuda: bool = False
    model: dict[str, Any] = field(default_factory=dict)

    @property
    def seconds(self) -> float:
        return sum(step.seconds for step in self.steps)


Report = Callable[[SmokeStep], None]


def _step(result: SmokeResult, on_step: Report | None, name: str, work: Callable[[], str]) -> None:
    started = time.monotonic()
    detail = work()
    done = SmokeStep(name, detail, time.monotonic() - started)
    result.steps.append(done)
    if on_step is not None:
        on_step(done)


def run_smoke(backend: LtxBackend, mode: Mode, scratch: Path, *, on_step: Report | None = None) -> SmokeResult:
    """Run every step in ``scratch`` (which the caller creates and removes): ``prepare_smoke``, then ``run_mode``.

    Raises:
        SmokeFailed: the first step that failed.
    """
    shared = prepare_smoke(backend, scratch, on_step=on_step)
    own = run_mode(backend, mode, scratch, shared, on_step=on_step)
    return SmokeResult([*shared.steps, *own.steps], shared.versions, shared.cuda, shared.model)


def prepare_smoke(backend: LtxBackend, scratch: Path, *, on_step: Report | None = None) -> SmokeResult:
    """The steps every mode shares: the environment check and the tiny model (in ``scratch/model``).

    Raises:
        SmokeFailed: either step failed.
    """
    result = SmokeResult()
    logs = scratch / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    _step(result, on_step, "environment", lambda: _environment(backend, logs, result))
    _step(result, on_step, "tiny model", lambda: _tiny_model(backend, scratch / "model", logs, result.model))
    return result


def run_mode(backend: LtxBackend, mode: Mode, scratch: Path, shared: SmokeResult, *,
             on_step: Report | None = None) -> SmokeResult:
    """One mode's steps on ``shared``'s model, in ``scratch`` (another folder per mode): data to a sample.

    Raises:
        SmokeFailed: the first step that failed.
    """
    result = SmokeResult(versions=shared.versions, cuda=shared.cuda, model=shared.model)
    logs = scratch / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    model = shared.model
    metadata = scratch / "data" / "dataset.json"
    precomputed = scratch / "data" / ".precomputed"
    config = scratch / "config.yaml"
    _step(result, on_step, "data", lambda: write_data(mode, metadata, rows=_ROWS, frames=_CLIP_FRAMES, size=_SIDE))
    _step(result, on_step, "preprocess", lambda: _preprocess(backend, mode, metadata, precomputed, model, logs))
    _step(result, on_step, "config", lambda: _config(backend, mode, config, metadata, precomputed, model, scratch))
    _step(result, on_step, "train", lambda: _train(backend, mode, config, scratch / "outputs", logs))
    return result


def _run(argv: list[str], cwd: Path, log: Path, env: dict[str, str] | None = None) -> int:
    """Run a command (argv list, no shell) with its output in ``log``; returns the exit code."""
    with log.open("ab") as handle:
        try:
            done = subprocess.run(argv, cwd=cwd, stdout=handle, stderr=subprocess.STDOUT,  # noqa: S603
                                  env={**os.environ, **LOG_ENV, **(env or {})}, timeout=_TIMEOUT_S, check=False)
        except subprocess.TimeoutExpired:
            return -1
        except OSError as exc:
            handle.write(f"could not start {argv[0]}: {exc.strerror or exc}\n".encode())
            return 127
    return done.returncode


def _fail_from_log(step: str, code: int, log: Path) -> SmokeFailed:
    diagnosis, fix = diagnose_log(code, log)
    return SmokeFailed(step, diagnosis, fix, log)


def _environment(backend: LtxBackend, logs: Path, result: SmokeResult) -> str:
    log = logs / "environment.log"
    argv = backend.trainer_run("python", str(TRAINER_SIDE / "check_environment.py"), str(backend.trainer_dir))
    code = _run(argv, backend.trainer_dir, log)
    report = environment_report(log.read_text(encoding="utf-8", errors="replace"))
    if report is None:
        raise _fail_from_log("environment", code, log)
    result.versions, result.cuda = report.get("versions") or {}, bool(report.get("cuda"))
    problems = report.get("problems") or []
    if problems:
        raise SmokeFailed("environment", problems[0]["what"], problems[0]["fix"], log)
    versions = result.versions
    return (f"ltx-trainer {versions.get('ltx-trainer')}, ltx-core {versions.get('ltx-core')}, torch "
            f"{versions.get('torch')}, {'CUDA' if result.cuda else 'no CUDA: CPU'}; every module the scripts "
            "import loads, and torchcodec finds FFmpeg")


def _tiny_model(backend: LtxBackend, folder: Path, logs: Path, model: dict[str, Any]) -> str:
    log = logs / "tiny-model.log"
    argv = backend.trainer_run("python", str(TRAINER_SIDE / "build_tiny_model.py"), "--out", str(folder))
    code = _run(argv, backend.trainer_dir, log)
    text = log.read_text(encoding="utf-8", errors="replace")
    found = next((ln for ln in reversed(text.splitlines()) if ln.startswith("{")), None)
    if code != 0 or found is None:
        raise _fail_from_log("tiny model", code, log)
    model.update(json.loads(found))
    return (f"{Path(model['checkpoint']).name} ({model.get('parameters', 0) / 1e6:.1f} M parameters, "
            f"{model.get('transformer_layers')} transformer layers) + a Gemma 3 folder, built by ltx-core "
            f"{model.get('ltx_core_version')}")


def _preprocess(backend: LtxBackend, mode: Mode, metadata: Path, output: Path, model: dict[str, Any],
                logs: Path) -> str:
    from ltx_pipeline.ltx.buckets import parse_buckets
    from ltx_pipeline.ltx.precomputed import inspect_precomputed

    log = logs / "preprocess.log"
    spec = backend.preprocess_command(metadata, BUCKET, output, model_path=model["checkpoint"],
                                      text_encoder_path=model["text_encoder"])
    code = _run(list(spec.argv), spec.cwd, log, spec.env)
    if code != 0:
        raise _fail_from_log("preprocess", code, log)
    linked = align_reference_audio(mode, metadata, output)
    column = "video" if mode.video_media else "audio"
    media = [str(row[column]) for row in read_metadata_rows(metadata) if row.get(column)]
    buckets = list(parse_buckets(BUCKET)) if mode.video_media else []  # audio-only: no latent shape to compare
    report = inspect_precomputed(output, mode, buckets, load=_load, metadata_media=media,
                                 metadata_dir=metadata.parent)
    problems = [c for c in report.checks if c.severity == "error"] + [
        c for c in report.checks if c.code in ("dropped-clip", "extra-samples")]
    if problems:
        raise SmokeFailed("preprocess", f"process_dataset.py exited 0 but its output fails the data check: "
                          f"{problems[0].message}", problems[0].fix or "read the preprocessing log", log)
    counts = ", ".join(f"{name}/ {count}" for name, count in sorted(report.counts.items()))
    where = f"at {BUCKET}" if mode.video_media else "(audio-only: whole files)"
    aligned = (f"; linked {linked} reference-audio latent(s) under their target audio's name, where the trainer's "
               "training looks them up" if linked else "")
    return f"process_dataset.py wrote {counts}; {report.usable_samples} sample(s) usable {where}{aligned}"


def _load(path: Path) -> Any:
    import torch

    return torch.load(path, map_location="cpu", weights_only=True)


def _config(backend: LtxBackend, mode: Mode, config: Path, metadata: Path, precomputed: Path,
            model: dict[str, Any], scratch: Path) -> str:
    from ltx_pipeline.yaml_io import load_yaml

    template = backend.template(mode.config)
    text = template.read_text(encoding="utf-8")
    values = load_yaml(text) or {}
    outputs = scratch / "outputs"
    conditions, sample_words = condition_patches(template, metadata, mode, _BUCKET_DIMS, scratch / "validation",
                                                 scratch)
    patches = [
        Patch("model.model_path", model["checkpoint"], "smoke: the tiny model"),
        Patch("model.text_encoder_path", model["text_encoder"], "smoke: the tiny Gemma 3"),
        Patch("data.preprocessed_data_root", str(precomputed), "smoke: the two clips"),
        Patch("data.num_dataloader_workers", 0, "smoke: no worker processes"),
        Patch("output_dir", str(outputs), "smoke: the scratch folder"),
        Patch("optimization.steps", STEPS, "smoke: two steps"),
        Patch("optimization.gradient_accumulation_steps", 1, "smoke: one sample per step"),
        Patch("checkpoints.interval", STEPS, "smoke: a checkpoint at the last step"),
        Patch("checkpoints.keep_last_n", -1, "smoke: keep it"),
        Patch("validation.interval", STEPS, "smoke: one validation, at the last step"),
        Patch("validation.skip_initial_validation", True, "smoke: no step-0 render"),
        Patch("validation.video_dims", _VALIDATION_DIMS, "smoke: the bucket's size, the conditions' geometry"),
        Patch("validation.inference_steps", 2, "smoke: two denoising steps"),
        *conditions,
        Patch("wandb.enabled", False, "smoke: nothing to log"),
    ]
    if (values.get("hub") or {}).get("push_to_hub"):
        patches.append(Patch("hub.push_to_hub", False, "smoke: nothing is uploaded"))
    if not cuda_present() and (values.get("acceleration") or {}).get("load_text_encoder_in_8bit"):
        patches.append(Patch("acceleration.load_text_encoder_in_8bit", False, "smoke: 8-bit Gemma needs CUDA"))
    patched, _ = apply_patches(text, patches)
    atomic_write(config, patched, root=config.parent)
    findings = backend.validate(config)
    if findings:
        first = findings[0]
        raise SmokeFailed("config", f"the trainer's LtxTrainerConfig refuses the {template.name}-based config: "
                          f"{first.path}: {first.message}",
                          "update the checkout, or report it: the shipped template no longer validates", None)
    return (f"{template.name} patched for 2 steps ({len(patches)} patches) and accepted by the trainer's "
            f"LtxTrainerConfig; validation sample: {sample_words}")


def _train(backend: LtxBackend, mode: Mode, config: Path, outputs: Path, logs: Path) -> str:
    from ltx_pipeline.trainer_log import CheckpointSaved, StepEvent, ValidationSaved, parse_lines

    log = logs / "train.log"
    spec = backend.train_command(config)
    code = _run(list(spec.argv), spec.cwd, log, spec.env)
    if code != 0:
        raise _fail_from_log("train", code, log)
    events = parse_lines(log.read_text(encoding="utf-8", errors="replace").splitlines())
    steps = max((e.step for e in events if isinstance(e, StepEvent)), default=0)
    checkpoints = sorted(outputs.glob(f"checkpoints/{WEIGHTS_GLOB}"))
    suffix = sample_suffix(mode)
    samples = sorted(outputs.glob(f"samples/**/*{suffix}"))
    missing = []
    if not checkpoints:
        missing.append(f"no weights in {outputs / 'checkpoints'}")
    if not samples:
        missing.append(f"no validation sample ({suffix}) in {outputs / 'samples'}")
    if not any(isinstance(e, CheckpointSaved) for e in events) and checkpoints:
        missing.append("the log has no line saying a checkpoint was saved (the log parser no longer reads it)")
    if not any(isinstance(e, ValidationSaved) for e in events) and samples:
        missing.append("the log has no line saying a validation sample was saved (the log parser no longer reads it)")
    if missing:
        raise SmokeFailed("train", "train.py exited 0 but " + "; ".join(missing),
                          "read the training log; report it if the trainer's outputs moved", log)
    decoded = check_sample(samples[0], mode)
    return (f"train.py ran {STEPS} steps{f' (log to step {steps})' if steps else ''}, saved "
            f"{checkpoints[-1].name} and {len(samples)} validation sample(s) ({decoded})")
