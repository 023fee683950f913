"""How a sweep's trials shared the GPUs, measured from their own start and end times (``--autotune-parallel``).

A sweep with several slots keeps each trial's GPUs, start and end (epoch seconds) as user attributes of
its Optuna trial (``parallel_sweep``), the committed ones and those stopped as settled alike. This module
reads them back and says what happened, from those times alone: how many ran at once at most (not the
slots asked for), whether any two that overlapped in time shared a GPU, the sweep's wall time (first
start to last end) and its GPU-seconds (each trial's seconds times its GPUs), and how many of those went
to trials stopped as settled (speculation the sequential sweep would not have run). ``render`` writes
autotune.md's section. Pure apart from reading the study.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ltx_pipeline.outputs.autotune import SideBySide, SideBySideTrial

__all__ = ["Span", "most_at_once", "read_spans", "render", "shared_gpus", "summarise", "summary_line"]


@dataclass(frozen=True)
class Span:
    """One trial's time on its GPUs."""

    number: int
    gpus: tuple[int, ...]
    start: float
    end: float
    settled: bool  # stopped (or its result dropped) because committed results settled it


def read_spans(study: Any, settled_reason: str) -> list[Span]:
    """Every trial of ``study`` that recorded its GPUs, start and end, in start order."""
    spans = []
    for trial in study.get_trials(deepcopy=False):
        attrs = trial.user_attrs
        gpus, start, end = attrs.get("gpus"), attrs.get("started_at"), attrs.get("ended_at")
        if not gpus or start is None or end is None or attrs.get("trial_number") is None:
            continue
        spans.append(Span(int(attrs["trial_number"]), tuple(int(g) for g in gpus), float(start), float(end),
                          attrs.get("reason") == settled_reason))
    return sorted(spans, key=lambda s: (s.start, s.number))


def most_at_once(spans: list[Span]) -> int:
    """The most trials running at one moment (an end at the instant another starts is not an overlap)."""
    events = sorted([(s.start, 1) for s in spans] + [(s.end, -1) for s in spans], key=lambda e: (e[0], e[1]))
    running = most = 0
    for _, change in events:
        running += change
        most = max(most, running)
    return most


def shared_gpus(spans: list[Span]) -> list[tuple[int, int, int]]:
    """(trial, trial, GPU) for each pair that overlapped in time on one GPU: none, when slots are honoured."""
    return [(a.number, b.number, gpu) for i, a in enumerate(spans) for b in spans[i + 1:]
            if a.start < b.end and b.start < a.end for gpu in sorted(set(a.gpus) & set(b.gpus))]


def summarise(spans: list[Span], slots: list[tuple[int, ...]]) -> SideBySide | None:
    """The section's figures, or None when no trial recorded its times (a sequential sweep)."""
    if not spans:
        return None
    first = min(s.start for s in spans)
    trials = [SideBySideTrial(number=s.number, gpus=list(s.gpus), start_s=s.start - first, end_s=s.end - first,
                              settled=s.settled) for s in spans]
    return SideBySide(slots=[list(slot) for slot in slots], trials=trials, most_at_once=most_at_once(spans),
                      shared=[list(pair) for pair in shared_gpus(spans)],
                      wall_seconds=max(s.end for s in spans) - first,
                      gpu_seconds=sum((s.end - s.start) * len(s.gpus) for s in spans),
                      settled_gpu_seconds=sum((s.end - s.start) * len(s.gpus) for s in spans if s.settled))


def summary_line(side: SideBySide) -> str:
    """What the slots did, in one paragraph (the narration's and autotune.md's words)."""
    settled = [t for t in side.trials if t.settled]
    shared = ("; " + "; ".join(f"trials {a} and {b} overlapped on GPU {gpu}" for a, b, gpu in side.shared)
              if side.shared else ", and no two that overlapped in time shared a GPU" if side.most_at_once > 1 else "")
    spent = (f", of which {side.settled_gpu_seconds:.1f} on {len(settled)} trial(s) stopped as settled by other "
             "results (the sequential sweep would not have run them)" if settled else
             "; no trial was stopped as settled by other results")
    return (f"{len(side.trials)} trial(s) on {len(side.slots)} GPU slot(s) "
            f"({', '.join(str(slot) for slot in side.slots)}): at most {side.most_at_once} ran at once{shared} "
            "(measured from each trial's own start and end). Sweep wall time "
            f"{side.wall_seconds:.1f} s (first trial's start to last trial's end); {side.gpu_seconds:.1f} GPU-seconds "
            f"(each trial's seconds x its GPUs){spent}.")


def render(side: SideBySide) -> str:
    """autotune.md's "Trials side by side" section: the summary and one row per trial."""
    rows = [f"| {t.number} | {','.join(map(str, t.gpus))} | {t.start_s:.1f} | {t.end_s:.1f} | "
            f"{t.end_s - t.start_s:.1f} | {'stopped as settled' if t.settled else 'committed'} |" for t in side.trials]
    head = ["\n## Trials side by side\n", summary_line(side), "",
            "| trial | GPUs | start s | end s | seconds | result |", "|---|---|---|---|---|---|"]
    return "\n".join([*head, *rows]) + "\n"
