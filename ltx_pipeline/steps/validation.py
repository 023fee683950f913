"""Validation of one stage's config, the one gate every trainer launch passes through.

Owns ``validate_stage``: the trainer's schema (through the backend, which names its validator) plus
the rules the trainer only meets at runtime (``ltx.launch_checks``: geometry, buckets vs batch, zero
batches, the keep_last_n bug, ...) for the launch that will really be made (its process count, the
dataset's sample count, the stage's buckets). It returns a ``ValidatedConfig``, the digest of the
exact bytes that passed; ``RunJournal.launch`` refuses a trainer launch without one, or with one
whose file has changed since. The validate phase, autotune's trials and every train launch (after
autotune's winner, ``--apply-fix`` or resume's ``load_checkpoint`` patched the config) call it, so
the config that is launched is always the config that was last validated.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ltx_pipeline.engine.journal import ValidatedConfig, config_sha256
from ltx_pipeline.errors import BadConfig
from ltx_pipeline.ltx.buckets import parse_buckets
from ltx_pipeline.ltx.data_check import Check
from ltx_pipeline.ltx.launch_checks import launch_checks
from ltx_pipeline.ltx.trainer_config import ConfigFinding, format_findings
from ltx_pipeline.yaml_io import load_yaml

__all__ = ["LaunchTarget", "StageValidation", "launch_target", "runtime_checks", "validate_stage"]


@dataclass(frozen=True)
class LaunchTarget:
    """What the launch will be: the facts the runtime rules are judged against."""

    stage: int
    buckets: str
    processes: int
    dataset_samples: int | None
    shm_bytes: int | None = None
    data_root: Path | None = None  # the preprocessed data the config reads, when known


def launch_target(probe: dict[str, Any], data_check: dict[str, Any], stage: dict[str, Any],
                  processes: int) -> LaunchTarget:
    """The launch a stage's config is judged for, from the probe's and data check's stored outputs."""
    return LaunchTarget(stage=int(stage["index"]), buckets=stage["buckets"], processes=processes,
                        dataset_samples=data_check["samples"] or None,
                        shm_bytes=probe["host"].get("shm_total_bytes"),
                        data_root=Path(stage["preprocessed_root"]))


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


def runtime_checks(config: Path, target: LaunchTarget, *, warm_start_pending: bool = False) -> list[Check]:
    """The launch rules for this config and launch target (``ltx.launch_checks``)."""
    values = load_yaml(config.read_text(encoding="utf-8")) or {}
    if warm_start_pending:
        # A chained stage warm-starts from weights the previous stage has not written yet; they are
        # checked right before that stage launches.
        values = {**values, "model": {**values.get("model", {}), "load_checkpoint": None}}
    return launch_checks(values, num_processes=target.processes, dataset_samples=target.dataset_samples,
                         buckets=list(parse_buckets(target.buckets)), shm_bytes=target.shm_bytes,
                         cwd=config.parent)


def validate_stage(backend: Any, config: Path, target: LaunchTarget, *, strict: bool,
                   warm_start_pending: bool = False) -> StageValidation:
    """Validate ``config`` for ``target``: the schema through the backend, then the runtime rules.

    Args:
        backend: the run's trainer backend (its ``validate`` and ``validator``).
        config: the config file exactly as it will be launched.
        target: the launch it is judged for.
        strict: check every path (a launch); False before the data exists, when the preprocessed
            folder may be missing but the model files are still checked.
        warm_start_pending: a chained stage whose warm-start weights are not written yet.

    Returns:
        The result; ``validated`` is set only when nothing blocks the launch.
    """
    if backend.name == "ltx" and not strict:
        # The trainer's own validator, in the environment that will launch, before anything heavy runs:
        # only the preprocessed folder, written later, is excused (it is checked again at launch).
        findings = [f for f in backend.validate(config, relaxed_paths=False)
                    if not (f.path == "data.preprocessed_data_root" and target.data_root is not None
                            and not target.data_root.exists())]
        validator = backend.validator(relaxed_paths=False) + "; the preprocessed data is checked at launch"
    else:
        relaxed = not strict or backend.name == "simulated"
        findings = list(backend.validate(config, relaxed_paths=relaxed))
        if not strict and backend.name != "simulated":
            findings += _model_files_missing(config)
        validator = backend.validator(relaxed_paths=relaxed)
    checks = runtime_checks(config, target, warm_start_pending=warm_start_pending)
    result = StageValidation(config=config, validator=validator, checks=checks)
    result.problems = format_findings(findings) + [c.line() for c in checks if c.severity == "error"]
    result.warnings = [c for c in checks if c.severity == "warning"]
    if not result.problems:
        result.validated = ValidatedConfig(config, config_sha256(config), result.validator)
    return result


def _model_files_missing(config: Path) -> list[ConfigFinding]:
    """Relaxed validation skips paths; the model files must exist all the same."""
    model = (load_yaml(config.read_text(encoding="utf-8")) or {}).get("model") or {}
    return [ConfigFinding(path=f"model.{key}", message=f"{model.get(key)} does not exist", code="path_missing")
            for key in ("model_path", "text_encoder_path")
            if not model.get(key) or not Path(model[key]).exists()]
