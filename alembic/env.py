"""Alembic environment for the engine's store (SQLModel metadata, SQLite batch mode).

Run through ``ltx_pipeline.store.migrate.upgrade``, which hands in an open connection; the version
table name comes from the config so it never collides with Optuna's.
"""

from sqlmodel import SQLModel

import ltx_pipeline.store.models  # noqa: F401  (registers the tables on SQLModel.metadata)
from alembic import context

config = context.config
target_metadata = SQLModel.metadata
version_table = config.get_main_option("version_table") or "ltx_pipeline_alembic_version"


def run_migrations() -> None:
    connection = config.attributes.get("connection")
    if connection is None:
        from sqlalchemy import create_engine

        engine = create_engine(config.get_main_option("sqlalchemy.url"))
        with engine.begin() as conn:
            _configure_and_run(conn)
    else:
        _configure_and_run(connection)


def _configure_and_run(connection) -> None:
    context.configure(
        connection=connection,
        target_metadata=target_metadata,
        version_table=version_table,
        render_as_batch=True,
        compare_type=True,
    )
    with context.begin_transaction():
        context.run_migrations()


run_migrations()
