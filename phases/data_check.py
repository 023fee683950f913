"""Data-check phase: verify the dataset for the mode and plan where each stage's latents come from.

Metadata: required columns per mode, media paths resolved against the metadata file, duplicates,
empty captions, and clips too short for a stage's bucket (preprocessing would skip them silently).
An existing ``.precomputed/`` (given directly or beside the metadata) is verified, never trusted:
subfolders per mode, matching samples across sources, tensor shapes against the planned bucket,
counts reconciled with every dropped clip named, the audio gate. Nothing is preprocessed here: the
plan of what to preprocess, and where, is stored for autotune (its sanity set) and train (the full
set). Errors stop the run with a report in ``<run>/data-check.md``; existing data is never touched.
"""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path
from typing import Any

from ltx_pipeline.engine import PhaseResult, RunContext
from ltx_pipeline.engine.fingerprint import digest, file_digest
from ltx_pipeline.errors import BadDataset
from ltx_pipeline.ltx.buckets import Bucket, parse_buckets
from ltx_pipeline.ltx.data_check import (
    Check,
    check_clip_lengths,
    check_conditions_pairing,
    check_metadata,
    conditions_fingerprint,
    format_checks,
    has_errors,
)
from ltx_pipeline.ltx.modes import Mode, get_mode
from ltx_pipeline.ltx.precomputed import inspect_precomputed
from ltx_pipeline.workspace import atomic_write

__all__ = ["PHASE"]


class DataCheckPhase:
    name = "data_check"
    heavy = False

    def fingerprint(self, ctx: RunContext) -> dict[str, Any]:
        request = ctx.request
        dataset = Path(request.dataset)
        return {"run request": {"dataset": request.dataset, "mode": request.mode,
                                "fresh_preprocess": request.fresh_preprocess},
                "stages": [s["buckets"] for s in ctx.output("plan")["recipe"]["stages"]],
                "probe": digest(ctx.output("probe")["dataset"]),
                "metadata": file_digest(dataset) if dataset.is_file() else None}

    def run(self, ctx: RunContext) -> PhaseResult:
        ctx.narrate("Checking the dataset against the mode and the planned buckets, and planning where each "
                    "stage's latents come from. Nothing is preprocessed or changed here.")
        mode = get_mode(ctx.request.mode)
        probe = ctx.output("probe")
        recipe = ctx.output("plan")["recipe"]
        stages = [parse_buckets(";".join(s["buckets"])) for s in recipe["stages"]]
        dataset = probe["dataset"]
        checks: list[Check] = []
        metadata_file, rows, media = _metadata(dataset, mode, checks)
        for buckets in stages:
            checks += check_clip_lengths((probe.get("clip_frames") or {}).get("counts") or {}, list(buckets))
        existing = _existing_precomputed(dataset, ctx.request.fresh_preprocess)
        report = None
        if existing is not None:
            report = inspect_precomputed(Path(existing), mode, list(stages[0]), load=_load_sample,
                                         metadata_media=list(media) if media else None)
            checks += report.checks
            pairing = _pairing(probe) if ctx.request.backend == "ltx" else None
            if pairing is not None and report.ok:
                checks += check_conditions_pairing(None, pairing)
        _report(ctx, checks)
        plan = _preprocess_plan(ctx, stages, metadata_file, existing if report and report.ok else None)
        samples = report.usable_samples if report and report.ok else rows
        sanity_bucket = max((b for s in stages for b in s), key=lambda b: b.tokens)
        outputs = {
            "metadata_file": metadata_file, "samples": samples,
            "checks": [asdict(c) for c in checks], "stages": plan,
            "sanity": {"bucket": str(sanity_bucket), "preprocessed_root": str(ctx.paths.overfit / ".precomputed")},
            "conditions_pairing": _pairing(probe) if ctx.request.backend == "ltx" else None,
        }
        return PhaseResult(outputs)

    def summary(self, outputs: dict[str, Any]) -> str:
        warnings = sum(1 for c in outputs["checks"] if c["severity"] == "warning")
        sources = ", ".join(f"stage {s['index']}: {s['source']}" for s in outputs["stages"])
        return f"{outputs['samples']} sample(s) checked, {warnings} warning(s); {sources}"


def _metadata(dataset: dict[str, Any], mode: Mode, checks: list[Check]) -> tuple[str | None, int, tuple[str, ...]]:
    kind = dataset["kind"]
    if kind == "metadata":
        report = check_metadata(Path(dataset["path"]), mode)
        checks.extend(report.checks)
        return report.path, report.rows, report.primary_media()
    if kind == "precomputed":
        return None, 0, ()
    raise BadDataset(f"A {kind.replace('_', ' ')} cannot be trained on: captions and clips need a metadata file",
                     where=dataset["path"],
                     fix="pass --dataset a .csv/.json/.jsonl with a caption column and the media paths (or a "
                         "verified .precomputed folder)")


def _existing_precomputed(dataset: dict[str, Any], fresh: bool) -> str | None:
    """The user's own .precomputed to verify and reuse (never written to), unless told to ignore it."""
    if dataset["kind"] == "precomputed":
        return dataset["path"]
    meta = dataset.get("metadata") or {}
    found = (meta.get("precomputed") or {}).get("path")
    return None if fresh else found


def _preprocess_plan(ctx: RunContext, stages: list[tuple[Bucket, ...]], metadata_file: str | None,
                     reuse: str | None) -> list[dict[str, Any]]:
    """Where each stage's latents come from: the verified existing folder, or a new one in the run."""
    plan = []
    for index, buckets in enumerate(stages, start=1):
        bucket_text = ";".join(str(b) for b in buckets)
        if index == 1 and reuse is not None:
            plan.append({"index": index, "buckets": bucket_text, "source": "reuse", "preprocessed_root": reuse})
            continue
        if metadata_file is None:
            raise BadDataset(f"Stage {index} ({bucket_text}) needs preprocessing, but the dataset has no metadata",
                             where=ctx.request.dataset, fix="pass the metadata file as --dataset")
        folder = ".precomputed" if index == 1 else f".precomputed-stage-{index}"
        plan.append({"index": index, "buckets": bucket_text, "source": "preprocess",
                     "preprocessed_root": str(ctx.paths.dataset / folder), "metadata_file": metadata_file})
    return plan


def _report(ctx: RunContext, checks: list[Check]) -> None:
    lines = format_checks(checks)
    for check in checks:
        if check.severity == "warning":
            ctx.warn(check.line())
    if has_errors(checks):
        report = ctx.paths.root / "data-check.md"
        atomic_write(report, "# Data check\n\n" + "\n".join(f"- {line}" for line in lines) + "\n", root=ctx.workspace)
        errors = [c for c in checks if c.severity == "error"]
        raise BadDataset(f"{len(errors)} data problem(s), first: {errors[0].message}", where=str(report),
                         fix=errors[0].fix or "see the report")


def _pairing(probe: dict[str, Any]) -> dict[str, Any] | None:
    models = probe.get("models") or {}
    if not models.get("checkpoint_path") or not models.get("text_encoder_path"):
        return None
    return conditions_fingerprint(models["checkpoint_path"], models["text_encoder_path"])


def _load_sample(path: Path) -> dict[str, Any]:
    import torch  # only when an existing .precomputed is verified

    return torch.load(path, weights_only=True, map_location="cpu")


PHASE = DataCheckPhase()
