"""Validation of one stage's config, the one gate every trainer launch passes through.

Owns ``validate_stage``: every path the config names (``ltx.config_paths``: no template placeholder,
nothing missing or unreadable, resolved where the trainer runs, ``trainer_cwd``), the trainer's schema
(through the backend, which names its validator) and the rules the trainer only meets at runtime
(``ltx.launch_checks``: geometry, buckets vs batch, zero batches, the keep_last_n bug, ...) for the
launch that will really be made (its process count, the dataset's sample count, the stage's buckets),
and on the ``ltx`` backend the rules the real trainer meets only when it loads the models
(``ltx.model_files``), judged from the checkpoint's safetensors header and the text encoder's own
files, read here. It returns a ``ValidatedConfig``, the digest of the exact bytes that passed;
``RunJournal.launch`` refuses a trainer launch without one, or with one whose file has changed since.
The validate phase, autotune's trials and every train launch (after autotune's winner, ``--apply-fix``
or resume's ``load_checkpoint`` patched the config) call it, so the config that is launched is always
the config that was last validated.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ltx_pipeline.engine.journal import ValidatedConfig, config_sha256
from ltx_pipeline.errors import BadConfig, BadInput
from ltx_pipeline.ltx.buckets import parse_buckets
from ltx_pipeline.ltx.config_paths import path_checks
from ltx_pipeline.ltx.config_values import config_value
from ltx_pipeline.ltx.data_check import Check
from ltx_pipeline.ltx.launch_checks import launch_checks
from ltx_pipeline.ltx.model_files import (
    checkpoint_metadata,
    gemma_folder_checks,
    gemma_pairing_checks,
    is_ltx_checkpoint,
    packed_gemma_config,
    packed_text_encoder_checks,
    stg_blocks_checks,
    text_encoder_8bit_checks,
)
from ltx_pipeline.ltx.trainer_config import ConfigFinding, format_findings, load_trainer_config_file
from ltx_pipeline.outputs.data_check import DataCheckOutputs, DataStage
from ltx_pipeline.outputs.probe import ProbeOutputs
from ltx_pipeline.probing.model_files import safetensors_header
from ltx_pipeline.yaml_io import load_yaml

if TYPE_CHECKING:
    from ltx_pipeline.backends.base import TrainerBackend

__all__ = ["LaunchTarget", "StageValidation", "path_problems", "runtime_checks", "stage_launch_target",
           "trainer_cwd", "validate_stage"]


@dataclass(frozen=True)
class LaunchTarget:
    """What the launch will be: the facts the runtime rules are judged against."""

    stage: int
    buckets: str
    processes: int
    dataset_samples: int | None
    shm_bytes: int | None = None
    data_root: Path | None = None  # the preprocessed data the config reads, when known
    no_cuda: str | None = None  # why the trainer will find no CUDA GPU here; None: it will, or unknown


def stage_launch_target(probe: ProbeOutputs, data_check: DataCheckOutputs, stage: DataStage,
                        processes: int) -> LaunchTarget:
    """The launch a stage's config is judged for, from the probe's and data check's typed outputs."""
    return LaunchTarget(stage=stage.index, buckets=stage.buckets, processes=processes,
                        dataset_samples=data_check.samples or None, shm_bytes=probe.host.shm_total_bytes,
                        data_root=Path(stage.preprocessed_root),
                        no_cuda=_no_cuda(probe))


def _no_cuda(probe: ProbeOutputs) -> str | None:
    """Why the trainer will find no CUDA GPU here, from the probe: GPUs nvidia-smi measured mean CUDA; a GPU
    assumed with ``--assume-gpu`` was planned for, not found here (8-bit off then only costs memory)."""
    if not probe.assumed_gpu:
        return None
    gpus = probe.gpu_summary.removesuffix(" (assumed)")
    return (f"the GPU was only assumed with --assume-gpu ({gpus}), not measured by nvidia-smi, so no CUDA GPU is "
            "known on this machine")


@dataclass
class StageValidation:
    """One validation's result: the proof (when it passed), every finding, and who validated."""

    config: Path
    validator: str
    problems: list[str] = field(default_factory=list)
    warnings: list[Check] = field(default_factory=list)
    checks: list[Check] = field(default_factory=list)
    validated: ValidatedConfig | None = None

    def raise_if_failed(self, what: str) -> ValidatedConfig:
        """The proof, or ``BadConfig`` listing every problem (``what`` names the config's role)."""
        if self.validated is not None:
            return self.validated
        raise BadConfig(f"{what} does not validate ({len(self.problems)} problem(s), validated by "
                        f"{self.validator}); first: {self.problems[0]}", where=str(self.config),
                        fix="correct run.yaml (or the named field) and run `ltx-pipeline resume`",
                        errors=[(p, p) for p in self.problems])


