"""One swscale context for every frame of a scan gives the pixels a new context per frame gave (what the scan did
before #46), at the detection size, for a frame wider than it and one that is not scaled."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

av = pytest.importorskip("av")

from ltx_pipeline.scenes.detect import _detection_size, _scaler  # noqa: E402
from ltx_pipeline.scenes.footage import Shot, write_footage  # noqa: E402


@pytest.mark.parametrize(("width", "height"), [(320, 180), (128, 96)], ids=["scaled-to-256", "kept"])
def test_one_scaler_gives_the_pixels_of_one_per_frame(tmp_path: Path, width: int, height: int) -> None:
    video = write_footage(tmp_path / "two.mp4", [Shot(6, 1), Shot(6, 2, grade=90.0)], width=width, height=height)
    with av.open(str(video)) as container:
        frames = list(container.decode(container.streams.video[0]))
    size = _detection_size(width, height)
    scale = _scaler(*size)

    shared = [scale(frame) for frame in frames]

    assert shared[0].shape == (size[1], size[0], 3) and len(frames) == 12
    for frame, picture in zip(frames, shared, strict=True):
        assert np.array_equal(picture, frame.to_ndarray(width=size[0], height=size[1], format="bgr24"))
