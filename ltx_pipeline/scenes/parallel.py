"""Scene scans on every usable core: a process pool over videos, and over time segments of a long video.

Invariant: the cuts are the serial scan's (``detect.scan_cuts``), to the frame. A video is scanned whole in a
worker by that very function, or split into segments (``scenes.segments``: why that gives the same cuts) whose
results are stitched; a split that cannot be shown to decode the serial scan's frames (``Misaligned``, or two
neighbours disagreeing on a frame both decoded) is scanned again whole. Workers: the usable cores
(``os.sched_getaffinity``), capped by the number of jobs; one worker, or too little to scan to repay starting
a pool, means no pool at all: the serial scan in this process. A worker's failure is that video's
``{"error": why}``, as for a file that does not decode.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable
from concurrent.futures import Executor, Future, ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ltx_pipeline.ltx.media import BadMedia
from ltx_pipeline.scenes import detect
from ltx_pipeline.scenes.segments import (
    Misaligned,
    Segment,
    SegmentScan,
    index_video,
    plan_segments,
    scan_segment,
    segmentable,
    stitch,
)

__all__ = ["MIN_SEGMENT_FRAMES", "POOL_FROM_FRAMES", "scan_many", "usable_cores"]

POOL_FROM_FRAMES = 1000  # below this a pool's start (fresh interpreters importing PyAV, OpenCV) is not repaid
MIN_SEGMENT_FRAMES = 600  # shorter ones waste too much: each worker opens the file, seeks, decodes a warm-up

_WORKER_THREADS = 1  # a worker's decoder threads: the pool already has one worker per core, and FFmpeg's frame
# threads cost CPU (the benchmark corpus, serially: 10.4 CPU s with them, 9.2 with one thread)

Record = dict[str, Any]


def usable_cores() -> int:
    """The cores this process may run on (its affinity mask, as a container or ``taskset`` sets it)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):  # not Linux
        return max(1, os.cpu_count() or 1)


@dataclass
class _Video:
    """One video's jobs in the pool: its segments (none: scanned whole) and what came back."""

    path: Path
    segments: list[Segment] = field(default_factory=list)
    scans: dict[int, SegmentScan] = field(default_factory=dict)
    pending: int = 0


def scan_many(videos: list[Path], spec: detect.DetectorSpec, *, workers: int | None = None,
              segment_frames: int | None = None, pool_from: int = POOL_FROM_FRAMES,
              on_done: Callable[[Path, Record], None] | None = None) -> dict[str, Record]:
    """Each video's record as ``scan.scan_videos`` keeps it: {"fps", "frames", "cuts"} or {"error"}.

    Args:
        videos: the videos to scan (none cached).
        spec: the detector.
        workers: processes at most (default: the usable cores); capped by the number of jobs.
        segment_frames: split a video into segments of about this many frames (default: its share of the
            frames of all videos over the workers, at least ``MIN_SEGMENT_FRAMES``); for tests.
        pool_from: fewer frames than this in all are scanned in this process (a pool costs a second or so).
        on_done: called once per video as it completes, in completion order.
    """
    cores = workers if workers is not None else usable_cores()
    sizes = {video: _frames(video) for video in videos} if cores > 1 else {}
    if cores < 2 or sum(sizes.values()) < pool_from:
        return _serial(videos, spec, on_done)
    plans = _plan(sizes, spec, cores, segment_frames)
    jobs = sum(max(1, len(plan.segments)) for plan in plans)
    if jobs < 2:
        return _serial(videos, spec, on_done)
    try:
        pool = ProcessPoolExecutor(max_workers=min(cores, jobs), mp_context=_context(), initializer=_worker_start)
    except (OSError, NotImplementedError, ImportError):  # no process pool here (e.g. no POSIX semaphores)
        return _serial(videos, spec, on_done)
    try:
        found = _run(pool, plans, spec, on_done)
    except BaseException:  # Ctrl-C: stop the workers now rather than after their jobs
        workers_ = list((getattr(pool, "_processes", None) or {}).values())  # no public way before Python 3.14
        pool.shutdown(wait=False, cancel_futures=True)
        for process in workers_:
            if process.is_alive():
                process.terminate()
        raise
    pool.shutdown()
    return {str(video): found[str(video)] for video in videos}


def _run(pool: Executor, plans: list[_Video], spec: detect.DetectorSpec,
         on_done: Callable[[Path, Record], None] | None) -> dict[str, Record]:
    """Every job of ``plans`` through ``pool``; a video's record as soon as its last job is in."""
    found: dict[str, Record] = {}
    futures = _submit(pool, plans, spec)
    for future in _as_done(futures):
        plan, number = futures[future]
        record = _collect(pool, futures, future, plan, number, spec)
        if record is not None:
            found[str(plan.path)] = record
            if on_done is not None:
                on_done(plan.path, record)
    return found


def _worker_start() -> None:
    """A worker leaves Ctrl-C to the engine (which stops it): no traceback from each worker on the terminal."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)


def _serial(videos: list[Path], spec: detect.DetectorSpec,
            on_done: Callable[[Path, Record], None] | None) -> dict[str, Record]:
    """The serial scan, in this process, with FFmpeg's own decoder threads (one core, or little to scan)."""
    found: dict[str, Record] = {}
    for video in videos:
        found[str(video)] = _whole(video, spec)
        if on_done is not None:
            on_done(video, found[str(video)])
    return found


