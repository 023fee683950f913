"""Workspace and run paths, atomic writes, and the "inside the workspace" guard.

Invariant: the engine writes files only through ``atomic_write`` (temp file in the same folder,
fsync, ``os.replace``), so a reader or a crash never sees a half-written file, and only to paths
that ``ensure_inside`` accepts.
"""

from __future__ import annotations

import os
import re
import tempfile
from dataclasses import dataclass
from pathlib import Path

from ltx_pipeline.env_names import WORKSPACE_ENV
from ltx_pipeline.errors import BadInput, UnsafePath

__all__ = [
    "DB_FILENAME",
    "OPTUNA_DB_FILENAME",
    "RunPaths",
    "Workspace",
    "atomic_write",
    "default_workspace",
    "ensure_inside",
    "validate_run_name",
]

DB_FILENAME = "ltx-pipeline.db"
OPTUNA_DB_FILENAME = "optuna.db"
_RUN_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$")
# Device names Windows reserves in every folder (with any extension): a run folder named so cannot be
# created there, nor on a share served from it.
_RESERVED_NAMES = frozenset({"CON", "PRN", "AUX", "NUL", *(f"COM{n}" for n in range(1, 10)),
                             *(f"LPT{n}" for n in range(1, 10))})


def default_workspace() -> Path:
    """``$LTX_PIPELINE_WORKSPACE`` if set, else ``./workspaces``."""
    return Path(os.environ.get(WORKSPACE_ENV) or "workspaces")


def validate_run_name(name: str) -> str:
    """Accept only names made of letters, digits, '.', '_' and '-' (no leading or trailing dot, no '..',
    no name Windows reserves).

    Raises:
        UnsafePath: the name could escape the workspace or is not portable.
    """
    if _RUN_NAME.match(name) and name.split(".", 1)[0].upper() in _RESERVED_NAMES:
        raise UnsafePath(f"Run name {name!r} is a device name reserved on Windows and on shares served from it",
                         where="--run", fix="choose another name, e.g. add a suffix like '-1'")
    if not _RUN_NAME.match(name) or ".." in name or name.endswith("."):
        raise UnsafePath(
            f"Run name {name!r} is not allowed",
            where="--run",
            fix="use 1-100 letters, digits, '.', '_' or '-', starting with a letter or digit",
        )
    return name


def ensure_inside(root: Path, path: Path) -> Path:
    """Return ``path`` resolved, refusing anything that is not inside ``root``."""
    root_resolved = root.resolve()
    resolved = path.resolve()
    if resolved != root_resolved and root_resolved not in resolved.parents:
        raise UnsafePath(
            f"Refusing to write {resolved}: it is outside the workspace {root_resolved}",
            fix="choose a path inside the workspace",
        )
    return resolved


def atomic_write(path: Path, data: str | bytes, *, root: Path | None = None) -> Path:
    """Write ``data`` to ``path`` atomically: temp file beside it, fsync, then rename.

    Args:
        path: destination file.
        data: text (written as UTF-8) or bytes.
        root: when given, ``path`` must lie inside it.

    Returns:
        The destination path.

    Raises:
        UnsafePath: ``path`` is outside ``root``.
        BadInput: the disk is full or a file-size limit was hit; nothing is left half-written.
    """
    if root is not None:
        ensure_inside(root, path)
    path.parent.mkdir(parents=True, exist_ok=True)
    payload = data.encode("utf-8") if isinstance(data, str) else data
    fd, tmp_name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(payload)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp_name, path)
    except OSError as exc:
        _remove_quietly(tmp_name)
        raise BadInput(
            f"Could not write {path}: {exc.strerror or exc}",
            where=str(path),
            fix="free disk space or raise the file-size limit, then run `ltx-pipeline resume`",
        ) from exc
    except BaseException:
        _remove_quietly(tmp_name)
        raise
    return path


def _remove_quietly(name: str) -> None:
    try:
        os.unlink(name)
    except OSError:
        pass


@dataclass(frozen=True)
class RunPaths:
    """Where one run keeps its files: ``<workspace>/<run>/...``."""

    root: Path

    @property
    def request_file(self) -> Path:
        return self.root / "run.yaml"

    @property
    def plan_file(self) -> Path:
        return self.root / "plan.md"

    @property
    def config_file(self) -> Path:
        return self.root / "config.yaml"

    @property
    def logs(self) -> Path:
        return self.root / "logs"

    @property
    def engine_log(self) -> Path:
        return self.logs / "engine.log"

    @property
    def lock_file(self) -> Path:
        return self.root / ".driver.lock"

    @property
    def dataset(self) -> Path:
        return self.root / "dataset"

    @property
    def outputs(self) -> Path:
        return self.root / "outputs"

    @property
    def overfit(self) -> Path:
        return self.root / "overfit"


@dataclass(frozen=True)
class Workspace:
    """A workspace folder: one SQLite store, one Optuna store, one folder per run."""

    root: Path

    @classmethod
    def at(cls, root: Path | str | None) -> Workspace:
        path = Path(root) if root is not None else default_workspace()
        if path.exists() and not path.is_dir():
            raise BadInput(f"Workspace {path} is not a directory", where="--workspace",
                           fix="point --workspace at a folder")
        return cls(path.expanduser().resolve())

    @property
    def db_file(self) -> Path:
        return self.root / DB_FILENAME

    @property
    def optuna_db_file(self) -> Path:
        return self.root / OPTUNA_DB_FILENAME

    @property
    def store(self) -> Path | str:
        """The store this workspace uses: ``$LTX_PIPELINE_STORE`` (a shared server) or its SQLite file."""
        from ltx_pipeline.store.location import store_target

        return store_target(self.db_file)

    def has_store(self) -> bool:
        """Whether a store exists to read: a server URL always does; the SQLite file once created."""
        store = self.store
        return not isinstance(store, Path) or store.exists()

    def run(self, name: str) -> RunPaths:
        validate_run_name(name)
        return RunPaths(ensure_inside(self.root, self.root / name))

    def create(self) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
