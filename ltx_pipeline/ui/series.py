"""A run's training curves: loss and step time per step, for each stage, growing while the trainer trains.

The store's ``metrics`` rows are what the driver's follower recorded; the follower stores the log offset
it reached with the process, so the log's lines after that offset are exactly the steps not stored yet
(a poll in flight, or a trainer that runs on with no driver following it). Those are parsed here, read
only, at most ``_TAIL_BYTES`` of them, and added to the stored ones: the curve is as fresh as the log.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ltx_pipeline.store.rows import saved_id
from ltx_pipeline.trainer_log import LogFollower, LogParser, StepEvent

if TYPE_CHECKING:
    from ltx_pipeline.store import Run, Store
    from ltx_pipeline.store.reader import Record, StoreReader

__all__ = ["training_series"]

_TAIL_BYTES = 8 * 1024 * 1024


def training_series(store: Store | StoreReader, run: Run | Record) -> list[dict[str, Any]]:
    """Each stage's points, oldest stage first: ``{"stage", "steps", "loss", "step_time_s", "clean"}``.

    ``step_time_s`` is None at a step whose time includes a validation pass or a checkpoint save (not
    ``clean``), so a curve of step times shows the steady speed, not the save spikes.
    """
    run_id = saved_id(run)
    points: dict[int, dict[int, tuple[float | None, float | None, bool]]] = {}
    for metric in store.metrics(run_id):
        points.setdefault(metric.stage, {})[metric.step] = (metric.loss, metric.step_time_s, bool(metric.clean))
    processes = store.processes(run_id, "train")
    if processes:
        latest = processes[-1]
        stage_points = points.setdefault(latest.stage, {})
        for event in _unstored_steps(Path(latest.log_path), latest.log_offset):
            stage_points.setdefault(event.step, (event.loss, event.step_time, True))
    return [_stage_entry(stage, points[stage]) for stage in sorted(points) if points[stage]]


def _unstored_steps(log: Path, offset: int) -> tuple[StepEvent, ...]:
    """The Step lines the log holds past ``offset`` (what no follower has stored yet)."""
    try:
        stat = log.stat()
    except OSError:
        return ()
    return _parsed(str(log), offset, stat.st_size, stat.st_mtime_ns)


# Every open page polls every two seconds: a log that has not changed since is not read again. The size and
# mtime are part of the key only so that a grown log misses the cache.
@functools.lru_cache(maxsize=32)
def _parsed(log: str, offset: int, size: int, mtime_ns: int) -> tuple[StepEvent, ...]:
    text, _ = LogFollower(log, offset).read_text(_TAIL_BYTES)
    parser = LogParser()
    return tuple(event for event in (*parser.feed_text(text), *parser.flush()) if isinstance(event, StepEvent))


def _stage_entry(stage: int, by_step: dict[int, tuple[float | None, float | None, bool]]) -> dict[str, Any]:
    steps = sorted(by_step)
    return {"stage": stage, "steps": steps, "loss": [by_step[s][0] for s in steps],
            "step_time_s": [by_step[s][1] if by_step[s][2] else None for s in steps],
            "clean": [by_step[s][2] for s in steps]}
