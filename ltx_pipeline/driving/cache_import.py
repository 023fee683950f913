"""``ltx-pipeline cache import DIR``: a verified ``.precomputed`` folder's files put into the latent cache.

Owns deciding what can be keyed exactly, as a run would key it, so a later run over the same clips, captions,
model and buckets finds them. That needs the folder's data identity (``IDENTITY_FILE``: checkpoint, text
encoder, buckets, trigger and flags) with its ``made_from`` record (the metadata and the encoding code), the
models and the code still being what made it, and the stage keyable by ``preprocessing.cache_plan`` (which
keys it, with the run's own rules). Anything else is refused whole (``BadInput``, exit 2). Then per file:
one no newer than its clip (latents) or its metadata (conditions: the caption may have changed since), that
loads and has its bucket's shapes, is copied into the cache (``cache.importing``); the user's files are only
read. Returns one line per file: imported, already there, or refused and why.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from ltx_pipeline.cache import EntryStore, Want
from ltx_pipeline.cache.importing import Imported, import_file, sample_problem
from ltx_pipeline.cache.provenance import MadeFrom, read_made_from
from ltx_pipeline.driving.cache import cache_store
from ltx_pipeline.env_names import LATENT_CACHE_ENV
from ltx_pipeline.errors import BadInput
from ltx_pipeline.ltx.buckets import Bucket, parse_bucket, parse_buckets
from ltx_pipeline.ltx.data_identity import data_identity, identity_changes, made_with
from ltx_pipeline.ltx.modes import get_mode
from ltx_pipeline.ltx.precomputed_layout import PlannedOutput, dataset_roles
from ltx_pipeline.preprocessing.cache_plan import CachePlan, RowPlan, plan_stage, unkeyed_reason
from ltx_pipeline.preprocessing.cache_plan import cache_store as runs_cache
from ltx_pipeline.preprocessing.run import IDENTITY_FILE, load_sample, model_files, read_identity

__all__ = ["CacheImport", "ImportLine", "import_folder"]

_ONLY_MADE_BY_RUNS = ("import only a .precomputed folder ltx-pipeline preprocessed (it holds " + IDENTITY_FILE
                      + "); for any other, run ltx-pipeline over its data once: the run fills the cache")


@dataclass(frozen=True)
class ImportLine:
    """One file of the folder: ``imported`` (as ``entry``), ``present`` (the cache had it) or ``refused`` (why)."""

    file: str  # relative to the folder
    outcome: str
    entry: str  # the key's short name; "" for a file no row makes
    why: str = ""


@dataclass(frozen=True)
class CacheImport:
    """What ``import_folder`` did: the cache, the folder, the metadata it was keyed by, one line per file."""

    root: Path
    folder: Path
    metadata: Path
    lines: tuple[ImportLine, ...]

    def count(self, outcome: str) -> int:
        return sum(1 for line in self.lines if line.outcome == outcome)


def import_folder(workspace: Path | None, folder: Path, *, metadata: Path | None = None,
                  cache_dir: Path | None = None) -> CacheImport:
    """Key each file of ``folder`` as a run would and copy what checks out into the cache.

    Raises:
        BadInput: the cache is off; the folder is missing or has no (or an older engine's) identity record; its
            metadata, models or encoding code are not what made it; or its stage cannot be keyed.
    """
    ws, store = cache_store(workspace, cache_dir)
    if store is None or runs_cache(ws.root) is None:
        raise BadInput("The latent cache is off: runs would not use what is imported", where=f"${LATENT_CACHE_ENV}",
                       fix=f"unset {LATENT_CACHE_ENV} (or point it at a folder), then import again")
    source = _precomputed(folder)
    identity, made = _identity(source)
    metadata_file = (metadata or made.metadata).expanduser().resolve()
    if not metadata_file.is_file():
        raise BadInput(f"The metadata {source} was made from is not at {metadata_file}", where=str(metadata_file),
                       fix="pass --metadata FILE: the metadata file the folder was preprocessed from")
    files = _models_now(ws.root, identity, source)
    _encoder_now(made, source)
    buckets = parse_buckets(str(identity["buckets"]), where=f"{source / IDENTITY_FILE} buckets")
    flags = identity.get("flags") or {}
    extra = [str(flag) for flag in flags.get("extra") or ()]
    ctx = SimpleNamespace(workspace=ws.root, request=SimpleNamespace(trigger=flags.get("trigger")),
                          backend=SimpleNamespace(checkout_root=made.checkout,
                                                  capabilities=SimpleNamespace(runs_real_trainer=bool(made.checkout))))
    plan = plan_stage(ctx, mode=get_mode("t2v"), metadata_file=metadata_file, buckets=buckets, files=files,
                      extra_flags=extra)  # the mode only says which folders train: the keys do not depend on it
    if plan is None:
        why = unkeyed_reason(metadata_file, buckets, extra) or \
            "a clip it names cannot be read, or two rows name one file"
        raise BadInput(f"{source} cannot be keyed exactly: {why}", where=str(metadata_file),
                       fix="such data is preprocessed whole by each run and is not cached; nothing was imported")
    lines = _import_rows(store, plan, source, metadata_file)
    return CacheImport(store.root, source, metadata_file, tuple(sorted(lines, key=lambda line: line.file)))


def _precomputed(folder: Path) -> Path:
    source = folder.expanduser().resolve()
    if (source / ".precomputed").is_dir():
        source = source / ".precomputed"  # the dataset's folder given: as the trainer descends into it
    if not source.is_dir():
        raise BadInput(f"{folder} is not a folder", where=str(folder),
                       fix="pass the .precomputed folder to import (a run's is <workspace>/<run>/dataset/.precomputed)")
    return source


def _identity(source: Path) -> tuple[dict[str, Any], MadeFrom]:
    identity = read_identity(source)
    if identity is None or identity.get("legacy"):
        raise BadInput(f"{source} has no record of what it was made from ({IDENTITY_FILE})", where=str(source),
                       fix=_ONLY_MADE_BY_RUNS)
    made = read_made_from(identity)
    if made is None:
        raise BadInput(f"{source} was preprocessed by an older ltx-pipeline, which did not record its metadata and "
                       "encoding code", where=str(source / IDENTITY_FILE),
                       fix="run ltx-pipeline over its data once (the run fills the cache, reusing nothing unchecked)")
    return identity, made


def _models_now(workspace: Path, identity: dict[str, Any], source: Path) -> dict[str, Any]:
    """The models' identities now, which must give the recorded data identity (same content, buckets, flags)."""
    model = str((identity.get("model") or {}).get("path") or "")
    encoder = str((identity.get("text_encoder") or {}).get("path") or "")
    files = model_files(workspace, model or None, encoder or None)
    flags = identity.get("flags") or {}
    now = data_identity(files["model"], files["text_encoder"], str(identity.get("buckets")),
                        trigger=flags.get("trigger"), flags=flags.get("extra") or ())
    changes = identity_changes(identity, now)
    if changes:
        detail = "; ".join(f"{part} {change}" for part, change in changes.items())
        raise BadInput(f"{source} was made with {made_with(changes)} than the files at its recorded paths hold now "
                       f"({detail})", where=str(source / IDENTITY_FILE),
                       fix="put the checkpoint and text encoder it was made with back at those paths, or let a run "
                           "preprocess the data with the current ones")
    return files


def _encoder_now(made: MadeFrom, source: Path) -> None:
    now = made.encoder_now()
    if now.value != made.encoder.value:
        raise BadInput(f"{source} was encoded by {made.encoder.label}; {now.label} encodes now, and runs key their "
                       "files by it", where=str(made.checkout or "ltx-pipeline"),
                       fix="let a run preprocess the data with the current code (it fills the cache)")


def _import_rows(store: EntryStore, plan: CachePlan, source: Path, metadata_file: Path) -> list[ImportLine]:
    lines: list[ImportLine] = []
    named: set[str] = set()
    for row in plan.rows:
        for output, want in row.outputs:
            named.add(str(want.relative()))
            lines.append(_one(store, row, output, want, source, metadata_file))
    for path in sorted(source.rglob("*.pt")):
        relative = path.relative_to(source).as_posix()
        if relative not in named:
            lines.append(ImportLine(relative, "refused", "", f"no row of {metadata_file.name} makes this file"))
    return [line for line in lines if line.outcome != "absent"]


def _one(store: EntryStore, row: RowPlan, output: PlannedOutput, want: Want, source: Path,
         metadata_file: Path) -> ImportLine:
    relative = str(want.relative())
    path = source / relative
    if not path.is_file():
        return ImportLine(relative, "absent", want.key.short)
    stale = _newer_input(path, output, row, metadata_file)
    if stale is not None:
        return ImportLine(relative, "refused", want.key.short, stale)
    bucket_part = want.key.parts.get("bucket")
    bucket: Bucket | None = parse_bucket(bucket_part.value) if bucket_part is not None else None
    done: Imported = import_file(store, want.key, path, load=load_sample,
                                 problem=lambda data: sample_problem(data, output.folder, bucket))
    return ImportLine(relative, done.outcome, want.key.short, done.why)


def _newer_input(path: Path, output: PlannedOutput, row: RowPlan, metadata_file: Path) -> str | None:
    """Why the file may not be what its key says: its clip (latents) or its metadata (conditions: the caption)
    changed after it was written. None when both are older."""
    made = path.stat().st_mtime_ns
    if output.role == "caption":
        if metadata_file.stat().st_mtime_ns > made:
            return f"{metadata_file.name} changed after this file was encoded (its caption may differ)"
        return None
    value = str(row.row.get(dataset_roles(row.row)["video"]) or "").strip()
    clip = Path(value) if Path(value).is_absolute() else metadata_file.parent / value
    if clip.stat().st_mtime_ns > made:
        return f"the clip {value} changed after this file was encoded"
    return None
