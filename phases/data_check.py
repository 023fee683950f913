"""Data-check phase: verify the dataset for the mode and plan where each stage's latents come from.

Metadata: required columns per mode, media paths resolved against the metadata file, duplicates,
empty captions, clips too short for a stage's bucket (preprocessing would skip them silently), the
spread of frame rates and sizes. Sound was decided by the plan (``ltx.audio_choice``): a video-only run
is checked as a mode without audio latents, and with ``--audio on`` the silent clips are left out of a
metadata file written into the run (``dataset/metadata.with-sound.json``), the one preprocessing reads.
An existing ``.precomputed/`` (given directly or beside the metadata) is verified, never trusted:
subfolders per mode, matching samples across sources, tensor shapes against the planned bucket,
counts reconciled with every dropped clip named, the audio gate. Nothing is preprocessed here: the
plan of what to preprocess, and where, is stored for autotune (its sanity set) and train (the full
set); plan.md's "Latent cache" section is written again from the rows checked: per preprocessing, what comes
from the latent cache, what will be encoded and why (``reports.plan_cache``). Each stage's data identity (the
content of the checkpoint and text encoder config_patch will
use, the buckets, the trigger and flags) is recorded: a model change re-runs this phase and every
later one, and a user's own ``.precomputed`` made with another model is refused. Errors stop the run
with a report in ``<run>/data-check.md``; existing data is never touched.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

from ltx_pipeline.engine import PhaseResult
from ltx_pipeline.engine.fingerprint import digest, file_digest
from ltx_pipeline.errors import BadDataset
from ltx_pipeline.ltx.audio_choice import AudioPlan, rows_with_sound, trained_mode
from ltx_pipeline.ltx.buckets import Bucket, parse_buckets
from ltx_pipeline.ltx.clip_checks import check_clip_lengths, check_media_facts, usable_rows
from ltx_pipeline.ltx.config_values import config_value
from ltx_pipeline.ltx.data_check import (
    Check,
    check_data_identity,
    check_metadata,
    format_checks,
    has_errors,
    legacy_pairing_matches,
    model_label,
)
from ltx_pipeline.ltx.metadata import read_metadata_rows
from ltx_pipeline.ltx.modes import COLUMN_ALIASES, Mode, get_mode
from ltx_pipeline.ltx.precomputed import inspect_precomputed
from ltx_pipeline.outputs.data_check import DataCheckOutputs, DataStage, ModelFileIdentities, ModelPairing, SanitySet
from ltx_pipeline.outputs.plan import PlanOutputs
from ltx_pipeline.outputs.prepare import PreparedDataset, PrepareOutputs
from ltx_pipeline.outputs.probe import ClipFrames, ProbeOutputs
from ltx_pipeline.phase_context import LtxContext
from ltx_pipeline.preprocessing.run import model_files, model_paths, read_identity, stage_identity
from ltx_pipeline.probing import DatasetInfo, to_plain
from ltx_pipeline.probing.dataset import METADATA_EXTENSIONS
from ltx_pipeline.reports.plan_cache import CACHE_SECTION, RunShape, forecast_section, note_section
from ltx_pipeline.workspace import atomic_write

__all__ = ["PHASE"]

#: What the data is checked from: the probe's record of --dataset, or the dataset the prepare phase staged.
Dataset = DatasetInfo | PreparedDataset


class DataCheckPhase:
    name = "data_check"
    heavy = False
    outputs_type = DataCheckOutputs

    def fingerprint(self, ctx: LtxContext) -> dict[str, Any]:
        request = ctx.request
        dataset = Path(request.dataset)
        return {"run request": {"dataset": request.dataset, "mode": request.mode,
                                "fresh_preprocess": request.fresh_preprocess},
                "stages": [list(s.buckets) for s in ctx.output(PlanOutputs).recipe.stages],
                "probe": digest(to_plain(ctx.output(ProbeOutputs).dataset)),
                # What the prepare phase made, if it made anything: a prepare that skipped (every row captioned)
                # changes nothing here, so a release that added the phase leaves a run's later work standing (#49).
                "prepared data": _prepared_part(ctx),
                # Only a metadata file is hashed: a long video given as --dataset is covered by the probe's
                # size+mtime listing, and re-reading gigabytes on every resume would be waste.
                "metadata": file_digest(dataset) if dataset.suffix.lower() in METADATA_EXTENSIONS
                and dataset.is_file() else None,
                "model files": _model_files_part(model_files(ctx.workspace, *model_paths(ctx))),
                "preprocessing": {"trigger": request.trigger},
                **_audio_part(ctx.output(PlanOutputs).audio)}

    def run(self, ctx: LtxContext) -> PhaseResult[DataCheckOutputs]:
        ctx.narrate("Checking the dataset against the mode and the planned buckets, and planning where each "
                    "stage's latents come from. Nothing is preprocessed or changed here.")
        plan_outputs = ctx.output(PlanOutputs)
        audio = plan_outputs.audio
        mode = trained_mode(get_mode(ctx.request.mode), audio)  # video only: no audio latents are read
        recipe = plan_outputs.recipe
        # A continuation of a finished training trains on its last planned stage's latents (ltx.recipe).
        continuations = [s.index for s in recipe.stages if s.start_step]
        stages = [parse_buckets(";".join(s.buckets)) for s in recipe.stages if not s.start_step]
        dataset, clip_facts = _source(ctx)
        checks: list[Check] = []
        metadata_file, rows, media = _metadata(dataset, mode, checks)
        facts = clip_facts.facts_plain()
        for buckets in stages:
            checks += check_clip_lengths(clip_facts.frame_counts(), list(buckets))
        existing = _existing_precomputed(dataset, ctx.request.fresh_preprocess)
        checks += check_media_facts(facts)  # sound was decided by the plan
        left_out: list[str] = []
        planned_out = audio.left_out if audio is not None else ()  # --audio on: the silent clips the plan left out
        if metadata_file and existing is None and planned_out:
            metadata_file, rows, left_out = _with_sound_only(ctx, Path(metadata_file), facts)
        model_path, encoder_path = model_paths(ctx)
        files = model_files(ctx.workspace, model_path, encoder_path)
        checks += _model_checks(ctx, files)
        identities = [stage_identity(ctx, model_path=model_path, text_encoder_path=encoder_path,
                                     buckets=";".join(str(b) for b in buckets)) for buckets in stages]
        report = None
        if existing is not None:
            report = inspect_precomputed(Path(existing), mode, list(stages[0]), load=_load_sample,
                                         metadata_media=list(media) if media else None)
            checks += _own_data_fixes(report.checks, dataset)
            if report.ok:
                checks += _own_data_identity(Path(report.root), identities[0], model_path, encoder_path, dataset)
        _report(ctx, checks)
        planned = _preprocess_plan(ctx, stages, metadata_file, existing if report and report.ok else None)
        data_stages = [entry.model_copy(update={"data_identity": identity["digest"]})
                       for entry, identity in zip(planned, identities, strict=True)]
        # The same folder as the stage it continues: verified at its launch, made again only if the models changed.
        data_stages += [data_stages[-1].model_copy(update={"index": index}) for index in continuations]
        # What preprocessing keeps (clips too short for a stage are skipped): batch sizes and ranks are judged on it.
        samples = report.usable_samples if report and report.ok else usable_rows(
            rows, [m for m in media if Path(m).name not in {Path(s).name for s in left_out}],
            Path(metadata_file or ".").parent, clip_facts.frame_counts(), stages)
        sanity_bucket = max((b for s in stages for b in s), key=lambda b: b.tokens)
        _forecast(ctx, plan_outputs, mode, metadata_file, samples, planned, (model_path, encoder_path))
        identities_now = ModelFileIdentities.model_validate(files)
        pairing = ModelPairing(model=identities_now.model, text_encoder=identities_now.text_encoder,
                               digest=digest([files["model"]["content"], files["text_encoder"]["content"]]))
        optional: dict[str, Any] = {}  # stored only when they apply (DataCheckOutputs keeps the keys given)
        if left_out:
            optional["left_out_silent"] = tuple(left_out)
        if existing is not None and planned_out:
            # A reused folder cannot be filtered: the trainer skips its silent samples, as the plan said.
            optional["agreed_skips"] = len(planned_out)
        return PhaseResult(DataCheckOutputs(
            metadata_file=metadata_file, samples=samples, checks=tuple(checks), stages=tuple(data_stages),
            sanity=SanitySet(bucket=str(sanity_bucket), preprocessed_root=str(ctx.paths.overfit / ".precomputed")),
            model_files=identities_now, conditions_pairing=pairing, **optional))

    def summary(self, outputs: DataCheckOutputs) -> str:
        warnings = sum(1 for c in outputs.checks if c.severity == "warning")
        sources = ", ".join(f"stage {s.index}: {s.source}" for s in outputs.stages)
        return f"{outputs.samples} usable sample(s), {warnings} warning(s); {sources}"


def _source(ctx: LtxContext) -> tuple[Dataset, ClipFrames]:
    """The dataset to check and its clips' facts: a prepared dataset (staged, split, captioned under the run)
    replaces what --dataset pointed at; the prepare phase may have had nothing to do."""
    if ctx.has_output("prepare"):
        prepared = ctx.output(PrepareOutputs)
        if prepared.prepared and prepared.dataset is not None:
            return prepared.dataset, prepared.clip_frames
    probe = ctx.output(ProbeOutputs)
    return probe.dataset, probe.clip_frames


def _metadata(dataset: Dataset, mode: Mode, checks: list[Check]) -> tuple[str | None, int, tuple[str, ...]]:
    kind = dataset.kind
    if kind == "metadata":
        report = check_metadata(Path(dataset.path), mode)
        checks.extend(report.checks)
        return report.path, report.rows, report.primary_media()
    if kind == "precomputed":
        return None, 0, ()
    raise BadDataset(f"A {kind.replace('_', ' ')} cannot be trained on: captions and clips need a metadata file",
                     where=dataset.path,
                     fix="pass --dataset a .csv/.json/.jsonl with a caption column and the media paths (or a "
                         "verified .precomputed folder)")



def _prepared_part(ctx: LtxContext) -> str | None:
    if not ctx.has_output("prepare") or not ctx.output(PrepareOutputs).prepared:
        return None
    return ctx.output_digest("prepare")


def _audio_part(audio: AudioPlan | None) -> dict[str, Any]:
    """The audio choice's part of the fingerprint: absent for audio+video on every clip (every earlier run's)."""
    if audio is None or (audio.trains != "video" and not audio.left_out):
        return {}
    return {"audio": {"trains": audio.trains, "left out": list(audio.left_out)}}


def _with_sound_only(ctx: LtxContext, metadata_file: Path, facts: dict[str, Any]) -> tuple[str, int, list[str]]:
    """``--audio on`` with silent clips: the metadata the trainer sees holds only the rows with sound.

    Written into the run (media paths made absolute); the user's file is never changed.
    """
    rows = read_metadata_rows(metadata_file)
    kept, left_out = rows_with_sound(rows, metadata_file.resolve().parent, facts)
    if not kept:
        raise BadDataset(f"--audio on leaves no row of {metadata_file.name}: every clip is silent",
                         where=str(metadata_file), fix="use --audio off (video only on every clip) or auto")
    for row in kept:
        for key in (*COLUMN_ALIASES["video"], *COLUMN_ALIASES["reference_video"]):
            if isinstance(row.get(key), str) and row[key] and not Path(row[key]).is_absolute():
                row[key] = str((metadata_file.resolve().parent / row[key]).resolve())
    target = ctx.paths.dataset / "metadata.with-sound.json"
    atomic_write(target, json.dumps(kept, indent=2), root=ctx.workspace)
    ctx.narrate(f"--audio on: {len(left_out)} silent clip(s) left out of the dataset the trainer sees "
                f"({', '.join(Path(m).name for m in left_out)}); {len(kept)} row(s) in {target.name}.")
    return str(target), len(kept), left_out


def _existing_precomputed(dataset: Dataset, fresh: bool) -> str | None:
    """The user's own .precomputed to verify and reuse (never written to), unless told to ignore it."""
    if dataset.kind == "precomputed":
        return dataset.path
    meta = dataset.metadata if isinstance(dataset, DatasetInfo) else None
    found = meta.precomputed.path if meta is not None and meta.precomputed is not None else None
    return None if fresh else found


