"""The engine's SQLite store: tables (``models``), the ``Store`` API and Alembic migrations."""

from ltx_pipeline.store.models import (
    Approval,
    Checkpoint,
    Event,
    MediaFacts,
    Metric,
    PhaseRun,
    Process,
    Run,
    saved_id,
)
from ltx_pipeline.store.store import Store

__all__ = ["Approval", "Checkpoint", "Event", "MediaFacts", "Metric", "PhaseRun", "Process", "Run", "Store", "saved_id"]