def _whole(video: Path, spec: detect.DetectorSpec, threads: int = 0) -> Record:
    """One video scanned whole by ``detect.scan_cuts`` (looked up at call time, so tests can replace it)."""
    try:
        fps, frames, (cuts,) = detect.scan_cuts(video, [spec], threads=threads)
    except BadMedia as exc:
        return {"error": exc.reason}
    return {"fps": fps, "frames": frames, "cuts": [c for c in cuts if 0 < c < frames]}


def _plan(sizes: dict[Path, int], spec: detect.DetectorSpec, cores: int, segment_frames: int | None) -> list[_Video]:
    """Which videos are split, and into how many segments: the frames of all videos shared over the workers,
    so that one long video among short ones is split and short ones are not; the longest first."""
    videos = list(sizes)
    target = segment_frames or max(MIN_SEGMENT_FRAMES, math.ceil(sum(sizes.values()) / max(1, cores)))
    plans = []
    for video in sorted(videos, key=lambda v: -sizes[v]):
        plan = _Video(video)
        count = math.ceil(sizes[video] / target)
        if segment_frames is None:
            count = min(count, sizes[video] // MIN_SEGMENT_FRAMES)
        if cores < 2 or not segmentable(spec):
            count = 0
        if count >= 2:
            try:
                detect.video_info(video)  # what the serial scan checks first (a truncated file is refused)
                plan.segments = plan_segments(str(video), index_video(video), count)
            except (BadMedia, Misaligned):
                plan.segments = []  # scanned whole: that scan says what is wrong, as today
            if len(plan.segments) < 2:
                plan.segments = []
        plans.append(plan)
    return plans


def _frames(video: Path) -> int:
    """About how many frames ``video`` has, from its header alone (0 when it cannot say: scanned whole, where
    a file that does not decode is reported as today)."""
    import av

    try:
        with av.open(str(video)) as container:
            if not container.streams.video:
                return 0
            stream = container.streams.video[0]
            if stream.frames:
                return int(stream.frames)
            rate = float(stream.average_rate or stream.guessed_rate or 0)
            return int(float(container.duration or 0) / av.time_base * rate)
    except (av.FFmpegError, OSError, UnicodeDecodeError):
        return 0


def _context() -> Any:
    """Fresh interpreters, not forks: the engine may hold threads and locks a fork would copy mid-use."""
    import multiprocessing

    return multiprocessing.get_context("spawn")


_Jobs = dict[Future[Any], tuple[_Video, int]]


def _submit(pool: Executor, plans: list[_Video], spec: detect.DetectorSpec) -> _Jobs:
    futures: _Jobs = {}
    for plan in plans:
        if not plan.segments:
            futures[pool.submit(_whole, plan.path, spec, _WORKER_THREADS)] = (plan, -1)
            continue
        plan.pending = len(plan.segments)
        for segment in plan.segments:
            futures[pool.submit(_segment_job, segment, spec)] = (plan, segment.number)
    return futures


def _as_done(futures: _Jobs) -> Any:
    """Futures as they complete, including those submitted while iterating (a whole re-scan)."""
    from concurrent.futures import FIRST_COMPLETED, wait

    seen: set[Future[Any]] = set()
    while len(seen) < len(futures):
        done, _ = wait([f for f in futures if f not in seen], return_when=FIRST_COMPLETED)
        for future in done:
            seen.add(future)
            yield future


def _segment_job(segment: Segment, spec: detect.DetectorSpec) -> SegmentScan | Record:
    """In a worker: a segment's scan, or {"error"} / {"misaligned"} when it cannot be used."""
    try:
        return scan_segment(segment, spec, threads=_WORKER_THREADS)
    except BadMedia as exc:
        return {"error": exc.reason}
    except Misaligned as exc:
        return {"misaligned": str(exc)}


def _collect(pool: Executor, futures: _Jobs, future: Future[Any], plan: _Video, number: int,
             spec: detect.DetectorSpec) -> Record | None:
    """A finished job's part of its video's record: the record once the video is complete, else None."""
    try:
        result = future.result()
    except Exception as exc:  # a worker that died or raised: this video's error, never a traceback
        result = {"error": f"could not be looked at (the scan's worker failed: {type(exc).__name__}: {exc})"}
    if number < 0:
        return dict(result)
    if plan.pending == 0:  # already settled (an error, or scanned again whole)
        return None
    if isinstance(result, dict):
        plan.pending = 0
        if "error" in result:
            return dict(result)
        _rescan(pool, futures, plan, spec)
        return None
    plan.scans[number] = result
    plan.pending -= 1
    if plan.pending:
        return None
    scans = [plan.scans[segment.number] for segment in plan.segments]
    if not _neighbours_agree(scans):
        _rescan(pool, futures, plan, spec)
        return None
    frames = plan.segments[-1].own[1]
    cuts = stitch(spec, scans)
    return {"fps": scans[0].fps, "frames": frames, "cuts": [c for c in cuts if 0 < c < frames]}


def _rescan(pool: Executor, futures: _Jobs, plan: _Video, spec: detect.DetectorSpec) -> None:
    """The split could not be trusted: scan the video whole (its record comes back as a whole job's)."""
    plan.pending = 0
    futures[pool.submit(_whole, plan.path, spec, _WORKER_THREADS)] = (plan, -1)


def _neighbours_agree(scans: list[SegmentScan]) -> bool:
    """Whether each pair of neighbouring segments decoded the frames both decode to the same pixels."""
    for left, right in zip(scans, scans[1:], strict=False):
        shared = left.digests.keys() & right.digests.keys()
        if not shared or any(left.digests[i] != right.digests[i] for i in shared):
            return False
    return True
