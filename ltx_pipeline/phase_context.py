"""``LtxContext``: the engine's ``RunContext`` with this project's request and trainer backend.

The engine is generic over both (it knows neither LTX nor trainers); phases and steps take this
alias, so ``ctx.request`` is a ``RunRequest`` and ``ctx.backend`` a ``TrainerBackend`` to the type checker.
"""

from __future__ import annotations

from typing import TypeAlias

from ltx_pipeline.backends.base import TrainerBackend
from ltx_pipeline.engine.context import RunContext
from ltx_pipeline.request import RunRequest

__all__ = ["LtxContext"]

LtxContext: TypeAlias = RunContext[RunRequest, TrainerBackend]
