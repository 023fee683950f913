"""Media files as the trainer reads them: facts, decoded frames and written clips, on PyAV.

Owns ``read_media_info`` (frames, fps, size, duration, audio of a video, image or audio file),
``decode_video`` (the trainer's preprocessing geometry: resize keeping the aspect ratio, bicubic, then
centre crop, first F frames) and ``write_video`` (H.264 yuv420p mp4, written atomically).
PyAV ships FFmpeg inside its wheels, so nothing here needs a system binary. Images are read with PIL.

Invariant: every failure to understand a file is a ``BadMedia`` naming the file and the reason; no
other exception escapes for a file that exists.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Any, Literal

import numpy as np
import numpy.typing as npt

__all__ = [
    "AUDIO_SUFFIXES",
    "IMAGE_SUFFIXES",
    "BadMedia",
    "MediaInfo",
    "decode_audio",
    "decode_video",
    "read_frames",
    "read_media_info",
    "write_video",
]

IMAGE_SUFFIXES = frozenset({".png", ".jpg", ".jpeg", ".webp"})
AUDIO_SUFFIXES = frozenset({".wav", ".mp3", ".flac", ".ogg", ".m4a", ".aac"})

Frames = npt.NDArray[np.uint8]


class BadMedia(ValueError):
    """A media file that cannot be used, with the file and the reason."""

    def __init__(self, path: Path | str, reason: str) -> None:
        super().__init__(f"{path}: {reason}")
        self.path = str(path)
        self.reason = reason


@dataclass(frozen=True)
class MediaInfo:
    """What the trainer's preprocessing needs to know about one file.

    ``frames_source`` says how ``frames`` was obtained: ``"container"`` when the container states a
    count and its packet index agrees with it (exact for the mp4s encoders write), ``"decoded"`` when
    every frame was decoded and counted, ``"image"`` for a still image (one frame), ``"none"`` for audio.
    """

    kind: Literal["video", "image", "audio"]
    frames: int
    frames_source: Literal["container", "decoded", "image", "none"]
    fps: float
    width: int
    height: int
    duration_s: float
    has_audio: bool
    audio_sample_rate: int | None


def read_media_info(path: Path) -> MediaInfo:
    """Read ``path``'s facts; a file that cannot be read as media raises ``BadMedia``."""
    try:
        if not path.is_file():
            raise BadMedia(path, "no such file")
        size = path.stat().st_size
    except OSError as exc:  # e.g. a name longer than the file system allows
        raise BadMedia(path, f"cannot be opened: {exc.strerror or exc}") from exc
    if size == 0:
        raise BadMedia(path, "empty file")
    if path.suffix.lower() in IMAGE_SUFFIXES:
        return _image_info(path)
    import av

    try:
        container = av.open(str(path))
    except (av.FFmpegError, OSError, UnicodeDecodeError) as exc:
        raise BadMedia(path, f"unreadable ({_why(exc)})") from None
    with container:
        return _container_info(path, container)


def _image_info(path: Path) -> MediaInfo:
    from PIL import Image, UnidentifiedImageError

    try:
        with Image.open(path) as image:
            image.verify()  # reads the whole file: a truncated image fails here
            width, height = image.size
    except (UnidentifiedImageError, OSError, SyntaxError, ValueError) as exc:
        raise BadMedia(path, f"unreadable image ({_why(exc)})") from None
    return MediaInfo("image", 1, "image", 1.0, width, height, 0.0, False, None)


