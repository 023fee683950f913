"""The ``offline`` captioner: an honest, deterministic description of what can be measured in a clip.

It is not a language model and says nothing it did not measure. A clip is read with PyAV (``ltx.media``) and
described by its duration, size, named colours, the direction the salient region moved and whether it has sound:
"A 2.0-second clip, 96x64: a red shape on a dark grey background moving left to right; with sound."
Measures: up to ``_SAMPLES`` evenly spaced frames, decoded in one streaming pass and scaled to at most
``_THUMB`` pixels on the long side (memory stays small for long 1080p clips). Colours are named from HSV with
fixed thresholds; the background is the most common name; the salient region is the pixels far from each frame's
median colour; its motion is the median step of its centroid between sampled frames (robust to a wrap-round).
Same file, same caption: everything is integer decoding and fixed arithmetic.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from ltx_pipeline.captioning._captions_file import CaptionBook, strip_trigger
from ltx_pipeline.errors import BadDataset
from ltx_pipeline.ltx.media import BadMedia, MediaInfo, decode_audio, read_media_info

__all__ = ["OFFLINE_VERSION", "OfflineCaptioner", "describe_clip"]

#: Bumped whenever a caption's wording or measures change, so the prepare phase's fingerprint changes with it.
OFFLINE_VERSION = 2
_SAMPLES = 9
_THUMB = 64
_SALIENT_DISTANCE = 48.0  # RGB distance from the frame's median colour that makes a pixel stand out
_STILL = 0.05  # centroid shift, as a fraction of the frame, below which a region is still
_AUDIBLE_RMS = 0.003
_AUDIO_SECONDS = 30.0
_GREYS = ((0.15, "black"), (0.40, "dark grey"), (0.70, "grey"), (0.88, "light grey"), (1.01, "white"))
_HUES = ((15, "red"), (45, "orange"), (70, "yellow"), (160, "green"), (200, "cyan"), (260, "blue"), (290, "purple"),
         (340, "pink"), (361, "red"))
NAMES: tuple[str, ...] = tuple(dict.fromkeys([name for _, name in _GREYS] + [name for _, name in _HUES] + ["brown"]))
Pixels = npt.NDArray[np.uint8]


class OfflineCaptioner:
    """Captions clips by measurement; see the module docstring for what it measures and why."""

    name: str = "offline"

    def __init__(self, trigger: str | None = None, *, sound: bool = True) -> None:
        """``sound=False`` for a run that trains video only: its captions say nothing of the clips' sound, since
        the model it trains never hears it (and evaluation renders reuse the captions as prompts)."""
        self.trigger = trigger.strip() if trigger and trigger.strip() else None
        self.sound = sound

    def settings(self) -> dict[str, Any]:
        """What identifies its captions: the captioner, its wording version, the trigger kept out of them, and
        ``sound: False`` when the sound clause is left out (absent otherwise, so earlier runs keep their
        fingerprints)."""
        settings: dict[str, Any] = {"captioner": self.name, "version": OFFLINE_VERSION, "trigger": self.trigger}
        if not self.sound:
            settings["sound"] = False
        return settings

    def caption(self, clips: list[Path], captions_file: Path, *, workspace: Path,
                on_progress: Callable[[int, int], None] | None = None) -> dict[str, str]:
        """Caption the clips without a caption in ``captions_file``, saving after each one.

        ``on_progress(done, total)`` follows the clips captioned by this call. Returns every clip's caption by
        its ``media_path``.

        Raises:
            BadInput: a clip lies outside the captions file's folder.
            BadDataset: a clip cannot be decoded (the captions made before it are kept), or the file is not JSON.
        """
        book = CaptionBook.load(captions_file)
        keys = {clip: book.key(clip) for clip in clips}
        pending = list({str(clip.resolve()): clip for clip in clips if book.get(clip) is None}.values())
        if book.strip_trigger(clips, self.trigger):
            book.save(workspace)
        for done, clip in enumerate(pending, start=1):
            try:
                text = describe_clip(clip, sound=self.sound)
            except BadMedia as exc:
                raise BadDataset(f"Cannot caption {clip}: {exc.reason}", where=str(clip),
                                 fix="re-encode or remove the clip; the captions made so far are kept") from None
            book.set(clip, strip_trigger(text, self.trigger), keys[clip])
            book.save(workspace)
            if on_progress is not None:
                on_progress(done, len(pending))
        return {keys[clip]: book.get(clip) or "" for clip in clips}


def describe_clip(path: Path, *, sound: bool = True) -> str:
    """One sentence of measured facts about a video, image or audio file; a video's sound clause only with
    ``sound``.

    Raises:
        BadMedia: the file cannot be read.
    """
    info = read_media_info(path)
    if info.kind == "audio":
        return f"{_seconds(info.duration_s)} audio recording with no picture; {_sound(path, info)}."
    if info.kind == "image":
        return f"A still image, {info.width}x{info.height}: {_scene(_image_thumb(path))}."
    frames = _sample_frames(path, info)
    heard = f"; {_sound(path, info)}" if sound else ""
    return f"{_seconds(info.duration_s)} clip, {info.width}x{info.height}: {_scene(frames)}{heard}."


def _thumb_size(width: int, height: int) -> tuple[int, int]:
    scale = min(1.0, _THUMB / max(width, height, 1))
    return max(2, round(width * scale)), max(2, round(height * scale))


def _sample_frames(path: Path, info: MediaInfo) -> Pixels:
    """Evenly spaced frames (the first and the last included), scaled down, ``[S, h, w, 3]``."""
    import av

    count = max(1, info.frames)
    wanted = {round(i * (count - 1) / (_SAMPLES - 1)) for i in range(_SAMPLES)}
    width, height = _thumb_size(info.width, info.height)
    kept: list[Pixels] = []
    last: Any = None
    try:
        with av.open(str(path)) as container:
            for index, frame in enumerate(container.decode(container.streams.video[0])):
                last = frame
                if index in wanted:
                    kept.append(_rgb(frame, width, height))
                    last = None
    except (av.FFmpegError, OSError) as exc:
        raise BadMedia(path, f"does not decode ({exc})") from None
    if last is not None:  # it decoded to another count than stated: its real last frame still closes the sample
        kept.append(_rgb(last, width, height))
    if not kept:
        raise BadMedia(path, "has no frames")
    return np.stack(kept).astype(np.uint8)


def _rgb(frame: Any, width: int, height: int) -> Pixels:
    return np.asarray(frame.reformat(width=width, height=height, format="rgb24").to_ndarray(), dtype=np.uint8)


def _image_thumb(path: Path) -> Pixels:
    from PIL import Image

    with Image.open(path) as image:
        picture = image.convert("RGB")
        picture = picture.resize(_thumb_size(picture.width, picture.height), Image.Resampling.BILINEAR)
        return np.asarray(picture, dtype=np.uint8)[None]


def colour_names(pixels: Pixels) -> npt.NDArray[np.int64]:
    """The index in ``NAMES`` of each ``[..., 3]`` RGB pixel: greys by value, others by hue (dark orange: brown)."""
    rgb = pixels.reshape(-1, 3).astype(np.float64) / 255.0
    high, low = rgb.max(axis=1), rgb.min(axis=1)
    spread = high - low
    saturation = np.where(high > 0, spread / np.where(high > 0, high, 1.0), 0.0)
    red, green, blue = rgb[:, 0], rgb[:, 1], rgb[:, 2]
    safe = np.where(spread > 0, spread, 1.0)
    hue = np.select([high == red, high == green], [((green - blue) / safe) % 6.0, (blue - red) / safe + 2.0],
                    (red - green) / safe + 4.0) * 60.0
    names = np.empty(len(rgb), dtype=np.int64)
    grey = (saturation < 0.25) | (high < 0.15)
    names[grey] = _bin(high[grey], _GREYS)
    names[~grey] = _bin(hue[~grey], _HUES)
    brown = ~grey & (hue >= 15) & (hue < 45) & (high < 0.6)
    names[brown] = NAMES.index("brown")
    return names.reshape(pixels.shape[:-1])


def _bin(values: npt.NDArray[np.float64], edges: tuple[tuple[float, str], ...]) -> npt.NDArray[np.int64]:
    limits = np.array([edge for edge, _ in edges])
    lookup = np.array([NAMES.index(name) for _, name in edges])
    return np.asarray(lookup[np.searchsorted(limits, values, side="right").clip(0, len(edges) - 1)], dtype=np.int64)


def _most_common(names: npt.NDArray[np.int64]) -> tuple[str, float]:
    counts = np.bincount(names.reshape(-1), minlength=len(NAMES))
    best = int(counts.argmax())  # ties go to the earlier name: fixed
    return NAMES[best], float(counts[best]) / max(1, int(counts.sum()))


def _scene(frames: Pixels) -> str:
    """``a red shape on a dark grey background moving left to right``, or the colours of a plain picture."""
    names = colour_names(frames)
    background, _ = _most_common(names)
    medians = np.median(frames.reshape(len(frames), -1, 3), axis=1)
    distance = np.linalg.norm(frames.astype(np.float64) - medians[:, None, None, :], axis=-1)
    salient = distance > _SALIENT_DISTANCE
    if not salient.any():
        rest = np.bincount(names.reshape(-1), minlength=len(NAMES))
        others = [NAMES[i] for i in np.argsort(-rest, kind="stable") if NAMES[i] != background
                  and rest[i] >= 0.1 * names.size]
        return f"a plain {background} picture" + (f" with some {' and '.join(others[:2])}" if others else "")
    shape, _ = _most_common(names[salient])
    if len(frames) == 1:
        return f"{_a(shape)} shape on {_a(background)} background"
    return f"{_a(shape)} shape on {_a(background)} background {_motion(salient)}"


def _seconds(duration: float) -> str:
    """"A 2.0-second", "An 8.0-second", "An 11.0-second": the article as the number is spoken."""
    text = f"{duration:.1f}"
    whole = text.split(".")[0]
    return f"{'An' if whole.startswith('8') or whole in ('11', '18') else 'A'} {text}-second"


def _a(word: str) -> str:
    return f"{'an' if word[0] in 'aeiou' else 'a'} {word}"


def _motion(salient: npt.NDArray[np.bool_]) -> str:
    """Where the salient region went: the median step of its centroid between consecutive sampled frames, times
    the steps. The median, not last minus first, so a region that wraps round (or flickers once) keeps its way."""
    centres = [np.argwhere(mask).mean(axis=0) / mask.shape if mask.any() else None for mask in salient]
    steps = [later - earlier for earlier, later in zip(centres, centres[1:], strict=False)
             if earlier is not None and later is not None]
    if not steps:
        return "appearing and disappearing"
    dy, dx = np.median(np.stack(steps), axis=0) * len(steps)
    if max(abs(dx), abs(dy)) < _STILL:
        return "staying still"
    if abs(dx) >= abs(dy):
        return "moving left to right" if dx > 0 else "moving right to left"
    return "moving downwards" if dy > 0 else "moving upwards"


def _sound(path: Path, info: MediaInfo) -> str:
    """``with sound``, ``with a silent sound track`` or ``silent``: a track holding only silence is not sound."""
    if not info.has_audio:
        return "silent"
    samples = decode_audio(path, 16000, min(info.duration_s or _AUDIO_SECONDS, _AUDIO_SECONDS))
    rms = float(np.sqrt(np.mean(np.square(samples, dtype=np.float64)))) if samples.size else 0.0
    return "with sound" if rms >= _AUDIBLE_RMS else "with a silent sound track"
