"""A run's cache hits: per stage, how many of its ``.precomputed`` files came from the latent cache.

Owns one small JSON file in the run's folder (``cache-hits.json``), written atomically by preprocessing each
time it assembles a stage from the cache (``preprocessing.from_cache.fill_from_cache``), and read by ``status``
and the dashboard. Reading it costs one small file and no heavy import, so ``status`` stays light. A stage
assembled again replaces what the file said of it; a stage preprocessed whole (the cache could not key it, or
it is off) is not in it. Stage 0 is autotune's sanity set.
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from ltx_pipeline.workspace import atomic_write

__all__ = ["HITS_FILE", "HOLDOUT_STAGE", "SANITY_STAGE", "StageHits", "read_hits", "record_hits", "stage_label"]

HITS_FILE = "cache-hits.json"
_VERSION = 1


SANITY_STAGE = 0  # autotune's sanity set, preprocessed as "stage 0"
HOLDOUT_STAGE = -1  # the held-out rows the holdout loss is measured on


def stage_label(stage: int) -> str:
    """What a preprocessed set is called wherever it is named: ``stage N``, ``sanity set`` or ``holdout set``."""
    if stage == SANITY_STAGE:
        return "sanity set"
    return "holdout set" if stage == HOLDOUT_STAGE else f"stage {stage}"


@dataclass(frozen=True)
class StageHits:
    """One assembly of a stage's ``.precomputed``: files wanted, linked from the cache, encoded, still missing."""

    stage: int  # SANITY_STAGE, HOLDOUT_STAGE or a training stage (1, 2, ...)
    wanted: int
    hits: int
    encoded: int
    missing: int
    cache: str  # the cache root the files came from
    at: float  # seconds since the epoch

    @property
    def label(self) -> str:
        return stage_label(self.stage)


def record_hits(run_root: Path, stage: int, *, wanted: int, hits: int, encoded: int, cache: Path,
                workspace: Path) -> StageHits:
    """Record that ``stage`` of the run at ``run_root`` took ``hits`` of ``wanted`` files from ``cache`` and
    encoded ``encoded`` (the rest are missing); what the file said of other stages is kept."""
    stages = {hit.stage: hit for hit in read_hits(run_root)}
    entry = StageHits(stage, wanted, hits, encoded, max(0, wanted - hits - encoded), str(cache), time.time())
    stages[stage] = entry
    body = {"version": _VERSION, "stages": [asdict(hit) for _, hit in sorted(stages.items())]}
    atomic_write(run_root / HITS_FILE, json.dumps(body, indent=1) + "\n", root=workspace)
    return entry


def read_hits(run_root: Path) -> list[StageHits]:
    """The run's recorded stages, by stage; empty when none was assembled from the cache (or the file is unreadable)."""
    try:
        data = json.loads((run_root / HITS_FILE).read_text(encoding="utf-8"))
        stages = [_stage(item) for item in data["stages"]] if data.get("version") == _VERSION else []
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return []
    return sorted(stages, key=lambda hit: hit.stage)


def _stage(item: Any) -> StageHits:
    return StageHits(int(item["stage"]), int(item["wanted"]), int(item["hits"]), int(item["encoded"]),
                     int(item["missing"]), str(item["cache"]), float(item["at"]))
