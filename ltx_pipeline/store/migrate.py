"""Apply the engine's Alembic migrations to a workspace database.

Where they live and which is newest is ``store.revision`` (no Alembic import). No ``alembic.ini`` or
cwd is used.
"""

from __future__ import annotations

from sqlalchemy import Engine, inspect, text

from ltx_pipeline.store.revision import VERSION_TABLE, head_revision, migrations_dir

__all__ = ["VERSION_TABLE", "head_revision", "migrations_dir", "upgrade"]


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