def runtime_checks(config: Path, target: LaunchTarget, *, warm_start_pending: bool = False,
                   model_files: bool = False, cwd: Path | None = None) -> list[Check]:
    """The launch rules for this config and launch target (``ltx.launch_checks``).

    ``model_files`` adds the real trainer's model-file rules (``ltx.model_files``): only the ``ltx``
    backend's configs point at real LTX checkpoints and Gemma text encoders. ``cwd``: where the trainer
    runs (relative paths resolve there); the config's folder when not given.
    """
    values = load_yaml(config.read_text(encoding="utf-8")) or {}
    if warm_start_pending:
        # A chained stage warm-starts from weights the previous stage has not written yet; they are
        # checked right before that stage launches.
        values = {**values, "model": {**values.get("model", {}), "load_checkpoint": None}}
    base = cwd or config.parent
    checks = launch_checks(values, num_processes=target.processes, dataset_samples=target.dataset_samples,
                           buckets=list(parse_buckets(target.buckets)), shm_bytes=target.shm_bytes, cwd=base)
    return checks + (_model_file_checks(values, base, target.no_cuda) if model_files else [])


def trainer_cwd(backend: TrainerBackend, config: Path) -> Path:
    """The directory the trainer runs in for ``config``, where its relative paths resolve: the launch's own
    working directory (the trainer package for ``ltx``, the config's folder for the toy backends), or the
    config's folder when no launch can be built (``ltx`` without a checkout, whose mirror resolves there)."""
    try:
        return backend.train_command(config).cwd
    except BadInput:
        return config.resolve().parent


def path_problems(backend: TrainerBackend, config: Path, target: LaunchTarget, *, strict: bool,
                  warm_start_pending: bool = False) -> list[Check]:
    """Every placeholder, missing or unreadable path of ``config`` (``ltx.config_paths``), as this launch sees it.

    Before preprocessing (``strict`` False) the stage's own preprocessed folder may be missing, and a chained
    stage's warm-start weights while the previous stage has not written them: the pipeline makes both, and
    they are checked again right before the launch. Placeholders and the user's media are never excused. The
    simulated trainer reads no files, so its configs are checked for placeholders only.
    """
    values = load_trainer_config_file(config)
    cwd = trainer_cwd(backend, config)
    later = ["model.load_checkpoint"] if warm_start_pending else []
    if not strict and _is_stage_data_root(config_value(values, "data.preprocessed_data_root"), target, cwd):
        later.append("data.preprocessed_data_root")
    return path_checks(values, cwd=cwd, existence=backend.capabilities.uses_real_files, written_later=later)


def _is_stage_data_root(value: Any, target: LaunchTarget, cwd: Path) -> bool:
    """Whether the config's data root is the folder the pipeline preprocesses this stage into (when known)."""
    if target.data_root is None:
        return True
    if not isinstance(value, str):
        return False
    path = Path(value).expanduser()
    return (path if path.is_absolute() else cwd / path).resolve() == target.data_root.resolve()


def validate_stage(backend: TrainerBackend, config: Path, target: LaunchTarget, *, strict: bool,
                   warm_start_pending: bool = False) -> StageValidation:
    """Validate ``config`` for ``target``: its paths, the schema through the backend, then the runtime rules.

    Args:
        backend: the run's trainer backend (its ``validate`` and ``validator``).
        config: the config file exactly as it will be launched.
        target: the launch it is judged for.
        strict: check every path (a launch); False before the data exists, when the preprocessed
            folder may be missing but the model files and the validation media are still checked.
        warm_start_pending: a chained stage whose warm-start weights are not written yet.

    Returns:
        The result; ``validated`` is set only when nothing blocks the launch. Each unusable path is one
        problem (listed first), named by its key and value, and not repeated by the schema or the rules.
    """
    paths = path_problems(backend, config, target, strict=strict, warm_start_pending=warm_start_pending)
    if backend.capabilities.runs_real_trainer and not strict:
        # The trainer's own validator, in the environment that will launch, before anything heavy runs:
        # only the preprocessed folder, written later, is excused (it is checked again at launch).
        findings = [f for f in backend.validate(config, relaxed_paths=False)
                    if not (f.path == "data.preprocessed_data_root" and target.data_root is not None
                            and not target.data_root.exists())]
        validator = backend.validator(relaxed_paths=False) + "; the preprocessed data is checked at launch"
    else:
        relaxed = not strict or not backend.capabilities.uses_real_files
        findings = list(backend.validate(config, relaxed_paths=relaxed))
        if not strict and backend.capabilities.uses_real_files:
            findings += _model_files_unset(config)
        validator = backend.validator(relaxed_paths=relaxed)
    checks = runtime_checks(config, target, warm_start_pending=warm_start_pending,
                            model_files=backend.capabilities.runs_real_trainer, cwd=trainer_cwd(backend, config))
    result = StageValidation(config=config, validator=validator, checks=checks)
    said = _keys(paths)
    result.problems = ([c.line() for c in paths]
                       + format_findings(f for f in findings if not _said(f.path, f.message, said))
                       + [c.line() for c in checks if c.severity == "error" and not _said(c.path, c.message, said)])
    result.warnings = [c for c in checks if c.severity == "warning"]
    if not result.problems:
        result.validated = ValidatedConfig(config, config_sha256(config), result.validator)
    return result


