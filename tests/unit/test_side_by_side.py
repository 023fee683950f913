"""autotune.md's "Trials side by side" (#46): every figure it prints is what the trials' own times say.

Spans are generated (trial start and end times on GPU slots, some overlapping, some sharing a GPU, some
stopped as settled); each printed figure is recomputed here the plain way and compared with the text.
"""

from __future__ import annotations

import re
from types import SimpleNamespace
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from ltx_pipeline.autotune.side_by_side import Span, most_at_once, read_spans, render, shared_gpus, summarise

SETTLED = "superseded: settled by other results while it ran"


@st.composite
def spans(draw: Any) -> list[Span]:
    count = draw(st.integers(1, 8))
    out = []
    for number in range(1, count + 1):
        start = draw(st.integers(0, 40)) / 2  # half-second grid: ends meeting starts happen
        length = draw(st.integers(1, 20)) / 2
        gpus = tuple(sorted(draw(st.sets(st.integers(0, 3), min_size=1, max_size=2))))
        out.append(Span(number, gpus, 1000.0 + start, 1000.0 + start + length, draw(st.booleans())))
    return sorted(out, key=lambda s: (s.start, s.number))


def _running_at(items: list[Span], moment: float) -> int:
    return sum(1 for s in items if s.start <= moment < s.end)


@settings(max_examples=150, deadline=None)
@given(spans())
def test_the_figures_are_the_trials_own_times(items: list[Span]) -> None:
    side = summarise(items, [(0,), (1,)])
    assert side is not None
    assert side.most_at_once == max(_running_at(items, s.start) for s in items) == most_at_once(items)
    overlapping_on_a_gpu = {(a.number, b.number, g) for a in items for b in items if a.number != b.number
                            for g in set(a.gpus) & set(b.gpus) if a.start < b.end and b.start < a.end}
    assert {(min(a, b), max(a, b), g) for a, b, g in shared_gpus(items)} == \
        {(min(a, b), max(a, b), g) for a, b, g in overlapping_on_a_gpu}
    text = render(side)
    wall = max(s.end for s in items) - min(s.start for s in items)
    gpu_seconds = sum((s.end - s.start) * len(s.gpus) for s in items)
    assert f"Sweep wall time {wall:.1f} s" in text
    assert f"{gpu_seconds:.1f} GPU-seconds" in text
    assert f"at most {side.most_at_once} ran at once" in text
    settled = [s for s in items if s.settled]
    if settled:
        wasted = sum((s.end - s.start) * len(s.gpus) for s in settled)
        assert f"of which {wasted:.1f} on {len(settled)} trial(s) stopped as settled" in text
    else:
        assert "no trial was stopped as settled" in text
    if overlapping_on_a_gpu:
        assert "overlapped on GPU" in text and "no two that overlapped in time shared a GPU" not in text
    elif side.most_at_once > 1:
        assert "no two that overlapped in time shared a GPU" in text
    else:  # none overlapped: nothing to say about sharing
        assert "at most 1 ran at once (measured" in text and "shared a GPU" not in text
    row = r"^\| (\d+) \| ([\d,]+) \| ([\d.]+) \| ([\d.]+) \| ([\d.]+) \| (committed|stopped as settled) \|$"
    rows = re.findall(row, text, re.M)
    first = min(s.start for s in items)
    assert [(int(n), g, float(a), float(b), r) for n, g, a, b, _, r in rows] == \
        [(s.number, ",".join(map(str, s.gpus)), round(s.start - first, 1), round(s.end - first, 1),
          "stopped as settled" if s.settled else "committed") for s in items]


def test_an_end_at_the_instant_another_starts_is_not_an_overlap() -> None:
    items = [Span(1, (0,), 0.0, 5.0, False), Span(2, (0,), 5.0, 9.0, False)]
    assert most_at_once(items) == 1 and shared_gpus(items) == []


def test_no_recorded_times_means_no_section() -> None:
    assert summarise([], [(0,), (1,)]) is None


def test_the_spans_are_read_from_the_study_s_trials() -> None:
    def trial(attrs: dict[str, Any]) -> Any:
        return SimpleNamespace(user_attrs=attrs)

    study = SimpleNamespace(get_trials=lambda deepcopy: [
        trial({"trial_number": 2, "gpus": [1], "started_at": 10.0, "ended_at": 14.0}),
        trial({"trial_number": 1, "gpus": [0], "started_at": 9.0, "ended_at": 12.0, "reason": SETTLED}),
        trial({"trial_number": 3}),  # a sequential trial: no GPUs or times kept
        trial({"reason": "pruned"}),
    ])
    assert read_spans(study, SETTLED) == [Span(1, (0,), 9.0, 12.0, True), Span(2, (1,), 10.0, 14.0, False)]
