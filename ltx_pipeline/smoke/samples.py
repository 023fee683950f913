"""The smoke test's validation sample: its conditions filled from the smoke's own rows, and its render decoded.

The template's conditions are fitted as a run's are (``phases/config_patch``): the training boundary and
crop region to the bucket (``ltx.condition_geometry``), the first validation sample filled from the rows
(``ltx.validation_sources.choose_sources`` picks the row, ``validation_media.materialize_samples`` writes the
derived media: a first frame as PNG, every audio condition as a stereo WAV, since the trainer's validation
feeds the file as loaded to an audio VAE that takes 2 channels) and fitted to match the training. The
trainer writes what the sample holds: an mp4 when it has video (generated, or frozen as in v2a), a WAV
for the audio-only modes; ``check_sample`` decodes it.
"""

from __future__ import annotations

import wave
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ltx_pipeline.errors import BadDataset
from ltx_pipeline.ltx.condition_geometry import Geometry, fit_training_condition
from ltx_pipeline.ltx.config_patch import Patch
from ltx_pipeline.ltx.metadata import read_metadata_rows
from ltx_pipeline.ltx.modes import Mode
from ltx_pipeline.ltx.validation_sources import choose_sources
from ltx_pipeline.smoke.failure import SmokeFailed
from ltx_pipeline.validation_media import candidates_from_rows, materialize_samples, template_samples

__all__ = ["check_sample", "condition_patches", "sample_suffix"]

_DERIVED = {"as_is": "as it is", "first_frame_png": "its first frame as a PNG",
            "sound_wav": "its sound as a stereo WAV"}
_FITTED = ("num_frames", "spatial_region")


def sample_suffix(mode: Mode) -> str:
    """What the trainer saves a validation sample as: an mp4 when it has video, else (audio-only) a WAV."""
    return ".mp4" if mode.video_media else ".wav"


def condition_patches(template: Path, metadata: Path, mode: Mode, bucket: Sequence[int], out_dir: Path,
                      root: Path) -> tuple[list[Patch], str]:
    """The template's conditions fitted to the smoke's bucket, as a run's config is (``phases/config_patch``).

    The training conditions (prefix/suffix boundary, crop region) are fitted to ``bucket``; the template's
    first validation sample is filled from ``metadata``'s rows and fitted to the same geometry.

    Returns:
        The patches (the training conditions where they change, and ``validation.samples``: one sample)
        and what was done, in words.

    Raises:
        SmokeFailed: no row can give the sample's conditions, or a chosen medium does not decode.
    """
    from ltx_pipeline.yaml_io import load_yaml

    values = load_yaml(template.read_text(encoding="utf-8")) or {}
    shapes, template_dims = template_samples(template)
    shapes = shapes[:1]  # one render proves the plumbing; each more costs a denoising run
    smallest, template_geometry = Geometry.of(bucket), Geometry.of(template_dims)
    size = "x".join(str(d) for d in bucket)
    shipped = ((values.get("training_strategy") or {}).get("video") or {}).get("conditions") or []
    trained = [fit_training_condition(dict(c), smallest, template_geometry) for c in shipped]
    patches = []
    if trained != shipped:
        patches.append(Patch("training_strategy.video.conditions", trained,
                             f"smoke: the template's conditions fitted to the bucket {size}"))
    candidates = candidates_from_rows(read_metadata_rows(metadata), metadata.parent, {})
    chosen = choose_sources([list(s.get("conditions") or []) for s in shapes], candidates,
                            video_media=mode.video_media)
    if chosen.blocker:
        raise SmokeFailed("config", chosen.blocker, "report it: the smoke's own rows should give every condition")
    try:
        built = materialize_samples(chosen, shapes, {c.source: c.caption for c in candidates}, smallest=smallest,
                                    template_geometry=template_geometry, trained=trained, trigger=None,
                                    out_dir=out_dir, workspace=root)
    except BadDataset as exc:
        raise SmokeFailed("config", str(exc), "report it: the smoke's own media should decode") from None
    patches.append(Patch("validation.samples", built.samples,
                         "smoke: the template's first sample, filled from the smoke's rows"))
    words = _words(chosen.samples[0] if chosen.samples else None, built.samples[0] if built.samples else {},
                   shapes[0] if shapes else {}, size)
    fitted = [f"{c.get('type')} {k} {c[k]}" for c, o in zip(trained, shipped, strict=True)
              for k in ("temporal_boundary", "spatial_region") if k in c and c[k] != o.get(k)]
    return patches, words + (f"; trains with {', '.join(fitted)} (fitted to {size})" if fitted else "")


def _words(source: Any, sample: dict[str, Any], shape: dict[str, Any], size: str) -> str:
    if source is None:
        return "the template's own prompt (its sample names no media)"
    parts = [f"the prompt and media of row {source.row + 1}"]
    for condition in source.conditions:
        parts.append(f"{condition.type}.{condition.field} = {Path(condition.file).name} "
                     f"({_DERIVED[condition.derive]})")
    for fitted, original in zip(sample.get("conditions") or [], shape.get("conditions") or [], strict=False):
        for key in _FITTED:
            if key in original and fitted.get(key) != original[key]:
                parts.append(f"{fitted['type']}.{key} {original[key]} -> {fitted[key]} (fitted to {size})")
    return "; ".join(parts)


def check_sample(sample: Path, mode: Mode) -> str:
    """The sample decodes: every frame of an mp4 (with sound where the mode generates audio), or a WAV's samples.

    Returns:
        What decoded, in words.

    Raises:
        SmokeFailed: it does not decode, or a mode that generates audio left it without sound.
    """
    if sample.suffix == ".wav":
        return _check_wav(sample)
    from ltx_pipeline.ltx.media import BadMedia, read_frames, read_media_info

    try:
        info = read_media_info(sample)
        frames = len(read_frames(sample))
    except BadMedia as exc:
        raise SmokeFailed("train", f"the validation sample does not decode: {exc}",
                          "read the training log around the validation", None) from None
    if mode.generates_audio and not info.has_audio:
        raise SmokeFailed("train", f"the validation sample {sample} has no sound track although {mode.name} "
                          "generates audio", "read the training log around the validation", None)
    return f"{frames} frames decode{', with sound' if info.has_audio else ''}"


def _check_wav(sample: Path) -> str:
    try:
        with wave.open(str(sample), "rb") as audio:
            channels, width, rate, count = (audio.getnchannels(), audio.getsampwidth(), audio.getframerate(),
                                            audio.getnframes())
            data = audio.readframes(count)
    except (OSError, EOFError, wave.Error) as exc:
        raise SmokeFailed("train", f"the validation sample {sample} does not decode as a WAV: {exc}",
                          "read the training log around the validation", None) from None
    if count == 0 or len(data) != count * channels * width:
        raise SmokeFailed("train", f"the validation sample {sample} holds {len(data)} bytes of sound for a header "
                          f"of {count} samples", "read the training log around the validation", None)
    return f"a {count / rate:.2f} s WAV decodes: {count} samples x {channels} channel(s) at {rate} Hz"
