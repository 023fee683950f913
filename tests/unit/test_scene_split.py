"""Scene splitting on real mp4s made with PyAV: cuts found to the frame, clips cut once, short scenes named."""

from __future__ import annotations

import itertools
from pathlib import Path

import numpy as np
import pytest

av = pytest.importorskip("av")
pytest.importorskip("scenedetect")

from ltx_pipeline.errors import BadInput  # noqa: E402
from ltx_pipeline.ltx.media import BadMedia, read_media_info, write_video  # noqa: E402
from ltx_pipeline.scenes import Scene, cut_scenes, detect_scenes  # noqa: E402

FPS = 24
RATE = 8000  # low, so that AAC (the slow part) keeps the test quick
COLOURS = [(200, 30, 30), (30, 180, 40), (40, 50, 210), (230, 220, 40), (160, 40, 170), (30, 200, 200)]


def scene_video(path: Path, lengths: list[int], *, width: int = 64, height: int = 48, audio: bool = True) -> Path:
    """Write consecutive scenes of ``lengths`` frames, each its own colour with a white square moving inside it.

    A hard cut separates each scene from the next; the square's motion keeps a scene from being static.
    With ``audio``, a tone whose pitch changes per scene runs for the whole video.
    """
    frames = np.empty((sum(lengths), height, width, 3), np.uint8)
    index = 0
    for scene, length in enumerate(lengths):
        for local in range(length):
            frames[index] = COLOURS[scene % len(COLOURS)]
            x, y = (local * 2) % (width - 8), (local // 3) % (height - 8)
            frames[index, y:y + 8, x:x + 8] = 255
            index += 1
    sound = None
    if audio:
        pitches = np.repeat([220.0 * (1 + scene) for scene in range(len(lengths))], [n * RATE // FPS for n in lengths])
        sound = (0.3 * np.sin(2 * np.pi * np.cumsum(pitches) / RATE)).astype(np.float32)
    write_video(path, frames, FPS, audio=sound, sample_rate=RATE)
    return path


def _cuts(lengths: list[int]) -> list[int]:
    return list(itertools.accumulate(lengths))[:-1]


def test_five_scenes_are_found_within_a_frame_and_cut_into_five_clips(tmp_path: Path) -> None:
    lengths = [200, 170, 230, 150, 210]  # 960 frames: 40 s at 24 fps, four hard cuts
    video = scene_video(tmp_path / "long.mp4", lengths)

    scenes = detect_scenes(video)

    assert [scene.index for scene in scenes] == [1, 2, 3, 4, 5]
    assert scenes[0].start_frame == 0 and scenes[-1].end_frame == 960
    assert all(a.end_frame == b.start_frame for a, b in zip(scenes, scenes[1:], strict=False))
    for found, true in zip([scene.start_frame for scene in scenes[1:]], _cuts(lengths), strict=True):
        assert abs(found - true) <= 1
    assert scenes[1].fps == FPS and scenes[1].start_s == pytest.approx(200 / FPS, abs=1 / FPS)

    result = cut_scenes(video, scenes, tmp_path / "clips", min_frames=25)

    assert [clip.path.name for clip in result.clips] == [f"long-scene-00{n}.mp4" for n in range(1, 6)]
    assert result.dropped == ()
    for clip in result.clips:
        info = read_media_info(clip.path)
        assert info.frames == clip.scene.frames
        assert (info.width, info.height, info.fps) == (64, 48, FPS)
        assert info.has_audio and info.audio_sample_rate == RATE
        with av.open(str(clip.path)) as container:  # the scene's span of sound, not the whole track
            assert float(container.duration / av.time_base) == pytest.approx(clip.scene.seconds, abs=0.15)
    assert sorted(p.name for p in (tmp_path / "clips").iterdir()) == [c.path.name for c in result.clips]


def test_a_scene_shorter_than_a_bucket_is_dropped_with_its_reason(tmp_path: Path) -> None:
    video = scene_video(tmp_path / "flash.mp4", [60, 10, 60], audio=False)

    scenes = detect_scenes(video)
    assert [(scene.start_frame, scene.end_frame) for scene in scenes] == [(0, 60), (60, 70), (70, 130)]

    result = cut_scenes(video, scenes, tmp_path / "out", min_frames=25, stem="take")

    assert [clip.scene.index for clip in result.clips] == [1, 3]
    assert [clip.path.name for clip in result.clips] == ["take-scene-001.mp4", "take-scene-003.mp4"]
    assert [read_media_info(clip.path).frames for clip in result.clips] == [60, 60]
    assert not read_media_info(result.clips[0].path).has_audio
    assert result.dropped == ((scenes[1], "10 frames < 25 (bucket frames)"),)
    assert not (tmp_path / "out" / "take-scene-002.mp4").exists()


def test_cutting_twice_reuses_the_clips_and_a_file_not_ours_is_never_overwritten(tmp_path: Path) -> None:
    video = scene_video(tmp_path / "v.mp4", [40, 40])
    scenes = detect_scenes(video)
    first = cut_scenes(video, scenes, tmp_path / "out", min_frames=25)
    stamps = [clip.path.stat().st_mtime_ns for clip in first.clips]

    again = cut_scenes(video, scenes, tmp_path / "out", min_frames=25)

    assert again == first and [clip.path.stat().st_mtime_ns for clip in again.clips] == stamps
    # A different span under the same name is ours to rewrite...
    moved = [Scene(1, 0, 30, FPS), Scene(2, 30, 80, FPS)]
    rewritten = cut_scenes(video, moved, tmp_path / "out", min_frames=25)
    assert [read_media_info(clip.path).frames for clip in rewritten.clips] == [30, 50]
    # ...but a file we did not write is left alone.
    foreign = tmp_path / "mine"
    foreign.mkdir()
    (foreign / "v-scene-001.mp4").write_bytes(b"somebody's file")
    with pytest.raises(BadInput, match="not cut by ltx-pipeline"):
        cut_scenes(video, scenes, foreign, min_frames=25)
    assert (foreign / "v-scene-001.mp4").read_bytes() == b"somebody's file"
    assert [p.name for p in foreign.iterdir()] == ["v-scene-001.mp4"]


def test_an_unreadable_video_is_bad_media_naming_it(tmp_path: Path) -> None:
    broken = tmp_path / "broken.mp4"
    broken.write_bytes(b"not a video" * 50)
    with pytest.raises(BadMedia, match="broken.mp4"):
        detect_scenes(broken)
    with pytest.raises(BadMedia, match="broken.mp4"):
        cut_scenes(broken, [Scene(1, 0, 30, FPS)], tmp_path / "out", min_frames=1)
