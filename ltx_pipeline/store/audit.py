"""The store's audit of the dashboard's write actions (the studio): one row per action asked, newest first.

``AuditMethods`` is mixed into ``Store`` (it uses its ``_session``): each record is one transaction. The rows
are written by the web layer only (``ltx_pipeline.ui.actions``) and read by the run page.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager

from sqlmodel import Session, col, select

from ltx_pipeline.store.models import UiAudit

__all__ = ["AuditMethods"]


class AuditMethods:
    """The studio's audit rows (mixed into ``Store``)."""

    _session: Callable[[], AbstractContextManager[Session]]  # Store's own: one session, one transaction

    def record_audit(self, *, run: str | None, who: str, action: str, command: str, outcome: str) -> UiAudit:
        """Append one audit row."""
        with self._session() as s:
            row = UiAudit(run=run, who=who, action=action, command=command, outcome=outcome)
            s.add(row)
            s.flush()
            return row

    def audit_rows(self, run: str | None = None, limit: int = 200) -> list[UiAudit]:
        """The newest ``limit`` audit rows (of run ``run``, or all), newest first."""
        with self._session() as s:
            statement = select(UiAudit).order_by(col(UiAudit.id).desc()).limit(limit)
            if run is not None:
                statement = statement.where(UiAudit.run == run)
            return list(s.exec(statement))
