"""Write the validation samples' derived media into the run and build the trainer's ``validation.samples``.

A ``first_frame`` condition gets the clip's first decoded frame as a PNG, an audio condition its
file's (or clip's) sound as a 16-bit stereo WAV at the track's own rate; both under ``<run>/validation/``,
written atomically, named by sample and condition. Everything else is the row's own file, as it is
(a prefix or suffix is cut by the trainer itself from ``num_frames``: its suffix encoding needs the
whole clip). Prompts are the rows' captions with the trigger in front.
"""

from __future__ import annotations

import io
import wave
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ltx_pipeline.errors import BadDataset
from ltx_pipeline.ltx.condition_geometry import Geometry, fit_validation_condition
from ltx_pipeline.ltx.media import BadMedia
from ltx_pipeline.ltx.validation_sources import ConditionSource, ValidationSources, prompt_for
from ltx_pipeline.workspace import atomic_write

__all__ = ["MaterializedSamples", "materialize_samples"]


@dataclass(frozen=True)
class MaterializedSamples:
    """The trainer's validation samples and, per sample, where each medium came from (for the record)."""

    samples: list[dict[str, Any]]
    written: list[str]  # the derived files written into the run


def materialize_samples(sources: ValidationSources, template: Sequence[Mapping[str, Any]],
                        captions: Mapping[str, str | None], *, smallest: Geometry, template_geometry: Geometry,
                        trained: Sequence[dict[str, Any]] = (), trigger: str | None, out_dir: Path,
                        workspace: Path) -> MaterializedSamples:
    """The template's samples with every condition filled from its chosen row.

    Args:
        sources: the choice (``ltx.validation_sources.choose_sources``) over the prepared dataset's rows.
        template: the template's ``validation.samples``.
        captions: source -> caption of its row.
        smallest: the run's smallest bucket; template_geometry: the template's validation dims
            (``ltx.condition_geometry`` fits prefix/suffix lengths and crop regions from one to the other).
        trained: the run's fitted ``training_strategy.video.conditions`` (a validation prefix matches them).
        trigger: the LoRA trigger word (put in front of each caption), or None.
        out_dir: ``<run>/validation``, where derived media go.
        workspace: writes must stay inside it.

    Raises:
        BadDataset: a chosen row has no caption, or its clip gives no frame / no sound track.
    """
    by_sample = {s.sample: s for s in sources.samples}
    samples: list[dict[str, Any]] = []
    written: list[str] = []
    for index, shape in enumerate(template):
        chosen = by_sample.get(index)
        sample = {k: v for k, v in shape.items() if k != "conditions"}
        conditions = [fit_validation_condition(dict(c), smallest, template_geometry, trained)
                      for c in shape.get("conditions") or []]
        if sources.dropped:
            conditions = [c for c in conditions if c.get("type") not in sources.dropped]
        if chosen is not None:
            caption = captions.get(chosen.source)
            if not caption:
                raise BadDataset(f"The row chosen for validation sample {index + 1} has no caption",
                                 where=chosen.source, fix="caption that row (or remove it) and resume")
            sample["prompt"] = prompt_for(caption, trigger)
            for condition in chosen.conditions:
                value = _medium(condition, out_dir, workspace)
                if value != condition.file:
                    written.append(value)
                conditions[condition.condition][condition.field] = value
        if conditions:
            sample["conditions"] = conditions
        else:
            sample.pop("conditions", None)
        samples.append(sample)
    return MaterializedSamples(samples, written)


def _medium(condition: ConditionSource, out_dir: Path, workspace: Path) -> str:
    source = Path(condition.file)
    stem = f"sample-{condition.sample + 1}-{condition.type}-{condition.field}"
    try:
        if condition.derive == "first_frame_png":
            target = out_dir / f"{stem}.png"
            atomic_write(target, _first_frame_png(source), root=workspace)
            return str(target)
        if condition.derive == "sound_wav":
            target = out_dir / f"{stem}.wav"
            atomic_write(target, _sound_wav(source), root=workspace)
            return str(target)
    except BadMedia as exc:
        raise BadDataset(f"Validation sample {condition.sample + 1} ({condition.type}): {exc}", where=str(source),
                         fix="choose another row (remove this one or give --validation-media without) and resume"
                         ) from None
    return str(source)


def _first_frame_png(path: Path) -> bytes:
    import av
    from PIL import Image

    try:
        with av.open(str(path)) as container:
            if not container.streams.video:
                raise BadMedia(path, "has no video stream to take a first frame from")
            for frame in container.decode(container.streams.video[0]):
                picture: Image.Image = frame.to_image()  # type: ignore[no-untyped-call]
                break
            else:
                raise BadMedia(path, "has no decodable frame")
    except (av.FFmpegError, OSError) as exc:
        raise BadMedia(path, f"does not decode ({str(exc).splitlines()[0][:160]})") from None
    buffer = io.BytesIO()
    picture.convert("RGB").save(buffer, format="PNG")
    return buffer.getvalue()


def _sound_wav(path: Path) -> bytes:
    """The first audio stream, whole, as 16-bit stereo PCM WAV at its own rate (mono is doubled)."""
    import av

    chunks: list[np.ndarray[Any, Any]] = []
    try:
        with av.open(str(path)) as container:
            if not container.streams.audio:
                raise BadMedia(path, "has no sound track")
            stream = container.streams.audio[0]
            rate = int(stream.rate or stream.codec_context.sample_rate)
            channels = 2  # the trainer's audio VAE takes stereo (see ltx.validation_sources)
            resampler = av.AudioResampler(format="s16", layout="stereo", rate=rate)
            for frame in container.decode(stream):
                for pcm in resampler.resample(frame):
                    chunks.append(pcm.to_ndarray().reshape(-1))
            for pcm in resampler.resample(None):
                chunks.append(pcm.to_ndarray().reshape(-1))
    except (av.FFmpegError, OSError) as exc:
        raise BadMedia(path, f"sound does not decode ({str(exc).splitlines()[0][:160]})") from None
    if not chunks:
        raise BadMedia(path, "has an empty sound track")
    buffer = io.BytesIO()
    with wave.open(buffer, "wb") as out:
        out.setnchannels(channels)
        out.setsampwidth(2)
        out.setframerate(rate)
        out.writeframes(np.concatenate(chunks).astype("<i2").tobytes())
    return buffer.getvalue()