def _preprocess_plan(ctx: LtxContext, stages: list[tuple[Bucket, ...]], metadata_file: str | None,
                     reuse: str | None) -> list[DataStage]:
    """Where each stage's latents come from: the verified existing folder, or a new one in the run."""
    plan = []
    for index, buckets in enumerate(stages, start=1):
        bucket_text = ";".join(str(b) for b in buckets)
        if index == 1 and reuse is not None:
            plan.append(DataStage(index=index, buckets=bucket_text, source="reuse", preprocessed_root=reuse))
            continue
        if metadata_file is None:
            raise BadDataset(f"Stage {index} ({bucket_text}) needs preprocessing, but the dataset has no metadata",
                             where=ctx.request.dataset, fix="pass the metadata file as --dataset")
        folder = ".precomputed" if index == 1 else f".precomputed-stage-{index}"
        plan.append(DataStage(index=index, buckets=bucket_text, source="preprocess",
                              preprocessed_root=str(ctx.paths.dataset / folder), metadata_file=metadata_file))
    return plan


def _forecast(ctx: LtxContext, plan: PlanOutputs, mode: Mode, metadata_file: str | None, samples: int,
              planned: list[DataStage], models: tuple[str, str]) -> None:
    """plan.md's latent cache section from the rows just checked, outside the approved text (#44)."""
    if metadata_file is None:
        section = note_section("the dataset is a verified .precomputed folder: it is reused as it is, nothing is "
                               "encoded")
    else:
        shape = RunShape(plan.recipe, plan.launch.total if plan.launch else 1, ctx.output(ProbeOutputs).tier.base,
                         plan.autotune_runs, mode, models)
        own = planned[0].preprocessed_root if planned and planned[0].source == "reuse" else None
        section = forecast_section(ctx, shape, Path(metadata_file), samples, by_data_check=True, own_first=own)
    CACHE_SECTION.write(ctx.paths.plan_file, section, root=ctx.workspace)


