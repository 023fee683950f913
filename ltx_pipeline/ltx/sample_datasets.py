"""A small dataset for any mode (the smoke test, the real-trainer suite): real files of every column it reads.

Videos are the suite's H.264 clips (a moving square, a tone as AAC); audio files are 16-bit WAVs of a
chord whose pitch differs per row; a video mask is an mp4 of a white rectangle on black (the region to
inpaint); an audio mask is a WAV whose second half is loud (the part to inpaint); a reference is another
clip or tone of the same length. Captions describe what each file holds.
"""

from __future__ import annotations

import json
import wave
from pathlib import Path
from typing import Any

import numpy as np

from ltx_pipeline.ltx.media import write_video
from ltx_pipeline.ltx.modes import get_mode
from ltx_pipeline.ltx.sample_clips import COLOURS, write_clip

__all__ = ["write_mode_dataset"]

RATE = 16000


def _write_wav(path: Path, samples: np.ndarray[Any, Any]) -> str:
    path.parent.mkdir(parents=True, exist_ok=True)
    with wave.open(str(path), "wb") as out:
        out.setnchannels(1)
        out.setsampwidth(2)
        out.setframerate(RATE)
        out.writeframes((np.clip(samples, -1, 1) * 32767).astype("<i2").tobytes())
    return path.name


def _tone(seconds: float, pitch: float) -> np.ndarray[Any, Any]:
    t = np.arange(int(RATE * seconds), dtype=np.float32) / RATE
    return 0.2 * (np.sin(2 * np.pi * pitch * t) + np.sin(2 * np.pi * pitch * 1.5 * t))


def _mask_video(path: Path, frames: int, size: int) -> None:
    video = np.zeros((frames, size, size, 3), dtype=np.uint8)
    video[:, size // 4: 3 * size // 4, size // 4: 3 * size // 4] = 255
    write_video(path, video, 24.0)


def write_mode_dataset(folder: Path, mode: str, count: int = 4, frames: int = 48, size: int = 64) -> Path:
    """``folder/dataset.json`` with ``count`` rows holding every column ``mode`` needs; returns its path."""
    columns = get_mode(mode).columns
    colours = list(COLOURS)
    seconds = frames / 24.0
    rows = []
    for index in range(count):
        colour, background = colours[index % len(colours)], colours[(index + 3) % len(colours)]
        pitch = 220.0 * (1 + index / 4)
        row: dict[str, str] = {}
        if "video" in columns:
            name = f"clips/{colour}-on-{background}-{index}.mp4"
            write_clip(folder / name, frames, size, size, colour=colour, background=background, audio=True,
                       phase=index / count)
            row["video"] = name
            row["caption"] = f"a {colour} square slides across a {background} background, with a steady hum"
        else:
            row["audio"] = "audio/" + _write_wav(folder / "audio" / f"chord-{index}.wav", _tone(seconds, pitch))
            row["caption"] = f"a steady chord at {pitch:.0f} hertz"
        if "reference_video" in columns:
            name = f"references/{background}-on-{colour}-{index}.mp4"
            write_clip(folder / name, frames, size, size, colour=background, background=colour, audio=False,
                       phase=index / count)
            row["reference_video"] = name
        if "reference_audio" in columns:
            row["reference_audio"] = "references/" + _write_wav(folder / "references" / f"tone-{index}.wav",
                                                                _tone(seconds, pitch / 2))
        if "video_mask" in columns:
            name = f"masks/mask-{index}.mp4"
            (folder / "masks").mkdir(parents=True, exist_ok=True)
            _mask_video(folder / name, frames, size)
            row["video_mask"] = name
        if "audio_mask" in columns:
            loud = np.zeros(int(RATE * seconds), dtype=np.float32)
            loud[loud.size // 2:] = 0.9
            row["audio_mask"] = "masks/" + _write_wav(folder / "masks" / f"mask-{index}.wav", loud)
        rows.append(row)
    (folder / "dataset.json").write_text(json.dumps(rows, indent=2))
    return folder / "dataset.json"
