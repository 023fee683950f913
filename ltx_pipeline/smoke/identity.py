"""What a smoke result is valid for: this checkout, this environment, this mode, computed from files alone.

The probe and ``smoke`` compute the same key without starting anything: the checkout's commit (or its
source listing), the interpreter (``--trainer-python``, or the checkout's uv ``.venv``) and the
modification times of its ``site-packages`` folders, which change whenever a package is installed,
upgraded or removed. ``smoke_command`` is the command line that runs the test again.
"""

from __future__ import annotations

import shlex
from pathlib import Path

from ltx_pipeline.backends.ltx import LtxBackend
from ltx_pipeline.probing.trainer_checkout import check_trainer_root
from ltx_pipeline.smoke.cache import smoke_key

__all__ = ["smoke_command", "smoke_identity"]


def _site_packages(prefix: Path) -> list[tuple[str, int]]:
    found = []
    for folder in sorted(prefix.glob("lib/python3*/site-packages")):
        try:
            found.append((str(folder), folder.stat().st_mtime_ns))
        except OSError:
            continue
    return found


def smoke_identity(backend: LtxBackend, mode: str) -> str:
    """The key a smoke result of ``mode`` is recorded and looked up under."""
    root = backend.root
    if backend.python is not None:
        environment = f"python:{backend.python}"
        prefix = backend.python.parent.parent  # ENV/bin/python -> ENV
    else:
        environment = f"uv:{root / '.venv'}"
        prefix = root / ".venv"
    lock = root / "uv.lock"
    packages = {"site-packages": _site_packages(prefix),
                "uv.lock": lock.stat().st_mtime_ns if backend.python is None and lock.is_file() else None}
    return smoke_key(root=root, commit=check_trainer_root(root, {}).git_commit, environment=environment,
                     versions=packages, mode=mode)


def smoke_command(backend: LtxBackend, mode: str) -> str:
    """The command line that runs the smoke test of this checkout and environment again."""
    argv = ["ltx-pipeline", "smoke", "--trainer-root", str(backend.root)]
    if backend.python is not None:
        argv += ["--trainer-python", str(backend.python)]
    if mode != "t2v":
        argv += ["--mode", mode]
    return shlex.join(argv)