def _report(ctx: LtxContext, checks: list[Check]) -> None:
    lines = format_checks(checks)
    for check in checks:
        if check.severity == "warning":
            ctx.warn(check.text())
    if has_errors(checks):
        report = ctx.paths.root / "data-check.md"
        atomic_write(report, "# Data check\n\n" + "\n".join(f"- {line}" for line in lines) + "\n", root=ctx.workspace)
        errors = [c for c in checks if c.severity == "error"]
        raise BadDataset(f"{len(errors)} data problem(s), first: {errors[0].message}", where=str(report),
                         fix=errors[0].fix or "see the report")


def _model_files_part(files: dict[str, Any]) -> dict[str, str]:
    """The fingerprint's readable model part: ``name (content digest start)`` per file."""
    part = {"checkpoint": model_label(files["model"])}
    if files["text_encoder"].get("path") != files["model"].get("path"):
        part["text encoder"] = model_label(files["text_encoder"])
    return part


def _model_checks(ctx: LtxContext, files: dict[str, Any]) -> list[Check]:
    """A checkpoint given to the reference or simulated backend must be a safetensors file (the probe
    checks it for a backend that runs the real trainer)."""
    given = ctx.request.model_path
    model = files["model"]
    if ctx.backend.capabilities.runs_real_trainer or not given or model.get("kind") == "safetensors":
        return []
    what = "does not exist" if model.get("kind") == "missing" else "is not a safetensors file (no readable header)"
    return [Check("error", "model-not-safetensors", f"--model-path {model.get('path')} {what}", "--model-path",
                  "pass a .safetensors checkpoint (for the reference backend, a base made with `python -m "
                  "ltx_pipeline.reference_trainer.make_base PATH`)")]


