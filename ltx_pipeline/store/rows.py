"""What every stored row shares, importable without SQLAlchemy: ``saved_id``."""

from __future__ import annotations

from typing import Protocol

__all__ = ["saved_id"]


class _Row(Protocol):
    """Any table row: its primary key is None until the row is flushed to the database."""

    @property
    def id(self) -> int | None: ...


def saved_id(row: _Row) -> int:
    """The primary key of a row the store has saved.

    Raises:
        ValueError: the row was never saved (its ``id`` is still None).
    """
    if row.id is None:
        raise ValueError(f"{type(row).__name__} row has no id: it was never saved to the store")
    return row.id
