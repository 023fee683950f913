"""The dashboard's one way into the store: read-only, never migrated, never locked.

A SQLite store is read through ``store.reader.StoreReader`` (the standard library's ``sqlite3`` in
``mode=ro``), opened afresh for each request: a connection belongs to the thread that opened it, and
the web server answers requests on a pool of threads. A PostgreSQL store is read through ``Store`` on an
engine whose sessions are read-only (``default_transaction_read_only``), built without ``Store.open``,
which would upgrade the schema. Either way a store at another schema than this code's newest is
refused with the fix (``ltx-pipeline status`` upgrades an older one), never upgraded here.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from ltx_pipeline.errors import BadInput
from ltx_pipeline.store.location import redact
from ltx_pipeline.store.reader import StoreReader
from ltx_pipeline.store.revision import VERSION_TABLE, head_revision
from ltx_pipeline.workspace import Workspace

if TYPE_CHECKING:
    from sqlalchemy.engine import Engine

    from ltx_pipeline.store import Store

__all__ = ["StoreSource"]


class StoreSource:
    """Opens the workspace's store for reading, one short-lived reader per request."""

    def __init__(self, workspace: Workspace) -> None:
        self.workspace = workspace
        self.target = workspace.store
        self._engine: Engine | None = None
        if not isinstance(self.target, Path):
            self._engine = _read_only_engine(self.target)

    @property
    def shown(self) -> str:
        """The store as the page may show it (a server URL's password replaced)."""
        return redact(self.target)

    def check(self, settle_s: float = 15.0) -> None:
        """Refuse, before serving, a store this code cannot read without changing it.

        A SQLite store that another process is creating right now (``run`` started beside the dashboard) is
        below the head schema for the moment its migrations take. While the file (or its WAL) was written in
        the last few seconds it is waited for, up to ``settle_s`` seconds; a store that stays below the head,
        or an old one nobody writes, is refused (``status`` upgrades it).

        Raises:
            BadInput: the store's schema is older or newer than this ltx-pipeline's.
        """
        deadline = time.monotonic() + settle_s
        while True:
            try:
                with self.open():
                    return
            except BadInput:
                if self._engine is not None or time.monotonic() >= deadline or not self._being_written():
                    raise
                time.sleep(0.25)

    def _being_written(self, recent_s: float = 5.0) -> bool:
        assert isinstance(self.target, Path)
        files = (self.target, self.target.with_name(self.target.name + "-wal"))
        times = [f.stat().st_mtime for f in files if f.exists()]
        return bool(times) and time.time() - max(times) < recent_s

    @contextmanager
    def open(self) -> Iterator[StoreReader | Store | None]:
        """A reader for one request, or None while the workspace has no store yet (no run started)."""
        if self._engine is not None:
            from ltx_pipeline.store import Store

            _check_server_revision(self._engine, self.shown)
            yield Store(self._engine)
            return
        assert isinstance(self.target, Path)
        if not self.target.is_file():
            yield None
            return
        reader = StoreReader.open(self.target)
        if reader is None:
            raise BadInput(f"The store {self.target} is not at this ltx-pipeline's schema ({head_revision()})",
                           where="--workspace",
                           fix="run `ltx-pipeline status` once to upgrade it (the dashboard never writes the store)")
        try:
            yield reader
        finally:
            reader.close()


def _read_only_engine(url: str) -> Engine:
    """A SQLAlchemy engine whose every transaction is read-only on the server side."""
    from sqlalchemy import create_engine

    options = {"options": "-c default_transaction_read_only=on"} if url.startswith("postgresql") else {}
    return create_engine(url, pool_pre_ping=True, connect_args=options)


def _check_server_revision(engine: Engine, shown: str) -> None:
    from sqlalchemy import text
    from sqlalchemy.exc import SQLAlchemyError

    try:
        with engine.connect() as connection:
            version = connection.execute(text(f"SELECT version_num FROM {VERSION_TABLE}")).scalar()
    except SQLAlchemyError as exc:
        raise BadInput(f"Cannot read the store {shown}: {type(exc).__name__}", where="--store",
                       fix="check the URL and that the server is up, or run `ltx-pipeline status` first") from exc
    if version != head_revision():
        raise BadInput(f"The store {shown} is at schema {version}, not this ltx-pipeline's {head_revision()}",
                       where="--store", fix="run `ltx-pipeline status` once to upgrade it (the dashboard never writes)")
