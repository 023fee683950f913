"""Where a workspace's store lives: the embedded SQLite file, or a shared PostgreSQL server.

``LTX_PIPELINE_STORE`` (or ``--store``) names a SQLAlchemy URL such as
``postgresql+psycopg://user:password@db.example:5432/ltx``; unset, the store is the workspace's own
``ltx-pipeline.db``. Optuna's study storage follows: on PostgreSQL the same database in a schema of
its own (``optuna``), so its tables never meet the engine's; on SQLite the workspace's ``optuna.db``.
A URL is shown only with its password replaced (``redact``). Standard library only: ``status`` reads
this before deciding which store to open.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from ltx_pipeline.env_names import STORE_ENV

__all__ = ["OPTUNA_SCHEMA", "STORE_ENV", "is_sqlite", "optuna_storage", "redact", "store_target"]

OPTUNA_SCHEMA = "optuna"
_PASSWORD = re.compile(r"(://[^:/@]+:)[^@]*(@)")


def store_target(db_file: Path) -> Path | str:
    """The store to open: the URL in ``LTX_PIPELINE_STORE`` when set, else the workspace's SQLite file."""
    url = os.environ.get(STORE_ENV, "").strip()
    return url if url and not is_sqlite(url) else (Path(url[len("sqlite:///"):]) if url else db_file)


def is_sqlite(target: Path | str) -> bool:
    return isinstance(target, Path) or str(target).startswith("sqlite")


def redact(target: Path | str) -> str:
    """The store as it may be printed or recorded: a URL's password is replaced by ``***``."""
    return str(target) if isinstance(target, Path) else _PASSWORD.sub(r"\1***\2", str(target))


def optuna_storage(target: Path | str, optuna_file: Path) -> str:
    """Optuna's RDB storage URL for a store: ``optuna.db`` beside SQLite, the ``optuna`` schema on PostgreSQL."""
    if is_sqlite(target):
        return f"sqlite:///{optuna_file}"
    separator = "&" if "?" in str(target) else "?"
    return f"{target}{separator}options=-csearch_path%3D{OPTUNA_SCHEMA}"
