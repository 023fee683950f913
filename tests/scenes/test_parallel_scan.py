"""The scene scan on every core gives the serial scan's cuts: a long video split into segments (with cuts, short
shots and flashes at the segment boundaries), several videos at once in a process pool, a broken file and a
failing worker reported per video, and one usable core meaning no pool at all."""

from __future__ import annotations

import random
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path

import pytest

pytest.importorskip("av")
pytest.importorskip("scenedetect")

from ltx_pipeline.ltx.media import BadMedia  # noqa: E402
from ltx_pipeline.scenes import detect, parallel  # noqa: E402
from ltx_pipeline.scenes.detect import DETECTOR, DetectorSpec, scan_cuts  # noqa: E402
from ltx_pipeline.scenes.footage import Shot, write_footage  # noqa: E402
from ltx_pipeline.scenes.parallel import scan_many  # noqa: E402
from ltx_pipeline.scenes.segments import (  # noqa: E402
    Misaligned,
    Segment,
    VideoIndex,
    index_video,
    plan_segments,
    scan_segment,
    stitch,
)

FPS = 24


def busy_shots(seed: int, frames: int) -> list[Shot]:
    """Shots of 4 to 14 frames (cuts everywhere, some closer than the detector's 8-frame minimum), a few with
    a flash, so that every segment boundary has cuts, suppressed cuts and flashes around it."""
    rng = random.Random(seed)
    shots: list[Shot] = []
    while sum(shot.frames for shot in shots) < frames:
        length = rng.randint(4, 14)
        flashes = (length // 2,) if rng.random() < 0.2 else ()
        shots.append(Shot(length, seed * 100 + len(shots), pan=(rng.uniform(-3, 3), 0.5), flashes=flashes))
    return shots


def serial(video: Path) -> dict[str, object]:
    fps, frames, (cuts,) = scan_cuts(video, [DETECTOR])
    return {"fps": fps, "frames": frames, "cuts": [cut for cut in cuts if 0 < cut < frames]}


@pytest.fixture(scope="module")
def busy(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_footage(tmp_path_factory.mktemp("busy") / "busy.mp4", busy_shots(1, 260), fps=FPS)


def test_segments_stitched_give_the_serial_cuts_with_cuts_at_every_boundary(busy: Path) -> None:
    index = index_video(busy)
    segments = plan_segments(str(busy), index, 5)
    scans = [scan_segment(segment, DETECTOR) for segment in segments]

    assert len(segments) == 5 and segments[-1].own[1] == len(index.pts) == serial(busy)["frames"]
    assert [s.own[1] for s in segments[:-1]] == [s.own[0] for s in segments[1:]]  # every frame owned once
    candidates = sorted(c for scan in scans for c in scan.candidates)
    for segment in segments[1:]:  # a candidate within 8 frames either side of every boundary
        assert any(abs(c - segment.own[0]) <= 8 for c in candidates)
    assert stitch(DETECTOR, scans) == serial(busy)["cuts"]
    # What makes the stitching needed: candidates the 8-frame minimum suppresses, and ones the flash check drops.
    cuts = stitch(DETECTOR, scans)
    assert len(candidates) > len(cuts) and any(c not in scan.kept for scan in scans for c in scan.candidates)
    # Neighbours decode the frames both decode to the same pixels.
    for left, right in zip(scans, scans[1:], strict=False):
        shared = left.digests.keys() & right.digests.keys()
        assert shared and all(left.digests[i] == right.digests[i] for i in shared)


def test_a_segment_whose_frames_are_not_the_expected_ones_is_refused(busy: Path) -> None:
    index = index_video(busy)
    good = plan_segments(str(busy), index, 3)[1]
    middle = len(good.pts) // 2
    # A frame the demuxer saw that decoding does not give, then one it gives that the demuxer did not announce.
    skipped = Segment(good.video, good.number, good.own, good.first, good.pts[:middle] + good.pts[middle + 1:],
                      good.last)
    extra = Segment(good.video, good.number, good.own, good.first,
                    good.pts[:middle] + (good.pts[middle] + 1,) + good.pts[middle:-1], good.last)

    for wrong in (skipped, extra):
        with pytest.raises(Misaligned, match=f"frame {good.first + middle} has pts"):
            scan_segment(wrong, DETECTOR)
    assert scan_segment(good, DETECTOR).candidates


def test_a_split_that_cannot_be_trusted_is_scanned_whole(busy: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    index = index_video(busy)
    first, good, last = plan_segments(str(busy), index, 3)
    middle = len(good.pts) // 2
    # Decoding does not give the frames announced (Misaligned), or it does but each is labelled with its
    # neighbour's index, which only the frames both neighbours decode can show.
    skipped = replace(good, pts=good.pts[:middle] + good.pts[middle + 1:])
    shifted = replace(good, pts=index.pts[good.first + 1:][:len(good.pts)])
    scanned: list[Path] = []
    real = detect.scan_cuts

    def counted(video: Path, specs: list[DetectorSpec], threads: int = 0) -> tuple[float, int, list[list[int]]]:
        scanned.append(video)
        return real(video, specs, threads=threads)

    monkeypatch.setattr(detect, "scan_cuts", counted)  # threads, not processes: the whole scan is seen here
    for wrong in (skipped, shifted, good):
        scanned.clear()
        with ThreadPoolExecutor(2) as pool:
            found = parallel._run(pool, [parallel._Video(busy, [first, wrong, last])], DETECTOR, None)
        assert found == {str(busy): serial(busy)}
        assert scanned == ([] if wrong is good else [busy])


def test_the_pool_gives_the_serial_cuts_for_several_videos_one_split_and_a_broken_one(
        busy: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    short = write_footage(tmp_path / "short.mp4", [Shot(30, 1), Shot(25, 2), Shot(40, 3)], fps=FPS)
    graded = write_footage(tmp_path / "graded.mp4", [Shot(40, 5), Shot(40, 5, grade=120.0, continues=True)], fps=FPS)
    broken = tmp_path / "broken.mp4"
    broken.write_bytes(b"not a video at all")
    done: list[str] = []
    split: list[int] = []

    def spied(video: str, index: VideoIndex, count: int) -> list[Segment]:
        split.append(len(planned := plan_segments(video, index, count)))
        return planned

    monkeypatch.setattr(parallel, "plan_segments", spied)  # planned in this process, scanned in the workers

    found = scan_many([short, busy, broken, graded], DETECTOR, workers=2, segment_frames=60, pool_from=0,
                      on_done=lambda video, _: done.append(video.name))

    assert list(found) == [str(short), str(busy), str(broken), str(graded)]
    for video in (short, busy, graded):
        assert found[str(video)] == serial(video)
    with pytest.raises(BadMedia) as serially:
        scan_cuts(broken, [DETECTOR])
    assert found[str(broken)] == {"error": serially.value.reason}
    assert sorted(done) == sorted(video.name for video in (short, busy, broken, graded))
    assert split == [5, 2, 2]  # segments of about 60 frames, the longest video first


def test_a_worker_that_fails_is_that_videos_error_not_a_traceback(tmp_path: Path) -> None:
    videos = [write_footage(tmp_path / f"{n}.mp4", [Shot(20, n)], fps=FPS) for n in (1, 2)]

    found = scan_many(videos, DetectorSpec("no-such-kind", 1.0), workers=2, pool_from=0)

    for video in videos:
        assert found[str(video)] == {"error": "could not be looked at (the scan's worker failed: ValueError: "
                                              "unknown detector kind 'no-such-kind')"}


@pytest.mark.parametrize(("cores", "pool_from"), [({3}, 0), ({0, 1}, parallel.POOL_FROM_FRAMES)],
                         ids=["one-usable-core", "too-little-to-repay-a-pool"])
def test_one_usable_core_or_little_work_scans_in_this_process(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                              cores: set[int], pool_from: int) -> None:
    videos = [write_footage(tmp_path / f"{n}.mp4", [Shot(16, n)], fps=FPS) for n in (1, 2)]
    monkeypatch.setattr("os.sched_getaffinity", lambda _: cores)  # what a container or taskset gives
    scanned: list[Path] = []
    real = detect.scan_cuts

    def counted(video: Path, specs: list[DetectorSpec], threads: int = 0) -> tuple[float, int, list[list[int]]]:
        scanned.append(video)
        return real(video, specs, threads=threads)

    monkeypatch.setattr(detect, "scan_cuts", counted)  # seen only by a scan in this process

    found = scan_many(videos, DETECTOR, pool_from=pool_from)

    assert scanned == videos and all(found[str(v)]["frames"] == 16 for v in videos)