def _container_info(path: Path, container: Any) -> MediaInfo:
    import av

    audio = container.streams.audio[0] if container.streams.audio else None
    rate = int(audio.codec_context.sample_rate or audio.rate or 0) if audio is not None else None
    if not container.streams.video:
        if audio is None:
            raise BadMedia(path, "no video or audio stream")
        duration = float(container.duration / av.time_base) if container.duration else 0.0
        return MediaInfo("audio", 0, "none", 0.0, 0, 0, duration, True, rate)
    video = container.streams.video[0]
    fps = float(video.average_rate or video.guessed_rate or 0)
    width, height = int(video.codec_context.width), int(video.codec_context.height)
    try:
        packets = sum(1 for packet in container.demux(video) if packet.size)
    except (av.FFmpegError, OSError) as exc:
        raise BadMedia(path, f"truncated or corrupt ({_why(exc)})") from None
    stated = int(video.frames or 0)
    source: Literal["container", "decoded"]
    if stated and packets == stated:
        frames, source = stated, "container"
    elif stated and packets < stated:
        raise BadMedia(path, f"truncated: the container states {stated} frames, {packets} are present")
    else:
        frames, source = _decoded_frames(path, container, video), "decoded"
    if frames == 0:
        raise BadMedia(path, "the video stream has no frames")
    if not _first_frame_decodes(path, container, video):
        raise BadMedia(path, "the first frame does not decode")
    duration = frames / fps if fps else 0.0
    return MediaInfo("video", frames, source, fps, width, height, duration, audio is not None, rate)


def _decoded_frames(path: Path, container: Any, video: Any) -> int:
    import av

    container.seek(0)
    try:
        return sum(1 for _ in container.decode(video))
    except (av.FFmpegError, OSError) as exc:
        raise BadMedia(path, f"truncated or corrupt ({_why(exc)})") from None


def _first_frame_decodes(path: Path, container: Any, video: Any) -> bool:
    import av

    try:
        container.seek(0)
        return next(iter(container.decode(video)), None) is not None
    except (av.FFmpegError, OSError):
        return False


def decode_video(path: Path, frames: int, height: int, width: int) -> Frames:
    """The first ``frames`` frames of ``path`` at ``height`` x ``width``, as the trainer prepares them.

    Each frame is resized keeping its aspect ratio (bicubic) so that it covers the target, then
    centre-cropped. An image gives one frame. Returns ``[F, H, W, 3]`` uint8 RGB.

    Raises:
        BadMedia: the file does not decode, or holds fewer than ``frames`` frames.
    """
    from PIL import Image

    if path.suffix.lower() in IMAGE_SUFFIXES:
        _image_info(path)  # a broken image is BadMedia, not a PIL error
        with Image.open(path) as image:
            pictures = [image.convert("RGB")]
    else:
        pictures = [frame.to_image() for frame in _video_frames(path, frames)]
    if len(pictures) < frames:
        raise BadMedia(path, f"has {len(pictures)} frame(s), {frames} needed")
    return np.stack([_cover_and_crop(picture, height, width) for picture in pictures[:frames]])


def _video_frames(path: Path, limit: int | None) -> list[Any]:
    """The first ``limit`` (None: all) decoded frames of the first video stream, as PyAV frames.

    Raises:
        BadMedia: no video stream, or decoding fails part-way (a truncated file).
    """
    import av

    decoded: list[Any] = []
    try:
        with av.open(str(path)) as container:
            if not container.streams.video:
                raise BadMedia(path, "no video stream")
            for frame in container.decode(container.streams.video[0]):
                decoded.append(frame)
                if limit is not None and len(decoded) == limit:
                    break
    except (av.FFmpegError, OSError) as exc:
        raise BadMedia(path, f"does not decode ({_why(exc)})") from None
    return decoded


def read_frames(path: Path) -> Frames:
    """Every frame of a video at its own size, ``[F, H, W, 3]`` uint8 RGB; ``BadMedia`` if it does not decode."""
    pictures = [frame.to_ndarray(format="rgb24") for frame in _video_frames(path, None)]
    if not pictures:
        raise BadMedia(path, "has no frames")
    return np.stack(pictures).astype(np.uint8)


