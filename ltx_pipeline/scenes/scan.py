"""The plan's scene scan: every video's cuts, cached per file in the workspace, found on every usable core.

Invariant: a file's record ({"fps", "frames", "cuts"}) is cached by path, size, mtime and detector, and only when
it decoded (an error is never cached: the user may fix the file); the records are the serial scan's
(``detect.scan_cuts``), however many cores found them (``scenes.parallel``).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

from ltx_pipeline.engine.reporting import Reporter
from ltx_pipeline.scenes.detect import DETECTION_WIDTH, DETECTOR, DetectorSpec
from ltx_pipeline.scenes.parallel import scan_many, usable_cores

__all__ = ["ScanCache", "find_cuts", "scan_videos"]


class ScanCache(Protocol):
    """The journal's workspace-wide media facts cache (``probing.FactsCache``), keyed by path, size and mtime."""

    def cached_media_facts(self, keys: list[tuple[str, int, int]]) -> dict[str, dict[str, Any]]: ...

    def remember_media_facts(self, rows: list[tuple[str, int, int, dict[str, Any]]]) -> None: ...


def scan_videos(videos: list[Path], *, detector: DetectorSpec = DETECTOR, cache: ScanCache | None = None,
                on_progress: Callable[[int, int], None] | None = None,
                workers: int | None = None) -> dict[str, dict[str, Any]]:
    """Each video's cuts: path -> {"fps", "frames", "cuts"}, or {"error": why} when it does not decode.

    A file's cuts are cached by path, size, mtime and detector (re-planning decodes nothing twice). The videos
    not cached are scanned on every usable core (``workers``: at most that many processes), with the cuts of
    the serial scan (``scenes.parallel``).
    """
    suffix = f"#scenes {detector.label} at {DETECTION_WIDTH} px"
    keys = {str(video): (str(video) + suffix, *_identity(video)) for video in videos}
    cached = cache.cached_media_facts(list(keys.values())) if cache is not None and keys else {}
    found = {str(video): cached[keys[str(video)][0]] for video in videos if keys[str(video)][0] in cached}
    fresh: list[tuple[str, int, int, dict[str, Any]]] = []
    finished = len(found)

    def done(video: Path, record: dict[str, Any]) -> None:
        nonlocal finished
        key = keys[str(video)]
        if "error" not in record and key[1] >= 0:  # an error is never cached: the user may fix the file
            fresh.append((*key, record))
        finished += 1
        if on_progress is not None:
            on_progress(finished, len(videos))

    if on_progress is not None and found:
        on_progress(finished, len(videos))
    todo = list(dict.fromkeys(video for video in videos if str(video) not in found))
    found.update(scan_many(todo, detector, workers=workers, on_done=done))
    if cache is not None and fresh:
        cache.remember_media_facts(fresh)
    return {str(video): found[str(video)] for video in videos}


class _PlanContext(Protocol):
    @property
    def journal(self) -> Any: ...

    @property
    def reporter(self) -> Reporter: ...

    def narrate(self, text: str) -> None: ...


def find_cuts(ctx: _PlanContext, videos: list[str]) -> dict[str, dict[str, Any]]:
    """``scan_videos`` for the plan phase: says what it does, caches in the run's journal."""
    if not videos:
        return {}
    ctx.narrate(f"Looking for scene cuts in {len(videos)} video(s) ({DETECTOR.kind} detector, frames decoded at "
                f"most {DETECTION_WIDTH} px wide, on {usable_cores()} core(s); cached per file, so re-planning "
                "decodes nothing twice)...")
    def progress(done: int, total: int) -> None:  # the CLI's progress bar (one decode of each video takes a while)
        ctx.reporter.on_count("looking for scene cuts", done, total)

    return scan_videos([Path(video) for video in videos], cache=ctx.journal, on_progress=progress)


def _identity(video: Path) -> tuple[int, int]:
    """Size and mtime, what the cache keys a file by; (-1, -1) (never cached) for one that has gone."""
    try:
        stat = video.stat()
    except OSError:
        return -1, -1
    return stat.st_size, stat.st_mtime_ns
