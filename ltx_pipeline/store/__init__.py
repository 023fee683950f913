"""The engine's SQLite store: tables (``models``), the states they keep (``states``), the ``Store`` API,
Alembic migrations, and the light read path ``status`` uses (``reader``).

The names below load on first use (PEP 562): ``ltx_pipeline.store.reader``, ``ltx_pipeline.store.states``
and ``ltx_pipeline.store.revision`` import only the standard library, so ``status`` never pays for
SQLAlchemy and SQLModel.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ltx_pipeline.store.models import (
        Approval,
        Checkpoint,
        Event,
        MediaFacts,
        Metric,
        PhaseRun,
        Process,
        Run,
        UiAudit,
    )
    from ltx_pipeline.store.rows import saved_id
    from ltx_pipeline.store.states import PhaseState, ProcessState, RunState
    from ltx_pipeline.store.store import Store

__all__ = ["Approval", "Checkpoint", "Event", "MediaFacts", "Metric", "PhaseRun", "PhaseState", "Process",
           "ProcessState", "Run", "RunState", "Store", "UiAudit", "saved_id"]

_HOMES = {**{name: "ltx_pipeline.store.models" for name in __all__},
          **{name: "ltx_pipeline.store.states" for name in ("PhaseState", "ProcessState", "RunState")},
          "Store": "ltx_pipeline.store.store", "saved_id": "ltx_pipeline.store.rows"}


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'ltx_pipeline.store' has no attribute {name!r}")
    return getattr(importlib.import_module(home), name)
