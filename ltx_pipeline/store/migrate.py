"""Apply the engine's Alembic migrations to a workspace database.

The migrations ship inside the wheel as ``ltx_pipeline/migrations`` (hatchling force-include of
the repository's ``alembic/`` folder) and are found through ``importlib.resources``; in a source
checkout they are the ``alembic/`` folder beside the package. No ``alembic.ini`` or cwd is used.
The version table has its own name so Optuna's migrations (in their own file) can never meet ours.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path

from sqlalchemy import Engine, inspect, text

__all__ = ["VERSION_TABLE", "head_revision", "migrations_dir", "upgrade"]

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
    """The newest revision id, read from the numbered file names (no alembic import needed)."""
    names = sorted(p.name.split("_", 1)[0] for p in (migrations_dir() / "versions").glob("[0-9]*_*.py"))
    return names[-1]


def current_revision(engine: Engine) -> str | None:
    with engine.connect() as conn:
        if not inspect(conn).has_table(VERSION_TABLE):
            return None
        return conn.execute(text(f"SELECT version_num FROM {VERSION_TABLE}")).scalar()


def upgrade(engine: Engine, revision: str = "head") -> None:
    """Upgrade the database behind ``engine`` to ``revision`` (cheap no-op when already there)."""
    if revision == "head" and current_revision(engine) == head_revision():
        return
    from alembic.config import Config

    from alembic import command  # imported lazily: status on an up-to-date store never needs it

    config = Config()
    config.set_main_option("script_location", str(migrations_dir()))
    config.set_main_option("version_table", VERSION_TABLE)
    with engine.begin() as connection:
        config.attributes["connection"] = connection
        command.upgrade(config, revision)
