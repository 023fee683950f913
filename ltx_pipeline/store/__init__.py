"""The engine's SQLite store: tables (``models``), the ``Store`` API and Alembic migrations."""

from ltx_pipeline.store.models import Approval, Event, PhaseRun, Run
from ltx_pipeline.store.store import Store

__all__ = ["Approval", "Event", "PhaseRun", "Run", "Store"]
