"""Fingerprints: canonical JSON, algorithm-tagged digests, and reasons for a re-run.

A fingerprint is stored as its parts (request slices, upstream digests, file digests) plus a
tagged digest over their canonical JSON, so ``status`` can say which part changed and how.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

__all__ = ["FINGERPRINT_SCHEMA", "SCHEMA_KEY", "canonical_json", "describe_changes", "digest", "file_digest",
           "rerun_reasons"]

_MAX_REASONS = 4

#: What the fingerprint parts of this code mean. Bump it whenever a phase adds, drops or re-computes a part (or a
#: request field it reads): parts written under another schema are then compared like with like (``rerun_reasons``),
#: so an upgrade never reads what the code learned as something the user changed. 1: parts without the key.
FINGERPRINT_SCHEMA = 2
SCHEMA_KEY = "_schema"


def canonical_json(value: Any) -> str:
    """JSON with sorted keys and no whitespace: equal data gives equal text."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)


def digest(value: Any) -> str:
    """``sha256:<hex>`` of the canonical JSON of ``value`` (bytes and str are hashed as they are)."""
    if isinstance(value, bytes):
        payload = value
    elif isinstance(value, str):
        payload = value.encode("utf-8")
    else:
        payload = canonical_json(value).encode("utf-8")
    return "sha256:" + hashlib.sha256(payload).hexdigest()


def file_digest(path: Path, chunk: int = 1 << 20) -> str:
    """``sha256:<hex>`` of a file's content, or ``missing`` when it does not exist."""
    try:
        hasher = hashlib.sha256()
        with path.open("rb") as handle:
            while block := handle.read(chunk):
                hasher.update(block)
        return "sha256:" + hasher.hexdigest()
    except FileNotFoundError:
        return "missing"


def rerun_reasons(old: dict[str, Any] | None, new: dict[str, Any], *,
                  defaults: dict[str, Any] | None = None, strict: bool = False) -> list[str]:
    """Why a phase whose stored parts are ``old`` must run again with ``new``; empty when its result still stands.

    A request field that only ``new`` records, at its default (``defaults``: the request's field defaults by name),
    is a field added since with the default that keeps the old behaviour: no change, under any schema. Parts an
    earlier version wrote (another ``SCHEMA_KEY``, or none) are also compared like with like: a part or key only
    one version records says nothing about the user's inputs; what both record must be equal. No stored parts:
    it must run. ``strict`` (``resume --replan``) compares parts of two schemas as if one wrote both.
    """
    if not old:
        return ["inputs changed"]
    across = old.get(SCHEMA_KEY) != new.get(SCHEMA_KEY) and not strict
    reasons: list[str] = []
    _walk_parts(_without_schema(old), _without_schema(new), "", reasons, defaults or {}, across=across)
    if len(reasons) > _MAX_REASONS:
        reasons = reasons[:_MAX_REASONS] + [f"and {len(reasons) - _MAX_REASONS} more"]
    return reasons


def _without_schema(parts: dict[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in parts.items() if key != SCHEMA_KEY}


def _walk_parts(old: Any, new: Any, prefix: str, out: list[str], defaults: dict[str, Any], *, across: bool) -> None:
    """``_walk``, where a key only one side has counts as ``rerun_reasons`` says."""
    if not (isinstance(old, dict) and isinstance(new, dict)):
        _walk(old, new, prefix, out)
        return
    for key in sorted(set(old) | set(new), key=str):
        path = f"{prefix}.{key}" if prefix else str(key)
        if key in old and key in new:
            if old[key] != new[key]:
                _walk_parts(old[key], new[key], path, out, defaults, across=across)
        elif key in new:
            at_default = prefix != "" and key in defaults and new[key] == defaults[key]
            if at_default or (across and not (prefix != "" and key in defaults)):
                continue  # a field added since at its default, or a part only this version records
            out.append(f"{path} added: {_show(new[key])}" if not across else f"{path} set: {_show(new[key])}")
        elif not across:
            out.append(f"{path} removed")


def describe_changes(old: dict[str, Any], new: dict[str, Any]) -> list[str]:
    """Human reasons for the difference between two fingerprints' parts.

    Scalars show as ``field: old -> new``; digests as ``field changed``; nested dicts use dotted paths.
    """
    reasons: list[str] = []
    _walk(old, new, "", reasons)
    if len(reasons) > _MAX_REASONS:
        reasons = reasons[:_MAX_REASONS] + [f"and {len(reasons) - _MAX_REASONS} more"]
    return reasons


def _walk(old: Any, new: Any, prefix: str, out: list[str]) -> None:
    if isinstance(old, dict) and isinstance(new, dict):
        for key in sorted(set(old) | set(new), key=str):
            path = f"{prefix}.{key}" if prefix else str(key)
            if key not in old:
                out.append(f"{path} added: {_show(new[key])}")
            elif key not in new:
                out.append(f"{path} removed")
            elif old[key] != new[key]:
                _walk(old[key], new[key], path, out)
        return
    if _is_digest(old) or _is_digest(new):
        out.append(f"{prefix} changed")
    else:
        out.append(f"{prefix}: {_show(old)} -> {_show(new)}")


def _is_digest(value: Any) -> bool:
    return isinstance(value, str) and value.startswith("sha256:")


def _show(value: Any) -> str:
    text = canonical_json(value) if isinstance(value, (dict, list)) else str(value)
    # Paths and prompts are what a user compares: shown whole, up to a length a line can carry,
    # and then cut at a word boundary rather than inside a name.
    if len(text) <= 160:
        return text
    cut = text[:157].rsplit(" ", 1)[0]
    return (cut if len(cut) > 80 else text[:157]) + "..."
