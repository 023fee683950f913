"""What preprocessing needs to know about a media file without a video decoder.

Owns ``probe_media``: frame count, fps, size and whether there is an audio track. Three sources,
in order: the synthetic header the demo and tests write (first line
``LTXREF-MEDIA frames=F fps=R width=W height=H audio=0|1``, any bytes after it), images
(``.png/.jpg/.jpeg``: one frame; PNG size from its header), and ``ffprobe`` when it is installed.
"""

from __future__ import annotations

import json
import shutil
import struct
import subprocess
from dataclasses import dataclass
from pathlib import Path

__all__ = ["MediaInfo", "probe_media", "synthetic_media_header"]

MAGIC = b"LTXREF-MEDIA"
IMAGE_SUFFIXES = {".png", ".jpg", ".jpeg"}


@dataclass(frozen=True)
class MediaInfo:
    """Frames, frame rate, pixel size and audio presence of one media file."""

    frames: int
    fps: float
    width: int
    height: int
    has_audio: bool


def synthetic_media_header(frames: int, fps: float, width: int, height: int, audio: bool) -> bytes:
    """The first line of a synthetic media file that ``probe_media`` understands."""
    return f"LTXREF-MEDIA frames={frames} fps={fps} width={width} height={height} audio={int(audio)}\n".encode()


def _from_header(line: bytes) -> MediaInfo:
    fields = dict(part.split("=", 1) for part in line.decode().split()[1:])
    return MediaInfo(int(fields["frames"]), float(fields["fps"]), int(fields["width"]), int(fields["height"]),
                     fields.get("audio", "0") == "1")


def _ffprobe(path: Path) -> MediaInfo:
    exe = shutil.which("ffprobe")
    if exe is None:
        raise ValueError(f"cannot read {path}: not a synthetic media file and ffprobe is not installed")
    result = subprocess.run(  # noqa: S603 - fixed argv, no shell
        [exe, "-v", "error", "-count_packets", "-show_entries",
         "stream=codec_type,nb_read_packets,r_frame_rate,width,height", "-of", "json", str(path)],
        capture_output=True, text=True, timeout=60, check=False)
    if result.returncode != 0:
        raise ValueError(f"ffprobe could not read {path}: {result.stderr.strip()[:200]}")
    streams = json.loads(result.stdout).get("streams", [])
    video = next((s for s in streams if s.get("codec_type") == "video"), None)
    if video is None:
        raise ValueError(f"{path} has no video stream")
    num, _, den = video.get("r_frame_rate", "24/1").partition("/")
    fps = float(num) / float(den or 1)
    return MediaInfo(int(video.get("nb_read_packets", 0)), fps, int(video["width"]), int(video["height"]),
                     any(s.get("codec_type") == "audio" for s in streams))


def probe_media(path: Path) -> MediaInfo:
    """Read the facts preprocessing needs about ``path``.

    Raises:
        ValueError: the file cannot be understood.
    """
    with open(path, "rb") as handle:
        head = handle.read(256)
    if head.startswith(MAGIC):
        return _from_header(head.split(b"\n", 1)[0])
    if path.suffix.lower() in IMAGE_SUFFIXES:
        width = height = 0
        if head.startswith(b"\x89PNG") and len(head) >= 24:
            width, height = struct.unpack(">II", head[16:24])
        return MediaInfo(1, 1.0, width or 512, height or 512, False)
    return _ffprobe(path)
