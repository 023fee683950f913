"""Which ltx-pipeline wrote a file: its version and a digest of its own source.

The version number alone does not change between commits, so plan.md names both: after an upgrade the
user can see that another version wrote the plan they approved, and which of its lines now read differently.
"""

from __future__ import annotations

import hashlib
from functools import lru_cache
from pathlib import Path

from ltx_pipeline import __version__

__all__ = ["code_identity"]

_ROOT = Path(__file__).resolve().parent
_PACKAGES = (_ROOT, _ROOT.parent / "phases")


@lru_cache(maxsize=1)
def code_identity() -> str:
    """``ltx-pipeline <version> (source <12 hex>)``: the digest covers every ``.py`` of the engine and the phases."""
    hasher = hashlib.sha256()
    for package in _PACKAGES:
        for path in sorted(package.rglob("*.py")):
            hasher.update(str(path.relative_to(package.parent)).encode("utf-8") + b"\0")
            hasher.update(path.read_bytes() + b"\0")
    return f"ltx-pipeline {__version__} (source {hasher.hexdigest()[:12]})"
