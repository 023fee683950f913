"""Cut a video into one training clip per scene (prepare time, after approval): the heavy half of scene splitting.

``scenes/detect.py`` finds the cuts at plan time; this module re-encodes the scenes it found. Contract:

- ``cut_scenes`` decodes the source once, front to back, and streams every scene of at least ``min_frames`` frames
  into ``<stem>-scene-NNN.mp4``: H.264 yuv420p crf 18 as ``ltx.media.write_video`` writes, at the source's fps and
  size (an odd side loses one pixel), with the scene's span of the first audio track as AAC (mono, else stereo)
  when there is one. It streams rather than call ``write_video``, which holds a whole scene in memory (a minute
  of 1080p is about 9 GB of frames). Like the trainer's ``split_scenes.py`` it writes every scene long enough as
  its own clip, named by scene number; unlike it, with PyAV rather than an ffmpeg binary.
- Each clip appears atomically (temp name beside it, then ``os.replace``) and carries a tag in its mp4 ``comment``
  naming the source and the span. A rerun reuses a clip whose tag and frame count match, rewrites a clip tagged
  by us for another span, and refuses (``BadInput``) to overwrite a file it did not write.
- Shorter scenes are not written; they come back in ``SplitResult.dropped`` with the reason.
- A source that cannot be read raises ``ltx.media.BadMedia`` naming the file.
"""

from __future__ import annotations

import bisect
import contextlib
import json
import os
from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np

from ltx_pipeline.errors import BadInput
from ltx_pipeline.ltx.media import BadMedia, read_media_info
from ltx_pipeline.scenes.detect import Scene, video_info

__all__ = ["SplitClip", "SplitResult", "cut_scenes"]

_TAG = "ltx-pipeline scene "  # prefix of the mp4 comment that marks a clip as ours


@dataclass(frozen=True)
class SplitClip:
    """A clip written (or found already written) for ``scene``."""

    path: Path
    scene: Scene


@dataclass(frozen=True)
class SplitResult:
    """The clips in scene order, and the scenes left out with why, so the caller can narrate both."""

    clips: tuple[SplitClip, ...]
    dropped: tuple[tuple[Scene, str], ...]


def cut_scenes(video: Path, scenes: list[Scene], out_dir: Path, *, min_frames: int,
               stem: str | None = None) -> SplitResult:
    """Write each long-enough scene of ``video`` as its own mp4 in ``out_dir``, reusing clips already cut."""
    info = video_info(video)  # an unreadable source fails before anything is written
    stat = video.stat()
    kept = [scene for scene in scenes if scene.frames >= min_frames]
    dropped = tuple((scene, f"{scene.frames} frames < {min_frames} (bucket frames)")
                    for scene in scenes if scene.frames < min_frames)
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = {scene.index: out_dir / f"{stem or video.stem}-scene-{scene.index:03d}.mp4" for scene in kept}
    tags = {scene.index: _TAG + json.dumps({"source": video.name, "bytes": stat.st_size, "mtime_ns": stat.st_mtime_ns,
                                            "start_frame": scene.start_frame, "end_frame": scene.end_frame},
                                           sort_keys=True) for scene in kept}
    todo = [scene for scene in kept if not _reusable(paths[scene.index], tags[scene.index], scene)]
    if todo:
        _encode(video, sorted(todo, key=lambda scene: scene.start_frame), paths, tags, info.fps)
    return SplitResult(tuple(SplitClip(paths[scene.index], scene) for scene in kept), dropped)


def _reusable(path: Path, tag: str, scene: Scene) -> bool:
    """True when ``path`` is our clip of this very span; raises rather than touch a file that is not ours."""
    import av

    if not path.exists():
        return False
    try:
        with av.open(str(path)) as container:
            found = str(container.metadata.get("comment", ""))
        same = found == tag and read_media_info(path).frames == scene.frames
    except (av.FFmpegError, OSError, BadMedia):
        found, same = "", False
    if not found.startswith(_TAG):
        raise BadInput(f"{path.name} already exists and was not cut by ltx-pipeline", str(path),
                       "move it away, or cut into another folder or with another stem")
    return same


