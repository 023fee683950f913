"""The New-run page's choices: the data roots, the modes, each field's default and each select's options.

Taken from where the CLI takes them (``ltx.modes.MODES``, the request model's defaults and literals), so the
page offers what ``ltx-pipeline run`` accepts and shows the defaults a left-out option gets.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ltx_pipeline.captioning import CAPTIONERS
from ltx_pipeline.ltx.modes import MODES
from ltx_pipeline.request.model import BACKENDS, RunRequest
from ltx_pipeline.ui.actions.create import FIELDS

__all__ = ["new_run_context"]


def new_run_context(roots: Sequence[Path], read_only: bool) -> dict[str, Any]:
    """The template context of ``new.html`` (besides the CSRF token)."""
    return {"roots": [str(r) for r in roots], "read_only": read_only,
            "modes": [{"name": m.name, "label": f"{m.name}: {m.title}"} for m in MODES.values()],
            "defaults": _defaults(), "choices": {"captioner": list(CAPTIONERS), "backend": list(BACKENDS),
                                                 "audio": ["auto", "on", "off"], "autotune": ["on", "off"],
                                                 "strategy": ["single", "mixed", "chain"],
                                                 "training_mode": ["lora", "full"]}}


def _defaults() -> dict[str, Any]:
    """Each form field's default as the request model gives it (None where it is resolved later)."""
    out: dict[str, Any] = {}
    for key in FIELDS:
        info = RunRequest.model_fields.get(key)
        value = None if info is None or info.is_required() else info.get_default(call_default_factory=True)
        out[key] = value if isinstance(value, (str, int, float, bool)) else None
    return out