def _keys(paths: list[Check]) -> set[str]:
    """The keys the path check named, dotted as pydantic locates them (``validation.images.0``)."""
    return {re.sub(r"\[(\d+)\]", r".\1", c.path or "") for c in paths}


def _said(where: str | None, message: str, keys: set[str]) -> bool:
    """Whether a schema or rule finding repeats a path problem already named: one at the same key, or the
    trainer's "does not exist" for a legacy list as a whole (``validation.images``) holding a named item."""
    if where in keys:
        return True
    return (where in ("validation.images", "validation.reference_videos") and "does not exist" in message
            and any(key.startswith(f"{where}.") for key in keys))


def _model_files_unset(config: Path) -> list[ConfigFinding]:
    """Relaxed validation skips paths; the model files must be named all the same (``path_problems``
    checks that the named ones exist)."""
    model = (load_yaml(config.read_text(encoding="utf-8")) or {}).get("model") or {}
    return [ConfigFinding(path=f"model.{key}", message="is not set: name the file", code="path_missing")
            for key in ("model_path", "text_encoder_path") if not model.get(key)]


_JSON_LIMIT = 4 * 2**20
_MAX_LISTED = 20_000  # a Gemma folder holds a few dozen files; a wrong path may be a whole disk


def _model_file_checks(values: dict[str, Any], base: Path, no_cuda: str | None) -> list[Check]:
    """Read what the model-file rules judge: the checkpoint's header, the text encoder's files."""
    model = values.get("model")
    model = model if isinstance(model, dict) else {}
    checks = text_encoder_8bit_checks(values, no_cuda)
    checkpoint, encoder = _resolve(model.get("model_path"), base), _resolve(model.get("text_encoder_path"), base)
    gemma_config: dict[str, Any] | None = None
    if encoder is not None and encoder.is_dir():
        files = _listing(encoder)
        gemma_config = _read_json(_first(encoder, files, "config.json"))
        checks += gemma_folder_checks(files, gemma_config, _read_json(_first(encoder, files, "processor_config.json")),
                                      folder=str(encoder))
    elif encoder is not None and encoder.is_file() and encoder.suffix == ".safetensors":
        header, _why = safetensors_header(encoder)
        if header is not None:  # an unreadable file is the schema validator's finding
            raw = header.get("__metadata__") or {}
            checks += packed_text_encoder_checks([k for k in header if k != "__metadata__"], raw, path=str(encoder))
            gemma_config = packed_gemma_config(raw)
    header, _why = safetensors_header(checkpoint) if checkpoint is not None and checkpoint.is_file() else (None, None)
    metadata = checkpoint_metadata(header.get("__metadata__") or {}) if header is not None else {}
    if is_ltx_checkpoint(metadata):  # anything else is not an LTX checkpoint these rules know
        if gemma_config is not None:
            checks += gemma_pairing_checks(metadata, gemma_config, checkpoint=str(checkpoint),
                                           text_encoder=str(encoder))
        checks += stg_blocks_checks(values, metadata, checkpoint=str(checkpoint))
    return checks


def _resolve(value: Any, base: Path) -> Path | None:
    if not isinstance(value, str) or not value.strip():
        return None
    path = Path(value.strip()).expanduser()
    return path if path.is_absolute() else base / path


def _listing(folder: Path) -> list[str]:
    """Every file below ``folder``, relative and sorted, as the trainer's ``rglob`` finds them."""
    files: list[str] = []
    for root, _dirs, names in os.walk(folder):
        files += [Path(root, name).relative_to(folder).as_posix() for name in names]
        if len(files) > _MAX_LISTED:
            break
    return sorted(files)


def _first(folder: Path, files: list[str], name: str) -> Path | None:
    """The file the trainer reads for ``name``: ``config.json`` by ``rglob`` (this folder's first), a
    sidecar such as ``processor_config.json`` the first in sorted path order."""
    found = [f for f in files if Path(f).name == name]
    if not found:
        return None
    key = (lambda f: (f.count("/") > 0, Path(f).parts)) if name == "config.json" else (lambda f: Path(f).parts)
    return folder / min(found, key=key)


def _read_json(path: Path | None) -> dict[str, Any] | None:
    try:
        if path is None or path.stat().st_size > _JSON_LIMIT:
            return None
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None