def _encode(video: Path, scenes: list[Scene], paths: dict[int, Path], tags: dict[int, str], fps: float) -> None:
    """One sequential decode of ``video``, each frame and audio sample routed to the clip of its scene."""
    import av

    starts = [scene.start_frame for scene in scenes]
    open_: dict[int, _ClipWriter] = {}
    done: set[int] = set()
    frame_index = 0
    try:
        with av.open(str(video)) as source:
            picture = source.streams.video[0]
            picture.thread_type = "AUTO"
            sound = source.streams.audio[0] if source.streams.audio else None
            rate = picture.average_rate or picture.guessed_rate or Fraction(fps)
            sample_rate = int(sound.codec_context.sample_rate or sound.rate) if sound is not None else 0
            layout = "mono" if sound is not None and sound.codec_context.channels == 1 else "stereo"
            resampler = av.AudioResampler(format="fltp", layout=layout, rate=sample_rate) if sound else None
            width, height = picture.codec_context.width // 2 * 2, picture.codec_context.height // 2 * 2

            def writer(scene: Scene) -> _ClipWriter:
                if scene.index not in open_:
                    open_[scene.index] = _ClipWriter(scene, paths[scene.index], tags[scene.index], Fraction(rate),
                                                     width, height, sample_rate, layout)
                return open_[scene.index]

            for frame in source.decode(*([picture] + ([sound] if sound is not None else []))):
                if isinstance(frame, av.VideoFrame):
                    slot = bisect.bisect_right(starts, frame_index) - 1
                    if slot >= 0 and frame_index < scenes[slot].end_frame:
                        writer(scenes[slot]).add_video(frame)
                    frame_index += 1
                elif isinstance(frame, av.AudioFrame) and resampler and frame.pts is not None and frame.time_base:
                    first = round(float(frame.pts * frame.time_base) * sample_rate)
                    for chunk in resampler.resample(frame):
                        samples = chunk.to_ndarray().astype(np.float32)
                        _route_audio(samples, first, sample_rate, scenes, starts, writer)
                        first += samples.shape[1]
                for index, clip in list(open_.items()):
                    if frame_index >= clip.scene.end_frame and (sound is None or clip.audio_done):
                        done.update([index] if clip.commit() else [])
                        del open_[index]
            for index, clip in list(open_.items()):  # the end of the file ends every scene still open
                done.update([index] if clip.commit() else [])
                del open_[index]
    except (av.FFmpegError, OSError) as exc:
        raise BadMedia(video, f"does not decode or encode ({str(exc).splitlines()[0][:160]})") from None
    finally:
        for clip in open_.values():
            clip.abort()
    missing = [scene for scene in scenes if scene.index not in done]
    if missing:
        raise BadMedia(video, f"has {frame_index} frames; scene {missing[0].index} ends at {missing[0].end_frame}")


def _route_audio(samples: Any, first: int, rate: int, scenes: list[Scene], starts: list[int],
                 writer: Callable[[Scene], _ClipWriter]) -> None:
    """Hand the samples ``[first, first + n)`` (source clock) to the scenes whose time span they overlap."""
    last = first + samples.shape[1]
    slot = max(0, bisect.bisect_right(starts, int(first / rate * scenes[0].fps)) - 1)
    for scene in scenes[slot:]:
        begin, end = round(scene.start_s * rate), round(scene.end_s * rate)
        if begin >= last:
            break
        lo, hi = max(first, begin), min(last, end)
        if lo < hi:
            writer(scene).add_audio(samples[:, lo - first:hi - first], lo - begin, hi >= end)


class _ClipWriter:
    """One clip being encoded into a temp file beside its final name; ``commit`` renames it into place."""

    def __init__(self, scene: Scene, path: Path, tag: str, rate: Fraction, width: int, height: int,
                 sample_rate: int, layout: str) -> None:
        import av

        self.scene, self.path, self.partial = scene, path, path.with_name(f".{path.name}.tmp.{os.getpid()}.mp4")
        self.container: Any = av.open(str(self.partial), "w")
        self.container.metadata["comment"] = tag
        self.video: Any = self.container.add_stream("libx264", rate=rate)
        self.video.width, self.video.height, self.video.pix_fmt = width, height, "yuv420p"
        self.video.options, self.frame_time = {"crf": "18"}, 1 / rate
        self.audio: Any = self.container.add_stream("aac", rate=sample_rate, layout=layout) if sample_rate else None
        self.sample_rate, self.layout, self.frames, self.audio_done = sample_rate, layout, 0, False

    def add_video(self, frame: Any) -> None:
        picture = frame.reformat(width=self.video.width, height=self.video.height, format="yuv420p")
        picture.pts, picture.time_base = self.frames, self.frame_time
        self.container.mux(self.video.encode(picture))
        self.frames += 1

    def add_audio(self, samples: Any, offset: int, last: bool) -> None:
        import av

        chunk = av.AudioFrame.from_ndarray(np.ascontiguousarray(samples), format="fltp", layout=self.layout)
        chunk.sample_rate, chunk.pts, chunk.time_base = self.sample_rate, offset, Fraction(1, self.sample_rate)
        self.container.mux(self.audio.encode(chunk))
        self.audio_done = self.audio_done or last

    def commit(self) -> bool:
        """Finish the file and move it into place; False (nothing written) if the video ended inside the scene."""
        self.container.mux(self.video.encode(None))
        if self.audio is not None:
            self.container.mux(self.audio.encode(None))
        self.container.close()
        if self.frames != self.scene.frames:
            self.partial.unlink(missing_ok=True)
            return False
        os.replace(self.partial, self.path)
        return True

    def abort(self) -> None:
        with contextlib.suppress(Exception):  # already failing: the temp file must go whatever close says
            self.container.close()
        self.partial.unlink(missing_ok=True)
