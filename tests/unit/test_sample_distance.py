"""The demo's learning figure, on real mp4 files: nearest-clip distance per step and pairwise render difference."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ltx_pipeline.evaluation.distance import (
    nearest_clip_distance,
    pairwise_difference,
    sample_progress,
    sample_progress_line,
)
from ltx_pipeline.ltx.media import write_video


def _solid(path: Path, rgb: tuple[int, int, int], frames: int = 9, size: tuple[int, int] = (64, 96)) -> Path:
    pictures = np.zeros((frames, *size, 3), dtype=np.uint8) + np.array(rgb, dtype=np.uint8)
    path.parent.mkdir(parents=True, exist_ok=True)
    write_video(path, pictures, 24.0)
    return path


def test_the_distance_is_to_the_nearest_clip_at_the_samples_size(tmp_path: Path) -> None:
    from ltx_pipeline.ltx.media import read_frames

    # a clip at another size and length is resampled to the sample's
    clips = [read_frames(_solid(tmp_path / "red.mp4", (200, 0, 0), frames=17, size=(128, 192))),
             read_frames(_solid(tmp_path / "blue.mp4", (0, 0, 200)))]
    assert nearest_clip_distance(_solid(tmp_path / "s.mp4", (190, 10, 10)), clips) < 15
    assert nearest_clip_distance(_solid(tmp_path / "g.mp4", (0, 200, 0)), clips) > 100


def test_progress_compares_the_first_and_last_step_and_says_so(tmp_path: Path) -> None:
    clip = _solid(tmp_path / "clips" / "red.mp4", (200, 0, 0))
    samples = tmp_path / "samples"
    for k, rgb in ((1, (0, 200, 200)), (2, (0, 150, 200))):
        _solid(samples / f"step_000000_{k}.mp4", rgb)
    _solid(samples / "step_000030_1.mp4", (100, 100, 100))
    for k in (1, 2):
        _solid(samples / f"step_000060_{k}.mp4", (180, 20, 20))
    progress = sample_progress(samples, [clip])
    assert progress is not None and (progress.first_step, progress.last_step) == (0, 60)
    assert progress.last < 0.2 * progress.first and progress.change < -0.8
    line = sample_progress_line(progress)
    assert line.startswith("samples vs nearest training clip") and "step 0 " in line and "step 60 " in line
    assert sample_progress(samples, []) is None  # no clips: no figure rather than a made-up one


def test_pairwise_difference_of_identical_and_different_renders(tmp_path: Path) -> None:
    same = [_solid(tmp_path / f"a{i}.mp4", (120, 60, 30)) for i in range(2)]
    assert pairwise_difference(same)[0] < 2
    smallest, mean = pairwise_difference([*same, _solid(tmp_path / "b.mp4", (20, 200, 220))])
    assert smallest < 2 and mean > 60


def test_the_demo_prints_the_figure_or_one_line_saying_why_not(tmp_path: Path) -> None:
    from ltx_pipeline.cli.demo import learning_lines

    clips = tmp_path / "videos"
    _solid(clips / "red.mp4", (200, 0, 0))
    _solid(tmp_path / "out" / "samples" / "step_000000_1.mp4", (0, 200, 200))
    _solid(tmp_path / "out" / "samples" / "step_000060_1.mp4", (190, 10, 10))
    for k, rgb in ((1, (200, 0, 0)), (2, (0, 0, 200))):
        _solid(tmp_path / "out" / "eval" / "in_distribution" / f"0{k}.mp4", rgb)
    lines = learning_lines(tmp_path / "out", clips)
    assert "step 0 " in lines[0] and "step 60 " in lines[0] and "eval renders of different prompts" in lines[1]
    (tmp_path / "out" / "samples" / "step_000060_1.mp4").write_bytes(b"not a video")
    assert [line.strip().split(":")[0] for line in learning_lines(tmp_path / "out", clips)] == ["No learning figure"]
