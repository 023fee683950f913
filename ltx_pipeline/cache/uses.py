"""Which run uses which cache entries: one small use record per run, in the cache root's ``uses/``.

Owns the record prune reads to keep what a live or resumable run references: the run (its workspace and
name), when it last assembled, and each file of its ``.precomputed`` that came from the cache with the
key it came from. A record is written before the links are made (an intent), merged under a lock, and
written atomically; assembling a folder again replaces what the record said of that folder. Records of
several workspaces share a team's cache root: each names its workspace.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from ltx_pipeline.cache._locks import held
from ltx_pipeline.workspace import atomic_write, validate_run_name

__all__ = ["UseRecord", "forget_run", "read_uses", "record_uses"]

USES_DIR = "uses"


@dataclass(frozen=True)
class UseRecord:
    """One run's use of the cache: ``links`` maps each linked file (relative to the run's folder) to its key name."""

    workspace: str
    run: str
    updated_at: float
    links: Mapping[str, str]

    @property
    def keys(self) -> frozenset[str]:
        return frozenset(self.links.values())


def _path(root: Path, workspace: Path, run: str) -> Path:
    validate_run_name(run)  # it names a file
    tag = hashlib.sha256(str(workspace.expanduser().resolve()).encode("utf-8")).hexdigest()[:12]
    return root / USES_DIR / f"{tag}-{run}.json"


def _read(path: Path) -> UseRecord | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        links = {str(k): str(v) for k, v in dict(data["links"]).items()}
        return UseRecord(str(data["workspace"]), str(data["run"]), float(data["updated_at"]), links)
    except (OSError, ValueError, KeyError, TypeError):
        return None


def record_uses(root: Path, workspace: Path, run: str, folder: str, links: Mapping[str, str]) -> UseRecord:
    """Record that ``run`` links ``links`` (file relative to the run's folder -> key name) under ``folder``.

    What the record said of files under ``folder`` (relative to the run's folder) is replaced; the rest is kept.
    """
    path = _path(root, workspace, run)
    with held(path.with_suffix(".lock")):
        old = _read(path)
        prefix = folder.rstrip("/") + "/"
        kept = {dest: key for dest, key in (old.links if old else {}).items() if not dest.startswith(prefix)}
        record = UseRecord(str(workspace.expanduser().resolve()), run, time.time(), {**kept, **links})
        atomic_write(path, json.dumps({"workspace": record.workspace, "run": record.run,
                                       "updated_at": record.updated_at, "links": dict(sorted(record.links.items()))},
                                      indent=1) + "\n", root=root)
    return record


def read_uses(root: Path) -> list[UseRecord]:
    """Every readable use record under ``root`` (an unreadable one is skipped), by workspace and run."""
    folder = root / USES_DIR
    records = [r for r in (_read(p) for p in sorted(folder.glob("*.json"))) if r is not None] if folder.is_dir() else []
    return sorted(records, key=lambda r: (r.workspace, r.run))


def forget_run(root: Path, workspace: Path, run: str) -> bool:
    """Drop ``run``'s use record (the run was removed); True when there was one."""
    path = _path(root, workspace, run)
    with held(path.with_suffix(".lock")):
        try:
            path.unlink()
        except FileNotFoundError:
            return False
    path.with_suffix(".lock").unlink(missing_ok=True)
    return True
