"""Where the engine's migrations live and which one is newest, without importing Alembic or SQLAlchemy.

The migrations ship inside the wheel as ``ltx_pipeline/migrations`` (hatchling force-include of
the repository's ``alembic/`` folder) and are found through ``importlib.resources``; in a source
checkout they are the ``alembic/`` folder beside the package. The version table has its own name so
Optuna's migrations (in their own file) can never meet ours.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path

__all__ = ["VERSION_TABLE", "head_revision", "migrations_dir"]

VERSION_TABLE = "ltx_pipeline_alembic_version"


def migrations_dir() -> Path:
    """The folder holding ``env.py`` and ``versions/``: packaged copy first, then the checkout."""
    packaged = Path(str(resources.files("ltx_pipeline") / "migrations"))
    if (packaged / "env.py").is_file():
        return packaged
    checkout = Path(__file__).resolve().parents[2] / "alembic"
    if (checkout / "env.py").is_file():
        return checkout
    raise FileNotFoundError("ltx-pipeline's migrations are missing from this installation")


def head_revision() -> str:
    """The newest revision id, read from the numbered file names."""
    names = sorted(p.name.split("_", 1)[0] for p in (migrations_dir() / "versions").glob("[0-9]*_*.py"))
    return names[-1]