_FRESH = "pass --fresh-preprocess to preprocess into the run's own folder (yours is left as it is)"


def _own_data_fixes(checks: list[Check], dataset: Dataset) -> list[Check]:
    """Errors about the user's own preprocessed data name the way out that leaves it alone."""
    fresh = _FRESH if dataset.kind == "metadata" else \
        "pass the metadata file as --dataset with --fresh-preprocess to preprocess into the run's own folder"
    return [replace(c, fix=f"{(c.fix or '').rstrip('.')}; or {fresh}" if c.fix else fresh)
            if c.severity == "error" and "--fresh-preprocess" not in (c.fix or "") else c for c in checks]


def _own_data_identity(root: Path, identity: dict[str, Any], model_path: str, encoder_path: str,
                       dataset: Dataset) -> list[Check]:
    """The user's own .precomputed against the models this run uses (its record is only read)."""
    recorded = read_identity(root)
    if recorded is not None and recorded.get("legacy"):
        if legacy_pairing_matches(recorded, model_path, encoder_path):
            return []
        recorded = {"model": {"path": config_value(recorded, "model.path"), "kind": "legacy"},
                    "text_encoder": {"path": config_value(recorded, "text_encoder.path"), "kind": "legacy"}}
    return _own_data_fixes(check_data_identity(recorded, identity, str(root)), dataset)


def _load_sample(path: Path) -> dict[str, Any]:
    import torch  # only when an existing .precomputed is verified

    sample: dict[str, Any] = torch.load(path, weights_only=True, map_location="cpu")
    return sample


PHASE = DataCheckPhase()

