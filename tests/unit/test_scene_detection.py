"""Scene detection on real mp4s of textured, moving shots (``scenes.footage``): cuts found whatever the
video's length, colour-only cuts found, fast motion and flashes not cut, short scenes dropped by the bucket."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("av")
pytest.importorskip("scenedetect")

from ltx_pipeline.ltx.media import read_media_info  # noqa: E402
from ltx_pipeline.ltx.modes import get_mode  # noqa: E402
from ltx_pipeline.ltx.preparation import PreparationPlan, plan_preparation  # noqa: E402
from ltx_pipeline.probing import read_clips  # noqa: E402
from ltx_pipeline.scenes import DETECTOR, Scene, cut_scenes, detect_scenes, scan_videos  # noqa: E402
from ltx_pipeline.scenes.footage import Shot, true_cuts, write_footage  # noqa: E402

FPS = 24


def five_shots(seconds: float) -> list[Shot]:
    """Five different places in the same light (one palette: no colour jump gives the cuts away), each filmed
    by a panning camera with objects moving through it. With these places the detector of old (content 27,
    scenes of 1 s at least) finds 2 scenes of 5, as the issue's 40 s video did."""
    total = int(seconds * FPS)
    lengths = [total * share // 100 for share in (22, 17, 24, 15)]
    lengths.append(total - sum(lengths))
    pans = [(1.5, 0.4), (-2.5, 0.8), (3.0, -1.0), (-1.0, -0.5), (6.0, 1.0)]
    return [Shot(length, 7 + n, pan=pan, palette=7) for n, (length, pan) in enumerate(zip(lengths, pans,
                                                                                          strict=True))]


def plan_for(folder: Path, min_frames: int) -> PreparationPlan:
    """What the plan decides for a folder of videos, from the probe's facts and the scene scan."""
    videos = sorted(folder.glob("*.mp4"))
    facts = read_clips([(None, video) for video in videos]).facts
    return plan_preparation(dataset={"kind": "videos_folder", "path": str(folder)}, facts=facts,
                            mode=get_mode("t2v"), captioner="offline", holdout=None, holdout_file=None,
                            scans=scan_videos(videos), min_frames=min_frames, detector=DETECTOR.label)


@pytest.mark.parametrize("seconds", [9.0, 40.0], ids=["9s", "40s"])
def test_a_5_scene_video_of_any_length_gives_5_scenes(tmp_path: Path, seconds: float) -> None:
    shots = five_shots(seconds)
    folder = tmp_path / "footage"
    folder.mkdir()
    video = write_footage(folder / "five.mp4", shots, fps=FPS)

    plan = plan_for(folder, min_frames=25)

    assert plan.split_videos == (str(video),)
    (entry,) = plan.scenes or ()
    assert len(entry["scenes"]) == 5 and entry["dropped"] == []
    for (start, _), cut in zip(entry["scenes"][1:], true_cuts(shots), strict=True):
        assert abs(start - cut) <= 1
    assert "split 1 video(s) into scenes (5 clip(s))" in plan.summary()
    assert any("`five.mp4`: 5 scenes, 5 kept" in line for line in plan.scene_lines())
    # The prepare phase cuts at the plan's cuts: five clips, every frame of the video in one of them.
    scenes = [Scene(i, a, b, FPS) for i, (a, b) in enumerate(entry["scenes"], 1)]
    result = cut_scenes(video, scenes, tmp_path / "clips", min_frames=25)
    assert len(result.clips) == 5
    assert sum(read_media_info(clip.path).frames for clip in result.clips) == int(seconds * FPS)


def test_a_colour_only_cut_is_a_cut(tmp_path: Path) -> None:
    # The same place, the camera carrying on, graded another way (hue turned, brightness kept).
    shots = [Shot(60, 5, pan=(2.0, 0.5)), Shot(60, 5, grade=120.0, pan=(2.0, 0.5), continues=True)]
    video = write_footage(tmp_path / "graded.mp4", shots, fps=FPS)

    scenes = detect_scenes(video)

    assert [(scene.start_frame, scene.end_frame) for scene in scenes] in ([(0, 60), (60, 120)],
                                                                        [(0, 59), (59, 120)], [(0, 61), (61, 120)])


def test_fast_motion_and_flashes_without_a_cut_are_one_scene(tmp_path: Path) -> None:
    shots = [Shot(150, 9, pan=(11.0, 3.0), objects=3, object_speed=8.0, flashes=(40, 100))]
    video = write_footage(tmp_path / "whip.mp4", shots, fps=FPS)

    assert [(scene.start_frame, scene.end_frame) for scene in detect_scenes(video)] == [(0, 150)]


def test_a_short_shot_is_its_own_scene_and_dropped_by_the_bucket_not_merged(tmp_path: Path) -> None:
    # A 20-frame insert between two shots: the 1 s minimum of old merged it into the next shot's clip.
    shots = [Shot(60, 21, pan=(1.5, 0.3)), Shot(20, 22, pan=(-2.0, 0.5)), Shot(60, 23, pan=(1.0, -0.4))]
    folder = tmp_path / "footage"
    folder.mkdir()
    video = write_footage(folder / "insert.mp4", shots, fps=FPS)

    plan = plan_for(folder, min_frames=25)  # the smallest bucket has 25 frames: the insert cannot fill it

    (entry,) = plan.scenes or ()
    assert [[a, b] for a, b in entry["scenes"]] == [[0, 60], [80, 140]]
    assert entry["dropped"] == [[60, 80, "20 frames < 25 (the smallest bucket)"]]
    assert plan.split_videos == (str(video),) and plan.scene_clips == 2
    assert any("dropped: 2.5-3.3 s (20 frames < 25 (the smallest bucket))" in line for line in plan.scene_lines())
    # A bucket of 17 frames takes it: the minimum follows the bucket, not a fixed second.
    (shorter,) = plan_for(folder, min_frames=17).scenes or ()
    assert len(shorter["scenes"]) == 3 and shorter["dropped"] == []


def test_a_video_of_one_scene_is_staged_as_it_is(tmp_path: Path) -> None:
    folder = tmp_path / "footage"
    folder.mkdir()
    write_footage(folder / "one.mp4", [Shot(50, 3)], fps=FPS)

    plan = plan_for(folder, min_frames=25)

    assert plan.split_videos == () and plan.clips == 1 and plan.scanned == 1
    assert any("one scene each, staged as they are: `one.mp4`" in line for line in plan.scene_lines())


def test_an_older_plan_without_scenes_still_loads(tmp_path: Path) -> None:
    old = {"needed": True, "reason": "one video without captions", "source_kind": "video_file", "clips": 0,
           "long_videos": ["/data/long.mp4"], "to_caption": 0, "captions_kept": 0, "captioner": "offline",
           "holdout": "~10 %", "split_over_s": 30.0, "min_scene_s": 1.0}
    plan = PreparationPlan.from_dict(old)
    assert plan.split_videos == ("/data/long.mp4",) and plan.scenes is None
    assert plan.scene_lines() == ["- Scene split: 1 video(s), cuts found by the prepare phase"]


def test_an_object_jumping_across_a_still_picture_is_no_cut(tmp_path: Path) -> None:
    from ltx_pipeline.ltx.sample_clips import write_clip

    # The square wraps from the right edge to the left at frame 35: a large, sudden change of a ninth of the
    # picture, on a black background that otherwise does not move.
    video = write_clip(tmp_path / "jump.mp4", 49, 64, 64, colour="red", background="black", phase=2 / 7)

    assert [(scene.start_frame, scene.end_frame) for scene in detect_scenes(video)] == [(0, 49)]


def test_the_cuts_of_a_file_are_cached_until_it_changes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import os

    from ltx_pipeline.scenes import detect as scenes

    class Cache:
        def __init__(self) -> None:
            self.rows: dict[tuple[str, int, int], dict] = {}

        def cached_media_facts(self, keys: list[tuple[str, int, int]]) -> dict[str, dict]:
            return {key[0]: self.rows[key] for key in keys if key in self.rows}

        def remember_media_facts(self, rows: list[tuple[str, int, int, dict]]) -> None:
            self.rows.update({(path, size, mtime): facts for path, size, mtime, facts in rows})

    video = write_footage(tmp_path / "two.mp4", [Shot(30, 1), Shot(30, 2)], fps=FPS)
    cache = Cache()
    first = scan_videos([video], cache=cache)
    assert first[str(video)]["cuts"] == [30]

    def no_decode(*_: object, **__: object) -> None:
        raise AssertionError("decoded again")

    monkeypatch.setattr(scenes, "scan_cuts", no_decode)
    assert scan_videos([video], cache=cache) == first  # re-planning decodes nothing
    os.utime(video, ns=(1, 1))  # the file changed: its cuts are found again
    with pytest.raises(AssertionError, match="decoded again"):
        scan_videos([video], cache=cache)
