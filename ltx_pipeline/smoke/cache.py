"""The smoke test's record, kept per checkout + environment in the workspace (``<workspace>/smoke/``).

The key is what decides whether a pass still holds: the checkout's commit (or, without git, the names,
sizes and times of the trainer's source files), which interpreter runs it, and the versions that
interpreter reported. The probe computes the same key from its quick environment check and reads the
record; it never runs the smoke test itself.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from ltx_pipeline.engine.fingerprint import digest
from ltx_pipeline.workspace import atomic_write

__all__ = ["SmokeRecord", "checkout_identity", "load_record", "record_path", "save_record", "smoke_key"]

_SOURCES = ("packages/ltx-trainer/src", "packages/ltx-trainer/scripts", "packages/ltx-core/src")


@dataclass(frozen=True)
class SmokeRecord:
    """One smoke test's outcome, as ``status``/``probe`` show it."""

    key: str
    passed: bool
    mode: str
    finished_at: str
    seconds: float
    trainer_root: str
    environment: str
    command: str
    failed_step: str | None = None
    diagnosis: str | None = None
    fix: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def checkout_identity(root: Path, commit: str | None) -> str:
    """The commit, or a digest of the trainer's source listing (names, sizes, mtimes) when there is no git."""
    if commit:
        return commit
    listing = []
    for folder in _SOURCES:
        base = root / folder
        if not base.is_dir():
            continue
        for path in sorted(base.rglob("*.py")):
            stat = path.stat()
            listing.append((str(path.relative_to(root)), stat.st_size, stat.st_mtime_ns))
    return digest(listing)


def smoke_key(*, root: Path, commit: str | None, environment: str, versions: dict[str, Any], mode: str) -> str:
    """The record's key: checkout, environment (interpreter or uv), the reported versions and the mode."""
    return digest({"checkout": checkout_identity(root, commit), "root": str(root), "environment": environment,
                   "versions": versions, "mode": mode}).split(":", 1)[-1][:24]


def record_path(workspace: Path, key: str) -> Path:
    return workspace / "smoke" / f"{key}.json"


def save_record(workspace: Path, record: SmokeRecord) -> Path:
    return atomic_write(record_path(workspace, record.key), json.dumps(record.to_dict(), indent=2) + "\n",
                        root=workspace)


def load_record(workspace: Path, key: str) -> SmokeRecord | None:
    """The record of that key, or None (absent or unreadable: the smoke test is then offered again)."""
    try:
        data = json.loads(record_path(workspace, key).read_text(encoding="utf-8"))
        return SmokeRecord(**data)
    except (OSError, ValueError, TypeError):
        return None
