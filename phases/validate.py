"""Validate phase: prove each stage's config will be accepted, fix what has one right answer, build the launch.

The schema goes through the backend (the trainer's own validator when its environment is synced,
else the mirror). Paths are checked strictly, except the preprocessed-data folder that autotune
and train will create: that part is re-validated strictly right before each launch. Then the rules
the trainer only meets at runtime (or never): geometry, modalities, buckets vs batch size, zero
batches, the keep_last_n bug, checkpoints without state, quantization in full mode, small
/dev/shm. Rules with one safe fix are patched through the config-patch mechanism and recorded;
anything else stops the run with every finding and its fix. The launch command is built and
stored here; nothing is launched.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from ltx_pipeline.engine import PhaseResult, RunContext
from ltx_pipeline.engine.fingerprint import digest, file_digest
from ltx_pipeline.errors import BadConfig
from ltx_pipeline.ltx.buckets import parse_buckets
from ltx_pipeline.ltx.config_patch import Patch, apply_patches
from ltx_pipeline.ltx.data_check import Check
from ltx_pipeline.ltx.launch_checks import fixes_for, launch_checks
from ltx_pipeline.ltx.trainer_config import format_findings
from ltx_pipeline.workspace import atomic_write

__all__ = ["PHASE", "distributed_mode"]


def distributed_mode(training_mode: str, processes: int) -> str:
    """DDP for LoRA and FSDP for full fine-tunes on several GPUs (the skill's rule); else one process."""
    if processes <= 1:
        return "none"
    return "fsdp" if training_mode == "full" else "ddp"


class ValidatePhase:
    name = "validate"
    heavy = False

    def fingerprint(self, ctx: RunContext) -> dict[str, Any]:
        configs = ctx.output("config_patch")["configs"]
        return {"config_patch": digest(ctx.output("config_patch")), "data_check": digest(ctx.output("data_check")),
                "configs": {c["config"]: file_digest(Path(c["config"])) for c in configs},
                "gpus": ctx.output("probe")["gpu_count"], "processes": ctx.request.processes}

    def run(self, ctx: RunContext) -> PhaseResult:
        ctx.narrate("Validating every stage's config against the trainer's schema and the rules it only meets at "
                    "runtime, then building the launch command. Nothing is launched.")
        probe, data = ctx.output("probe"), ctx.output("data_check")
        recipe = ctx.output("plan")["recipe"]
        # One process per GPU; the toy reference trainer runs one process unless asked for more.
        default = max(1, probe["gpu_count"]) if ctx.request.backend != "reference" else 1
        processes = ctx.request.processes or default
        distributed = distributed_mode(recipe["training_mode"], processes)
        stages, problems, patches = [], [], []
        for entry, stage in zip(ctx.output("config_patch")["configs"], data["stages"], strict=True):
            config = Path(entry["config"])
            patches += _apply_safe_fixes(ctx, config, stage, probe, data, processes)
            findings = _schema(ctx, config, Path(stage["preprocessed_root"]))
            checks = _runtime_checks(config, stage, probe, data, processes)
            problems += [f"stage {entry['stage']}: {line}" for line in format_findings(findings)]
            problems += [f"stage {entry['stage']}: {c.line()}" for c in checks if c.severity == "error"]
            for check in checks:
                if check.severity == "warning":
                    ctx.warn(check.line())
            launch = ctx.backend.train_command(config, num_processes=processes, distributed=distributed)
            stages.append({"stage": entry["stage"], "config": str(config), "launch": launch.to_record(),
                           "checks": [c.line() for c in checks], "strict_data_root": Path(stage["preprocessed_root"])
                           .is_dir()})
        if problems:
            report = ctx.paths.root / "validate.md"
            atomic_write(report, "# Validation\n\n" + "\n".join(f"- {p}" for p in problems) + "\n", root=ctx.workspace)
            raise BadConfig(f"{len(problems)} config problem(s), first: {problems[0]}", where=str(report),
                            fix="correct run.yaml (or the named field) and run `ltx-pipeline resume`",
                            errors=[(p, p) for p in problems])
        return PhaseResult({"stages": stages, "patches": patches, "num_processes": processes,
                            "distributed": distributed})

    def summary(self, outputs: dict[str, Any]) -> str:
        fixed = f", {len(outputs['patches'])} safe fix(es) patched" if outputs["patches"] else ""
        return (f"{len(outputs['stages'])} config(s) valid{fixed}; launch: {outputs['distributed']} x "
                f"{outputs['num_processes']} process(es)")


def _schema(ctx: RunContext, config: Path, data_root: Path) -> list[Any]:
    """Strict when the data folder exists; otherwise relaxed plus strict checks of the model files."""
    if data_root.is_dir() or ctx.request.backend == "simulated":
        return ctx.backend.validate(config, relaxed_paths=ctx.request.backend == "simulated")
    findings = list(ctx.backend.validate(config, relaxed_paths=True))
    model = (yaml.safe_load(config.read_text(encoding="utf-8")) or {}).get("model") or {}
    for key in ("model_path", "text_encoder_path"):
        value = model.get(key)
        if not value or not Path(value).exists():
            findings.append(_missing(f"model.{key}", f"{value} does not exist"))
    return findings


def _missing(path: str, message: str) -> Any:
    from ltx_pipeline.ltx.trainer_config import ConfigFinding

    return ConfigFinding(path=path, message=message, code="path_missing")


def _runtime_checks(config: Path, stage: dict[str, Any], probe: dict[str, Any], data: dict[str, Any],
                    processes: int) -> list[Check]:
    values = yaml.safe_load(config.read_text(encoding="utf-8")) or {}
    if stage["index"] > 1 and (values.get("checkpoints") or {}).get("no_resume"):
        # A chained stage warm-starts from weights the previous stage has not written yet; they are
        # checked right before this stage launches.
        values = {**values, "model": {**values.get("model", {}), "load_checkpoint": None}}
    return launch_checks(values, num_processes=processes,
                         dataset_samples=data["samples"] or None, buckets=list(parse_buckets(stage["buckets"])),
                         shm_bytes=probe["host"].get("shm_total_bytes"), cwd=config.parent)


def _apply_safe_fixes(ctx: RunContext, config: Path, stage: dict[str, Any], probe: dict[str, Any],
                      data: dict[str, Any], processes: int) -> list[dict[str, Any]]:
    fixes = fixes_for(_runtime_checks(config, stage, probe, data, processes))
    if not fixes:
        return []
    text, records = apply_patches(config.read_text(encoding="utf-8"),
                                  [Patch(path, value, f"validate: {reason}") for path, value, reason in fixes])
    atomic_write(config, text, root=ctx.workspace)
    for record in records:
        ctx.warn(f"{config.name}: patched {record.path} {record.old} -> {record.new} ({record.reason})")
    return [r.to_dict() for r in records]


PHASE = ValidatePhase()
