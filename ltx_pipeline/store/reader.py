"""``StoreReader``: the store's read path for ``status``, on the standard library's ``sqlite3``.

``status`` runs as a fresh process, often in a loop; importing SQLAlchemy and SQLModel costs it more
than everything else it does. This reader answers the few queries ``status`` makes with plain SQL
over a read-only connection and returns rows whose attributes are the columns, converted by the
types the database itself declares (``JSON``, ``DATETIME``, ``BOOLEAN``: the DDL the SQLModel models
produce through Alembic). It holds no schema of its own: table names are the models'
``__tablename__`` values (a test checks every model column comes back as an attribute), and the
column lists come from the database.

It only opens a store that is at the newest migration; anything else (no file, an older or newer
schema) gets ``None`` from ``StoreReader.open``, and the caller uses the full ``Store``.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from ltx_pipeline.store.revision import VERSION_TABLE, head_revision

__all__ = ["Record", "StoreReader"]

_TABLES = {"runs", "phase_runs", "events", "approvals", "processes", "metrics", "checkpoints", "gpu_leases",
           "gpu_waiters", "ui_audit"}


class Record:
    """One row: its columns as attributes (``row.phase``, ``row.outputs``...), like a model instance."""

    def __init__(self, values: dict[str, Any]) -> None:
        self.__dict__.update(values)

    def __getattr__(self, name: str) -> Any:  # only reached for a column the table does not have
        raise AttributeError(f"this row has no column {name!r}")

    def __repr__(self) -> str:
        return f"Record({self.__dict__!r})"


def _json(value: Any) -> Any:
    return json.loads(value) if isinstance(value, str) else value


def _datetime(value: Any) -> Any:
    """The store writes UTC (``models.utcnow``) and SQLite keeps it without an offset; read it back as UTC."""
    if not isinstance(value, str):
        return value
    parsed = datetime.fromisoformat(value)
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=timezone.utc)


def _bool(value: Any) -> Any:
    return bool(value) if value is not None else None


_CONVERTERS: dict[str, Callable[[Any], Any]] = {"JSON": _json, "DATETIME": _datetime, "BOOLEAN": _bool}


class StoreReader:
    """Read-only queries over a workspace database at the newest schema."""

    def __init__(self, connection: sqlite3.Connection) -> None:
        self._db = connection
        self._converters: dict[str, list[tuple[str, Callable[[Any], Any] | None]]] = {}

    @classmethod
    def open(cls, db_file: Path) -> StoreReader | None:
        """A reader, or None when the file is missing or its schema is not the newest this code knows."""
        if not db_file.is_file():
            return None
        try:
            connection = sqlite3.connect(f"{db_file.resolve().as_uri()}?mode=ro", uri=True, timeout=30)
            (version,) = connection.execute(f"SELECT version_num FROM {VERSION_TABLE}").fetchone() or (None,)
        except sqlite3.Error:
            return None
        if version != head_revision():
            connection.close()
            return None
        return cls(connection)

    def close(self) -> None:
        self._db.close()

    def _rows(self, table: str, where: str = "", params: tuple[Any, ...] = (), order: str = "id") -> list[Record]:
        assert table in _TABLES
        columns = self._columns(table)
        cursor = self._db.execute(f"SELECT {', '.join(c for c, _ in columns)} FROM {table} "  # noqa: S608
                                  f"{'WHERE ' + where if where else ''} ORDER BY {order}", params)
        return [Record({name: (convert(value) if convert else value)
                        for (name, convert), value in zip(columns, row, strict=True)}) for row in cursor]

    def _columns(self, table: str) -> list[tuple[str, Callable[[Any], Any] | None]]:
        if table not in self._converters:
            info = self._db.execute(f"PRAGMA table_info({table})").fetchall()
            self._converters[table] = [(row[1], _CONVERTERS.get(str(row[2]).upper())) for row in info]
        return self._converters[table]

    # -- the queries status makes (the same names and results as ``Store``'s) ----------------------
    def list_runs(self) -> list[Record]:
        return self._rows("runs", order="created_at, id")

    def get_run(self, name: str) -> Record | None:
        found = self._rows("runs", "name = ?", (name,))
        return found[0] if found else None

    def latest_phase_runs(self, run_id: int) -> dict[str, Record]:
        return {row.phase: row for row in self._rows("phase_runs", "run_id = ?", (run_id,), order="attempt")}

    def events(self, run_id: int) -> list[Record]:
        return self._rows("events", "run_id = ?", (run_id,))

    def approval_for(self, run_id: int, subject: str) -> Record | None:
        found = self._rows("approvals", "run_id = ? AND subject = ?", (run_id, subject), order="id DESC")
        return found[0] if found else None

    def processes(self, run_id: int, kind: str | None = None) -> list[Record]:
        if kind is None:
            return self._rows("processes", "run_id = ?", (run_id,))
        return self._rows("processes", "run_id = ? AND kind = ?", (run_id, kind))

    def metrics(self, run_id: int, stage: int | None = None) -> list[Record]:
        if stage is None:
            return self._rows("metrics", "run_id = ?", (run_id,), order="stage, step")
        return self._rows("metrics", "run_id = ? AND stage = ?", (run_id, stage), order="stage, step")

    def checkpoints(self, run_id: int, stage: int | None = None) -> list[Record]:
        if stage is None:
            return self._rows("checkpoints", "run_id = ?", (run_id,), order="stage, step")
        return self._rows("checkpoints", "run_id = ? AND stage = ?", (run_id, stage), order="stage, step")

    def gpu_leases(self) -> list[Record]:
        return self._rows("gpu_leases")

    def gpu_waiters(self) -> list[Record]:
        return self._rows("gpu_waiters")

    def audit_rows(self, run: str | None = None, limit: int = 200) -> list[Record]:
        if run is None:
            return self._rows("ui_audit", order="id DESC")[:limit]
        return self._rows("ui_audit", "run = ?", (run,), order="id DESC")[:limit]
