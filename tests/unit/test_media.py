"""The media layer reads real files made with PyAV and names the file in every refusal."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

av = pytest.importorskip("av")

from ltx_pipeline.ltx.media import BadMedia, decode_video, read_media_info, write_video  # noqa: E402


def _clip(path: Path, frames: int, width: int, height: int, fps: float = 24, audio: bool = False,
          colour: tuple[int, int, int] | None = None) -> Path:
    rng = np.random.default_rng(frames * width)
    pixels = np.empty((frames, height, width, 3), np.uint8)
    for index in range(frames):
        pixels[index] = colour if colour else rng.integers(0, 255, 3)
        pixels[index, :, (index * 2) % width] = 255  # a moving bar
    sound = np.sin(np.linspace(0, 200, int(16000 * frames / fps))).astype(np.float32) * 0.3 if audio else None
    write_video(path, pixels, fps, audio=sound)
    return path


def test_an_mp4_reports_its_frames_rate_size_and_audio(tmp_path: Path) -> None:
    info = read_media_info(_clip(tmp_path / "a.mp4", 30, 96, 64, fps=30, audio=True))
    assert (info.kind, info.frames, info.frames_source) == ("video", 30, "container")
    assert (info.width, info.height, info.fps) == (96, 64, 30.0)
    assert info.duration_s == pytest.approx(1.0)
    assert info.has_audio and info.audio_sample_rate == 16000


def test_a_silent_clip_has_no_audio(tmp_path: Path) -> None:
    info = read_media_info(_clip(tmp_path / "b.mp4", 9, 64, 64, fps=24))
    assert not info.has_audio and info.audio_sample_rate is None and info.fps == 24.0


def test_a_truncated_clip_is_bad_media_naming_the_file(tmp_path: Path) -> None:
    path = _clip(tmp_path / "cut.mp4", 48, 64, 64)
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(BadMedia) as caught:
        read_media_info(path)
    assert caught.value.path == str(path) and "cut.mp4" in str(caught.value)


@pytest.mark.parametrize("content", [b"", b"not a video at all" * 20])
def test_empty_or_garbage_files_are_bad_media(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "x.mp4"
    path.write_bytes(content)
    with pytest.raises(BadMedia, match="x.mp4"):
        read_media_info(path)


def test_a_missing_file_is_bad_media(tmp_path: Path) -> None:
    with pytest.raises(BadMedia, match="no such file"):
        read_media_info(tmp_path / "gone.mp4")


def test_images_are_one_frame_and_a_broken_image_is_bad_media(tmp_path: Path) -> None:
    from PIL import Image

    Image.new("RGB", (40, 30), (10, 200, 30)).save(tmp_path / "i.png")
    info = read_media_info(tmp_path / "i.png")
    assert (info.kind, info.frames, info.width, info.height) == ("image", 1, 40, 30)
    (tmp_path / "bad.jpg").write_bytes(b"\xff\xd8\xff garbage")
    with pytest.raises(BadMedia, match="bad.jpg"):
        read_media_info(tmp_path / "bad.jpg")


def test_decode_resizes_covering_then_crops_the_centre(tmp_path: Path) -> None:
    # A 128x64 clip, left half red and right half blue, decoded to 64x64: the crop keeps the centre,
    # so both colours remain, split at the middle column.
    pixels = np.zeros((9, 64, 128, 3), np.uint8)
    pixels[:, :, :64] = (255, 0, 0)
    pixels[:, :, 64:] = (0, 0, 255)
    write_video(tmp_path / "wide.mp4", pixels, 24)
    frames = decode_video(tmp_path / "wide.mp4", 9, 64, 64)
    assert frames.shape == (9, 64, 64, 3) and frames.dtype == np.uint8
    assert frames[0, 32, 5, 0] > 200 and frames[0, 32, 58, 2] > 200


def test_decode_refuses_a_clip_shorter_than_asked(tmp_path: Path) -> None:
    with pytest.raises(BadMedia, match="has 9 frame"):
        decode_video(_clip(tmp_path / "short.mp4", 9, 64, 64), 17, 64, 64)


def test_written_clips_read_back_with_their_frames_and_size(tmp_path: Path) -> None:
    path = _clip(tmp_path / "w.mp4", 17, 64, 32, colour=(200, 30, 30))
    with av.open(str(path)) as container:
        decoded = [frame.to_ndarray(format="rgb24") for frame in container.decode(video=0)]
    assert len(decoded) == 17 and decoded[0].shape == (32, 64, 3)
    assert abs(int(decoded[5][16, 40, 0]) - 200) < 20
    assert not list(tmp_path.glob(".*tmp*")), "no partial file is left behind"
