"""Data identity: what preprocessed latents and text conditions were made from, as a record and a digest.

Owns the cheap content identity of a checkpoint or text encoder (a safetensors header's digest, a file's
first MiB, a folder's config and file list; never a full-file hash; cached by size and mtime), the identity
of a preprocessed dataset (both models' content, the buckets and the flags that change the output), and
what differs between two such records, in words. The rule that refuses to reuse data made with another
model (``check_data_identity``) is in ``ltx.data_check``. Pure functions of the files they read.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping, MutableMapping
from pathlib import Path, PurePosixPath
from typing import Any

__all__ = ["IDENTITY_VERSION", "data_identity", "identity_changes", "legacy_pairing_matches", "made_with",
           "model_identity", "model_label"]

IDENTITY_VERSION = 2
_MAX_HEADER = 100_000_000  # the safetensors format's own limit on a header
_HEAD_BYTES = 1 << 20


def _sha(payload: bytes) -> str:
    return "sha256:" + hashlib.sha256(payload).hexdigest()


def _canonical(value: Any) -> bytes:
    return json.dumps(value, sort_keys=True, separators=(",", ":")).encode()


def _file_content(path: Path, size: int) -> dict[str, Any]:
    """A file's kind and cheap content digest: the safetensors header (first 8 + N bytes), else its first MiB."""
    with path.open("rb") as handle:
        prefix = handle.read(8)
        length = int.from_bytes(prefix, "little") if len(prefix) == 8 else -1
        if 2 <= length <= _MAX_HEADER and 8 + length <= size:
            header = handle.read(length)
            try:
                parsed = json.loads(header)
            except ValueError:
                parsed = None
            if isinstance(parsed, dict):
                return {"kind": "safetensors", "size": size, "header": _sha(prefix + header)}
        handle.seek(0)
        return {"kind": "file", "size": size, "head": _sha(handle.read(_HEAD_BYTES))}


def _folder_content(path: Path) -> dict[str, Any]:
    """A text-encoder folder: its config.json bytes and the sorted names and sizes of its files."""
    files = sorted([str(PurePosixPath(*p.relative_to(path).parts)), p.stat().st_size] for p in path.rglob("*")
                   if p.is_file() and not any(part.startswith(".") for part in p.relative_to(path).parts))
    config = path / "config.json"
    return {"kind": "folder", "config": _sha(config.read_bytes()) if config.is_file() else None, "files": files}


def model_identity(path_text: str | None, cache: MutableMapping[str, Any] | None = None) -> dict[str, Any]:
    """The content identity of a checkpoint or text encoder, cheap (never a full-file hash).

    Args:
        path_text: the file or folder given to preprocessing (None: not known).
        cache: resolved path -> ``{"size", "mtime_ns", "identity"}``; a file's entry is used while its
            size and mtime_ns are unchanged and is (re)filled otherwise. The caller persists it.

    Returns:
        ``{"path", "kind", ..., "content"}``: kind ``safetensors`` (size and the sha256 of the
        header bytes), ``file`` (size and the sha256 of the first MiB: not a safetensors file),
        ``folder`` (the sha256 of config.json and the sorted file names and sizes, hidden entries
        skipped) or ``missing``. ``content`` digests all but the path (a missing file's includes
        it), so the same model at another path has the same content.
    """
    if not path_text:
        return {"path": None, "kind": "missing", "content": _sha(_canonical({"kind": "missing", "path": None}))}
    path = Path(path_text).expanduser().resolve()
    try:
        stat = path.stat()
    except OSError:
        return {"path": str(path), "kind": "missing", "content": _sha(_canonical({"kind": "missing",
                                                                                   "path": str(path)}))}
    if path.is_dir():
        parts = _folder_content(path)
    else:
        entry = (cache or {}).get(str(path))
        if isinstance(entry, Mapping) and entry.get("size") == stat.st_size \
                and entry.get("mtime_ns") == stat.st_mtime_ns and isinstance(entry.get("identity"), Mapping):
            return dict(entry["identity"])
        parts = _file_content(path, stat.st_size)
    identity = {"path": str(path), **parts, "content": _sha(_canonical(parts))}
    if cache is not None and parts["kind"] != "folder":
        cache[str(path)] = {"size": stat.st_size, "mtime_ns": stat.st_mtime_ns, "identity": identity}
    return identity


def model_label(identity: Mapping[str, Any]) -> str:
    """``name (1a2b3c4d)``: a model file's name and the start of its content digest (or ``missing``)."""
    name = Path(str(identity.get("path"))).name if identity.get("path") else "not given"
    content = str(identity.get("content") or "")
    if identity.get("kind") == "missing":
        return f"{name} (missing)"
    return f"{name} ({content[7:15]})" if content else name


