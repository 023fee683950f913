"""A trial's memory figures, where they came from, and whether its fit was assumed: what autotune's reports
(``_report``: the log and markdown; ``_plot``: autotune.png) both read."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

__all__ = ["MEMORY_FILE", "SOURCE_WORDS", "assumed_fit", "memory_of", "num", "outcome_words"]

MEMORY_FILE = "memory.json"  # written by ``_trial`` beside each trial's log
_MEMORY_KEYS = ("peak_vram_gb", "peak_source", "validation_peak_vram_gb", "validation_peak_source", "memory_note",
                "assumed_fit", "host_ram_source")
SOURCE_WORDS = {
    "vram sampler": "the engine's own sampling of the trial's GPU, four times a second (a reading of an idle card, "
                    "at most 32 MiB, is not a measurement)",
    "trainer statistic": "the peak in the trainer's end-of-run statistics block (an nvidia-smi snapshot)",
    "reference trainer accounting": "the reference trainer's own count of live tensor bytes, times the memory "
                                    "scale (`reference_memory_scale` in run.yaml)",
    "simulated cost surface": "the cost surface's figure for that config (simulated backend)",
}


def memory_of(trial: dict[str, Any]) -> dict[str, Any]:
    """The trial's memory figures and their sources: the record's own keys, else the trial's ``memory.json``."""
    if "peak_source" in trial or "validation_peak_source" in trial:
        return {k: trial.get(k) for k in _MEMORY_KEYS}
    saved: dict[str, Any] = {}
    if trial.get("log"):
        try:
            saved = json.loads((Path(trial["log"]).parent / MEMORY_FILE).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            saved = {}
    out = {k: saved.get(k) for k in _MEMORY_KEYS}
    # The record's figures are what the sweep judged; the file only adds where they came from.
    for key in ("peak_vram_gb", "validation_peak_vram_gb"):
        out[key] = trial.get(key)
    return out


def num(value: float | None, fmt: str = "{:.2f}", missing: str = "-") -> str:
    return missing if value is None else fmt.format(value)


def assumed_fit(trial: dict[str, Any]) -> bool:
    return bool(memory_of(trial).get("assumed_fit")) and trial.get("outcome") == "fit"


def outcome_words(trial: dict[str, Any]) -> str:
    return f"{trial['outcome']} (assumed: memory not measured)" if assumed_fit(trial) else str(trial["outcome"])
