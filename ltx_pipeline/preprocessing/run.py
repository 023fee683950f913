"""The one preprocessing step autotune (its sanity set) and train (the full set) both use.

Heavy: only phases past the approval gate call it. It runs the backend's preprocess command for a
stage's buckets (mixed: one call with all buckets; chained: one call per stage into its own
folder), supervised and recorded, appending to ``logs/preprocess.log``; it never passes
``--overwrite``. Each output folder carries the identity of what made it (``IDENTITY_FILE``: the
content of the checkpoint and text encoder, the buckets, the trigger and flags), written before
preprocessing starts, so an interrupted folder is resumed with the same identity. Existing output
is verified first and reused only when its identity and samples match. A folder of the run's own
made with another identity (or with none recorded) is the engine's to replace: the autotune
scratch copy under ``overfit/`` is deleted, a stage's folder is moved aside to
``<folder>.stale-<digest>``, and preprocessing starts fresh; a folder outside the run is refused.
A run's own folder whose rows the latent cache can key (``cache_plan``) is assembled from the cache
(``from_cache``): only the missing files are encoded, each by the narrowest of the trainer's three scripts;
any other is preprocessed whole by ``process_dataset``, as before the cache.
Afterwards the output is reconciled against the metadata: a preprocessing that exited 0 but wrote
fewer samples than rows fails with expected/wrote and each left-out file with the reason from its log
(clips too short for every bucket, which the data check named before approval, are only narrated);
every dropped clip is named, the audio gate holds, shapes match the buckets. Model identities are
cached in ``cache/model-identity.json`` of the workspace, keyed by path, size and mtime.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ltx_pipeline.backends.base import MakesBaseWeights
from ltx_pipeline.cache.hits import stage_label
from ltx_pipeline.cache.provenance import made_from
from ltx_pipeline.errors import BadDataset, BadInput, PhaseFailed
from ltx_pipeline.ltx.buckets import Bucket, format_buckets
from ltx_pipeline.ltx.data_check import (
    Check,
    data_identity,
    has_errors,
    identity_changes,
    legacy_pairing_matches,
    made_with,
    model_identity,
    model_label,
)
from ltx_pipeline.ltx.metadata import read_metadata_rows, reference_audio_names
from ltx_pipeline.ltx.modes import Mode
from ltx_pipeline.ltx.precomputed import inspect_precomputed
from ltx_pipeline.outputs.probe import ProbeOutputs
from ltx_pipeline.preprocessing.cache_plan import plan_stage
from ltx_pipeline.preprocessing.from_cache import Encode, fill_from_cache
from ltx_pipeline.preprocessing.processes import process_budget
from ltx_pipeline.preprocessing.reconcile import reconcile_written as _reconcile_written
from ltx_pipeline.preprocessing.reconcile import skipped_in as _skipped_in
from ltx_pipeline.trainer_log import read_tail
from ltx_pipeline.workspace import atomic_write, ensure_inside

if TYPE_CHECKING:
    from ltx_pipeline.phase_context import LtxContext

__all__ = ["IDENTITY_CACHE", "IDENTITY_FILE", "LEGACY_PAIRING_FILE", "link_reference_audio", "model_files",
           "load_sample", "model_paths", "preprocess", "read_identity", "stage_identity", "write_subset_metadata"]

IDENTITY_FILE = "ltx-pipeline-data-identity.json"
LEGACY_PAIRING_FILE = "ltx-pipeline-conditions.json"  # an older engine's record: model paths, sizes, mtimes
IDENTITY_CACHE = Path("cache") / "model-identity.json"


def model_paths(ctx: LtxContext) -> tuple[str, str]:
    """The checkpoint and text encoder every stage trains and preprocesses with (config_patch writes
    them into the configs; data_check computes the data identity from the same two paths).

    ltx: what the probe found or was given. reference and simulated: ``--model-path`` (and
    ``--text-encoder-path``, else the checkpoint itself) when given, else the backend's own base
    weights in the run's ``models/`` (the reference backend makes them there once).

    Raises:
        BadInput: the probe found no checkpoint or text encoder (ltx), or a backend without base
            weights of its own was given no ``--model-path``.
    """
    request = ctx.request
    if request.backend == "ltx":
        models = ctx.output(ProbeOutputs).models
        if models is None or not models.checkpoint_path or not models.text_encoder_path:
            # The plan blocks approval while either is missing, so no approved run gets here without them.
            raise BadInput("The probe found no LTX checkpoint or Gemma text encoder", where="probe",
                           fix="pass --model-path and --text-encoder-path, then resume")
        return models.checkpoint_path, models.text_encoder_path
    if request.model_path:
        model = str(Path(request.model_path).expanduser().absolute())
    elif isinstance(ctx.backend, MakesBaseWeights):
        model = str(ctx.backend.base_weights(ctx.paths.root / "models"))
    else:
        raise BadInput(f"The {request.backend} backend has no base weights of its own", where="--model-path",
                       fix="pass --model-path (and --text-encoder-path)")
    encoder = str(Path(request.text_encoder_path).expanduser().absolute()) if request.text_encoder_path else model
    return model, encoder


def model_files(workspace: Path, model_path: str | None, text_encoder_path: str | None) -> dict[str, Any]:
    """``{"model": identity, "text_encoder": identity}`` of the files given to preprocessing.

    A file's header is read once per (path, size, mtime); the cache lives in the workspace.
    """
    cache_file = workspace / IDENTITY_CACHE
    try:
        loaded = json.loads(cache_file.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        loaded = {}
    cache: dict[str, Any] = dict(loaded.get("files") or {}) if isinstance(loaded, dict) else {}
    before = json.dumps(cache, sort_keys=True)
    files = {"model": model_identity(model_path, cache), "text_encoder": model_identity(text_encoder_path, cache)}
    if json.dumps(cache, sort_keys=True) != before:
        atomic_write(cache_file, json.dumps({"version": 1, "files": cache}, indent=1, sort_keys=True),
                     root=workspace)
    return files


def stage_identity(ctx: Any, *, model_path: str | None, text_encoder_path: str | None, buckets: str,
                   extra_flags: Sequence[str] = ()) -> dict[str, Any]:
    """The ``data_identity`` preprocessing with these inputs (and the run's trigger) gives its output."""
    files = model_files(ctx.workspace, model_path, text_encoder_path)
    return data_identity(files["model"], files["text_encoder"], buckets, trigger=ctx.request.trigger,
                         flags=extra_flags)


def read_identity(folder: Path) -> dict[str, Any] | None:
    """The identity recorded in a preprocessed folder; an older engine's record comes back with
    ``"legacy": True``; None when there is none (or it cannot be read)."""
    for name, legacy in ((IDENTITY_FILE, False), (LEGACY_PAIRING_FILE, True)):
        try:
            record = json.loads((folder / name).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if isinstance(record, dict):
            return {**record, "legacy": True} if legacy else record
    return None


def preprocess(ctx: Any, *, mode: Mode, metadata_file: Path, buckets: tuple[Bucket, ...], output_dir: Path,
               stage: int, model_path: str, text_encoder_path: str, pairing: dict[str, Any] | None = None,
               extra_flags: list[str]) -> dict[str, Any]:
    """Make sure ``output_dir`` holds this stage's latents; return the reconciliation report.

    ``pairing`` (data_check's record of the model files) is accepted for callers and not used: the
    identity is computed from the paths, buckets and flags given here.

    Raises:
        BadDataset: a folder outside the run made with another identity or for other buckets, or
            output failing the audio gate.
        PhaseFailed: the preprocessing command failed (with the tail of its log).
    """
    bucket_text = format_buckets(buckets)
    identity = stage_identity(ctx, model_path=model_path, text_encoder_path=text_encoder_path, buckets=bucket_text,
                              extra_flags=extra_flags)
    identity["made_from"] = made_from(metadata_file, ctx.backend)  # not digested: lets `cache import` key the files
    media = _primary_media(metadata_file, mode)
    label = stage_label(stage).capitalize()
    if output_dir.is_dir() and any(output_dir.iterdir()):
        reused = _verify_existing(ctx, output_dir, identity, label, mode, buckets, media, metadata_file,
                                  model_path, text_encoder_path)
        if reused is not None:
            return reused
    log = ctx.paths.logs / "preprocess.log"
    offset = log.stat().st_size if log.exists() else 0  # the log is appended: read only this run's part
    plan = plan_stage(ctx, mode=mode, metadata_file=metadata_file, buckets=buckets, extra_flags=extra_flags,
                      files=model_files(ctx.workspace, model_path, text_encoder_path)) \
        if _inside(output_dir, ctx.paths.root) else None  # a folder outside the run is never assembled
    encode = Encode(metadata_file, bucket_text, model_path, text_encoder_path, extra_flags, stage, log, _load,
                    processes=process_budget(ctx))
    if plan is None:
        _preprocess_whole(ctx, output_dir, identity, encode)
    else:
        _record(ctx, output_dir, identity)  # first: an interrupted folder is resumed with the same identity
        fill_from_cache(ctx, plan, output_dir, encode)
    _align_reference_audio(ctx, output_dir, metadata_file, mode)
    report = inspect_precomputed(output_dir, mode, list(buckets), load=_load, metadata_media=media,
                                 metadata_dir=metadata_file.parent)
    skipped = [*(plan.skipped if plan is not None else ()), *_skipped_in(log, offset)]
    foreseen = _reconcile_written(ctx, report, media, metadata_file.parent, mode, buckets, skipped, log)
    for check in report.checks:
        if check.severity == "warning" and not _foreseen_drop(check, report.dropped, foreseen):
            ctx.warn(check.text())
    if has_errors(report.checks):
        first = next(c for c in report.checks if c.severity == "error")
        raise BadDataset(f"Preprocessed data failed its check: {first.message}", where=str(output_dir),
                         fix=first.fix or "see logs/preprocess.log")
    return {**_summary(report, reused=False), "data_identity": identity["digest"]}


def _preprocess_whole(ctx: Any, output_dir: Path, identity: dict[str, Any], encode: Encode) -> None:
    """Run ``process_dataset`` over the whole metadata into ``output_dir`` (a stage the cache cannot key)."""
    processes = encode.processes.for_rows(len(read_metadata_rows(encode.metadata_file)))
    ctx.narrate(f"Preprocessing {encode.metadata_file.name} at {encode.bucket_text} into {output_dir} "
                "(resolution-specific latents; this can take a while on large datasets)."
                f"{encode.processes.words(processes)}")
    spec = ctx.backend.preprocess_command(encode.metadata_file, encode.bucket_text, output_dir,
                                          model_path=encode.model_path, text_encoder_path=encode.text_encoder_path,
                                          trigger=ctx.request.trigger, extra_flags=encode.extra_flags,
                                          num_processes=processes)
    _record(ctx, output_dir, identity)  # first: an interrupted folder is resumed with the same identity
    record = ctx.journal.run_to_end("preprocess", encode.stage, spec, encode.log).exit()
    if record is None or record["exit_code"] != 0:
        tail = " | ".join(line.strip() for line in read_tail(encode.log, 3) if line.strip())
        raise PhaseFailed(ctx.phase, 0, f"preprocessing failed ({'killed' if record is None else record})"
                          f": {tail}", str(encode.log))


def _align_reference_audio(ctx: Any, output_dir: Path, metadata_file: Path, mode: Mode) -> None:
    linked = link_reference_audio(mode, metadata_file, output_dir)
    if linked:
        ctx.narrate(f"Linked {linked} reference-audio latent(s) under their target audio's name: the trainer's "
                    "preprocessing names them after the reference file in an audio-only dataset, and its training "
                    "looks them up under the target's name.")


def link_reference_audio(mode: Mode, metadata_file: Path, output_dir: Path) -> int:
    """Link each reference-audio latent under its target's name, for an audio-only dataset (a2a); how many.

    The trainer's ``process_dataset.py`` (ltx-trainer 1.2.0) names reference-audio latents after the
    *video* column when there is one, else after the reference file itself; its dataset then looks them up
    under the primary latent's name (``datasets.py`` ``_get_expected_file_path``), so without this every
    a2a sample is skipped and training finds none. Linked (or copied across file systems), never moved:
    what preprocessing wrote stays as it wrote it.
    """
    folder = output_dir / "reference_audio_latents"
    if mode.video_media or "reference_audio_latents" not in mode.precomputed_dirs or not folder.is_dir():
        return 0
    linked = 0
    for source, target in reference_audio_names(read_metadata_rows(metadata_file), metadata_file.parent):
        written, wanted = folder / source, folder / target
        if written.is_file() and not wanted.exists():
            wanted.parent.mkdir(parents=True, exist_ok=True)
            try:
                os.link(written, wanted)
            except OSError:
                shutil.copy2(written, wanted)
            linked += 1
    return linked


def _verify_existing(ctx: Any, output_dir: Path, identity: dict[str, Any], label: str, mode: Mode,
                     buckets: tuple[Bucket, ...], media: list[str], metadata_file: Path, model_path: str,
                     text_encoder_path: str) -> dict[str, Any] | None:
    """The summary when ``output_dir`` can be reused as it is; None when it must be (re)preprocessed
    (a folder of the run's own made with another identity is set aside first)."""
    own = _inside(output_dir, ctx.paths.root)
    recorded = read_identity(output_dir)
    legacy = recorded is not None and recorded.get("legacy") is True
    if legacy:
        changes = {} if legacy_pairing_matches(recorded or {}, model_path, text_encoder_path) else \
            {"model": f"{(recorded or {}).get('model', {}).get('path')} -> {model_label(identity['model'])}"}
    elif recorded is None:
        changes = {"record": "none"}
    else:
        changes = identity_changes(recorded, identity)
    if changes:
        if not own:
            _refuse_foreign(output_dir, recorded, identity, changes)
        _set_aside(ctx, output_dir, recorded, changes, label)
        return None
    report = inspect_precomputed(output_dir, mode, list(buckets), load=_load, metadata_media=media,
                                 metadata_dir=metadata_file.parent)
    if report.ok and not report.dropped:
        ctx.narrate(f"{label}: {output_dir} already holds {report.usable_samples} matching sample(s) made with "
                    f"{model_label(identity['model'])}; reusing it.")
        if legacy:
            _record(ctx, output_dir, identity)
        held = identity if legacy or recorded is None else recorded  # what the folder holds (it may hold more)
        return {**_summary(report, reused=True), "data_identity": held["digest"]}
    mismatch = next((c for c in report.checks if c.code in ("shape-mismatch", "bad-sample")), None)
    if mismatch is not None:
        if not own:
            raise BadDataset(mismatch.message, where=str(output_dir), fix=_with_fresh(mismatch))
        _set_aside(ctx, output_dir, recorded, {"samples": mismatch.message}, label)
    return None


def _foreseen_drop(check: Any, dropped: dict[str, tuple[str, ...]], foreseen: set[str]) -> bool:
    """A ``dropped-clip`` warning about clips the data check named as too short, narrated already with the log's
    reason: its fix (re-run, another bucket) would tell the user again what they approved, or something untrue."""
    if check.code != "dropped-clip" or not foreseen:
        return False
    return set(dropped.get(Path(check.path or "").name, ())) <= foreseen


def _inside(path: Path, root: Path) -> bool:
    resolved, base = path.resolve(), root.resolve()
    return resolved != base and base in resolved.parents


def _record(ctx: Any, output_dir: Path, identity: dict[str, Any]) -> None:
    atomic_write(output_dir / IDENTITY_FILE, json.dumps(identity, indent=2), root=ctx.workspace)


def _set_aside(ctx: Any, folder: Path, recorded: dict[str, Any] | None, changes: dict[str, str], label: str) -> None:
    """Replace a folder of the run's own: delete autotune's scratch copy, move a stage's folder aside."""
    ensure_inside(ctx.paths.root, folder)
    if "record" in changes and recorded is None:
        why = "has no record of the model it was made with"
    elif "samples" in changes:
        why = f"does not match ({changes['samples']})"
    else:
        detail = "; ".join(f"{part} {change}" for part, change in changes.items())
        why = f"was made with {made_with(changes)} ({detail})"
    if _inside(folder, ctx.paths.overfit):
        shutil.rmtree(folder)
        disposal = "the scratch copy was deleted"
    else:
        short = str((recorded or {}).get("digest") or "")[7:15] or "unrecorded"
        stale = folder.with_name(f"{folder.name}.stale-{short}")
        counter = 1
        while stale.exists():
            counter += 1
            stale = folder.with_name(f"{folder.name}.stale-{short}-{counter}")
        folder.rename(stale)
        disposal = f"the old data is kept in {stale}"
    ctx.narrate(f"{label}: {folder} {why}; preprocessing again into {folder} ({disposal}).")


def _refuse_foreign(folder: Path, recorded: dict[str, Any] | None, identity: dict[str, Any],
                    changes: dict[str, str]) -> None:
    detail = "; ".join(f"{part} {change}" for part, change in changes.items())
    made = "has no record of the model it was made with" if recorded is None else \
        f"was made with {made_with(changes)} ({detail})"
    raise BadDataset(f"{folder} {made}; this run uses {model_label(identity['model'])} at "
                     f"{identity['buckets']}: refusing to reuse or change it", where=str(folder),
                     fix="pass --fresh-preprocess to preprocess into the run's own folder (yours is left as it is)")


def _with_fresh(check: Check) -> str:
    fix = (check.fix or "preprocess into a new folder").rstrip(".")
    return fix if "--fresh-preprocess" in fix else \
        f"{fix}; or pass --fresh-preprocess to preprocess into the run's own folder (yours is left as it is)"


def write_subset_metadata(ctx: Any, metadata_file: Path, rows: int, target: Path, *,
                          indices: Sequence[int] | None = None) -> tuple[Path, int]:
    """A metadata file holding the first ``rows`` rows (or the rows at ``indices``, in that order), media
    paths made absolute (it lives in the run)."""
    every = read_metadata_rows(metadata_file)
    data = every[:rows] if indices is None else [every[index] for index in indices]
    media_keys = ("video", "media_path", "audio", "reference_video", "ref_media_path", "reference_audio",
                  "video_mask", "audio_mask")
    for row in data:
        for key in media_keys:
            if row.get(key) and not Path(str(row[key])).is_absolute():
                row[key] = str((metadata_file.parent / str(row[key])).resolve())
    atomic_write(target, json.dumps(data, indent=2), root=ctx.workspace)
    return target, len(data)


def _primary_media(metadata_file: Path, mode: Mode) -> list[str]:
    column = "video" if mode.video_media else "audio"
    rows = read_metadata_rows(metadata_file)
    names = [str(r.get(column) or r.get("media_path") or "") for r in rows]
    return [n for n in names if n]


def _summary(report: Any, reused: bool) -> dict[str, Any]:
    return {"root": report.root, "samples": report.usable_samples, "counts": report.counts,
            "dropped": {k: list(v) for k, v in report.dropped.items()}, "reused": reused,
            "checks": [asdict(c) for c in report.checks]}


def load_sample(path: Path) -> object:
    """One sample file, as ``torch.load`` gives it (for callers outside preprocessing: ``cache import``)."""
    return _load(path)


def _load(path: Path) -> object:
    """One sample file, as ``torch.load`` gives it (``inspect_precomputed`` checks it is a dict)."""
    import torch  # only while verifying preprocessed samples

    return torch.load(path, weights_only=True, map_location="cpu")