def data_identity(model: Mapping[str, Any], text_encoder: Mapping[str, Any], buckets: str, *,
                  trigger: str | None, flags: Iterable[str] = ()) -> dict[str, Any]:
    """The identity of preprocessed data: what its latents and text conditions were made from.

    Args:
        model: ``model_identity`` of the checkpoint given to preprocessing.
        text_encoder: ``model_identity`` of the text encoder given to preprocessing.
        buckets: the ``--resolution-buckets`` text.
        trigger: the ``--lora-trigger`` word (captions are prefixed with it), or None.
        flags: the other preprocessing flags that change the output (e.g. ``--skip-audio``).

    Returns:
        ``{"version", "model", "text_encoder", "buckets", "flags", "digest"}``; the digest covers
        the two content digests, the buckets and the flags (not the paths).
    """
    settings = {"trigger": trigger or None, "extra": sorted(flags)}
    digest = _sha(_canonical({"version": IDENTITY_VERSION, "model": model.get("content"),
                              "text_encoder": text_encoder.get("content"), "buckets": buckets, "flags": settings}))
    return {"version": IDENTITY_VERSION, "model": dict(model), "text_encoder": dict(text_encoder),
            "buckets": buckets, "flags": settings, "digest": digest}


def identity_changes(recorded: Mapping[str, Any], current: Mapping[str, Any]) -> dict[str, str]:
    """What differs between two ``data_identity`` records: part (``model``, ``text encoder``,
    ``buckets``, ``flags``) -> ``old -> new``; empty when they match, or when ``recorded`` holds all that
    ``current`` asks for (made with the sound encoded, for a run that skips it: see ``_holds_without_audio``)."""
    if recorded.get("digest") == current.get("digest") or _holds_without_audio(recorded, current):
        return {}
    changes: dict[str, str] = {}
    for part, label in (("model", "model"), ("text_encoder", "text encoder")):
        old, new = recorded.get(part) or {}, current.get(part) or {}
        change = f"{model_label(old)} -> {model_label(new)}"
        if old.get("content") != new.get("content") and changes.get("model") != change:
            changes[label] = change  # (the reference toy's base is its own text encoder: named once)
    for part in ("buckets", "flags"):
        if recorded.get(part) != current.get(part):
            changes[part] = f"{_compact(recorded.get(part))} -> {_compact(current.get(part))}"
    if recorded.get("version") != current.get("version"):
        changes.setdefault("record", f"version {recorded.get('version')} -> {current.get('version')}")
    return changes or {"record": "digest differs"}


def _holds_without_audio(recorded: Mapping[str, Any], current: Mapping[str, Any]) -> bool:
    """``recorded`` differs from ``current`` only in lacking ``--skip-audio``: the same latents and conditions with
    the sound's latents besides, which a video-only run does not read (folders made before its stages skipped the
    sound, or by an audio run of the same data, are reused rather than encoded again)."""
    old, new = recorded.get("flags") or {}, current.get("flags") or {}
    old_extra, new_extra = set(old.get("extra") or ()), set(new.get("extra") or ())
    same = all(recorded.get(part) == current.get(part) for part in ("version", "buckets")) and all(
        (recorded.get(part) or {}).get("content") == (current.get(part) or {}).get("content")
        for part in ("model", "text_encoder"))  # the contents, as the digest covers them (not the paths)
    return (same and old.get("trigger") == new.get("trigger") and "--skip-audio" in new_extra
            and old_extra == new_extra - {"--skip-audio"})


def _compact(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, sort_keys=True)


def made_with(changes: Mapping[str, str]) -> str:
    """``another model`` / ``other buckets`` / ``other preprocessing flags``: the main change, in words."""
    if "model" in changes or "text encoder" in changes:
        return "another model"
    if "buckets" in changes:
        return "other buckets"
    return "other preprocessing flags" if "flags" in changes else "another identity"


def legacy_pairing_matches(recorded: Mapping[str, Any], model_path: str, text_encoder_path: str) -> bool:
    """Whether an older engine's conditions record (paths, sizes, mtimes) names exactly these files."""
    def stat_identity(path_text: str) -> dict[str, Any]:
        path = Path(path_text).expanduser().resolve()
        if not path.exists():
            return {"path": str(path), "exists": False}
        stat = path.stat()
        identity: dict[str, Any] = {"path": str(path), "size": stat.st_size, "mtime_ns": stat.st_mtime_ns}
        if path.is_dir():
            identity["files"] = sorted([c.name, c.stat().st_size] for c in path.iterdir() if c.is_file())
        return identity

    return (recorded.get("model") == stat_identity(model_path)
            and recorded.get("text_encoder") == stat_identity(text_encoder_path))