def decode_audio(path: Path, sample_rate: int, seconds: float) -> npt.NDArray[np.float32]:
    """The first ``seconds`` of ``path``'s first audio stream, mono float32 at ``sample_rate``.

    Shorter audio is returned as it is (the caller pads). Raises ``BadMedia`` when the file has no
    audio stream or it does not decode.
    """
    import av

    wanted = int(round(sample_rate * seconds))
    chunks: list[npt.NDArray[np.float32]] = []
    got = 0
    try:
        with av.open(str(path)) as container:
            if not container.streams.audio:
                raise BadMedia(path, "no audio stream")
            resampler = av.AudioResampler(format="flt", layout="mono", rate=sample_rate)
            for frame in container.decode(container.streams.audio[0]):
                for mono in resampler.resample(frame):
                    chunks.append(mono.to_ndarray().reshape(-1).astype(np.float32))
                    got += chunks[-1].size
                if got >= wanted:
                    break
    except (av.FFmpegError, OSError) as exc:
        raise BadMedia(path, f"audio does not decode ({_why(exc)})") from None
    samples = np.concatenate(chunks) if chunks else np.zeros(0, dtype=np.float32)
    return samples[:wanted]


def _cover_and_crop(picture: Any, height: int, width: int) -> Frames:
    from PIL import Image

    scale = max(width / picture.width, height / picture.height)
    resized = picture.resize((max(width, round(picture.width * scale)), max(height, round(picture.height * scale))),
                             Image.Resampling.BICUBIC)
    left, top = (resized.width - width) // 2, (resized.height - height) // 2
    cropped = resized.crop((left, top, left + width, top + height))
    return np.asarray(cropped, dtype=np.uint8)


def write_video(path: Path, frames: Frames, fps: float, audio: npt.NDArray[np.float32] | None = None,
                sample_rate: int = 16000) -> None:
    """Write ``[F, H, W, 3]`` uint8 frames as an H.264 (yuv420p, crf 18) mp4, atomically.

    ``audio`` (``[channels, samples]`` float32 in [-1, 1]) is muxed as AAC when given. Height and width
    must be even (yuv420p). The file appears under its name only once it is complete.
    """
    import av

    count, height, width, _ = frames.shape
    if height % 2 or width % 2:
        raise ValueError(f"H.264 yuv420p needs an even width and height, got {width}x{height}")
    partial = path.with_name(f".{path.name}.tmp.{os.getpid()}.mp4")
    try:
        with av.open(str(partial), "w") as container:
            stream = container.add_stream("libx264", rate=Fraction(fps).limit_denominator(1001))
            stream.width, stream.height, stream.pix_fmt = width, height, "yuv420p"
            stream.options = {"crf": "18"}
            sound = container.add_stream("aac", rate=sample_rate) if audio is not None else None
            for index in range(count):
                picture = av.VideoFrame.from_ndarray(np.ascontiguousarray(frames[index]), format="rgb24")
                container.mux(stream.encode(picture))
            container.mux(stream.encode(None))
            if sound is not None and audio is not None:
                _mux_audio(container, sound, audio, sample_rate)
        os.replace(partial, path)
    finally:
        partial.unlink(missing_ok=True)


def _mux_audio(container: Any, stream: Any, audio: npt.NDArray[np.float32], sample_rate: int) -> None:
    import av

    channels = audio.reshape(1, -1) if audio.ndim == 1 else audio
    layout = "mono" if channels.shape[0] == 1 else "stereo"
    chunk = 1024  # AAC's frame size
    for start in range(0, channels.shape[1], chunk):
        piece = np.ascontiguousarray(channels[:2, start:start + chunk], dtype=np.float32)
        frame = av.AudioFrame.from_ndarray(piece, format="fltp", layout=layout)
        frame.sample_rate = sample_rate
        container.mux(stream.encode(frame))
    container.mux(stream.encode(None))


def _why(exc: BaseException) -> str:
    text = str(exc).strip() or type(exc).__name__
    return text.splitlines()[0][:160]
