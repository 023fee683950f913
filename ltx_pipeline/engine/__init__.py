"""The workflow engine: phase protocol, context, fingerprints, lifecycle, lock and drive loop.

The door: ``Runner`` drives a run, ``approve_plan`` approves its plan, ``Phase``/``PhaseResult``/
``RunContext`` are what phases implement and receive; ``fingerprint``, ``journal``, ``status`` and
``processes`` are public modules. The names below load on first use (PEP 562), so
``python -m ltx_pipeline.engine.supervise``, which every detached launch starts, imports only the
standard library and not SQLAlchemy.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ltx_pipeline.engine.context import RunContext
    from ltx_pipeline.engine.phase import Phase, PhaseResult
    from ltx_pipeline.engine.runner import DriveReport, Outcome, Runner, approve_plan

__all__ = ["DriveReport", "Outcome", "Phase", "PhaseResult", "RunContext", "Runner", "approve_plan"]

_HOMES = {
    "RunContext": "ltx_pipeline.engine.context",
    "Phase": "ltx_pipeline.engine.phase",
    "PhaseResult": "ltx_pipeline.engine.phase",
    "DriveReport": "ltx_pipeline.engine.runner",
    "Outcome": "ltx_pipeline.engine.runner",
    "Runner": "ltx_pipeline.engine.runner",
    "approve_plan": "ltx_pipeline.engine.runner",
}


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'ltx_pipeline.engine' has no attribute {name!r}")
    return getattr(importlib.import_module(home), name)
