"""The smoke test's data and validation sample, without the trainer: every mode, conditions from its own rows.

The templates here are the shipped ones' shapes (their numbers sized for 960x544x89); the real templates and
the trainer itself are ``tests/real_trainer/test_smoke.py``'s.
"""

from __future__ import annotations

import json
import wave
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml

from ltx_pipeline.ltx.config_patch import Patch
from ltx_pipeline.ltx.modes import MODES
from ltx_pipeline.ltx.sample_clips import write_clip
from ltx_pipeline.smoke import SMOKE_MODES, SmokeFailed
from ltx_pipeline.smoke.data import align_reference_audio, write_data
from ltx_pipeline.smoke.samples import check_sample, condition_patches, sample_suffix

BUCKET = (64, 64, 25)
EXTEND = {"training_strategy": {"name": "flexible", "video": {"is_generated": True, "latents_dir": "latents",
                                                              "conditions": [{"type": "prefix", "temporal_boundary": 8,
                                                                              "probability": 1.0}]}},
          "validation": {"video_dims": [960, 544, 89], "samples": [
              {"prompt": "placeholder one", "conditions": [{"type": "prefix", "video": "/path/to/prefix_video_1.mp4",
                                                            "num_frames": 57}]},
              {"prompt": "placeholder two", "conditions": [{"type": "prefix", "video": "/path/to/prefix_video_2.mp4",
                                                            "num_frames": 57}]}]}}
A2A = {"training_strategy": {"name": "flexible", "audio": {"is_generated": True, "latents_dir": "audio_latents"}},
       "validation": {"video_dims": [960, 544, 89], "samples": [
           {"prompt": "placeholder",
            "conditions": [{"type": "reference", "audio": "/path/to/reference_audio_1.wav"}]}]}}


def _template(tmp_path: Path, values: dict[str, Any]) -> Path:
    path = tmp_path / "template.yaml"
    path.write_text(yaml.safe_dump(values))
    return path


def _by_path(patches: list[Patch]) -> dict[str, object]:
    return {patch.path: patch.value for patch in patches}


def test_every_mode_is_a_smoke_mode() -> None:
    assert SMOKE_MODES == tuple(MODES)


def test_a_prefix_is_fitted_to_the_bucket_in_training_and_validation_and_filled_from_a_row(tmp_path: Path) -> None:
    metadata = tmp_path / "data" / "dataset.json"
    write_data(MODES["video-extend"], metadata, rows=2, frames=48, size=64)
    patches, words = condition_patches(_template(tmp_path, EXTEND), metadata, MODES["video-extend"], BUCKET,
                                       tmp_path / "validation", tmp_path)
    values = _by_path(patches)
    assert values["training_strategy.video.conditions"] == [{"type": "prefix", "temporal_boundary": 3,
                                                             "probability": 1.0}]
    row = json.loads(metadata.read_text())[0]
    assert values["validation.samples"] == [{"prompt": row["caption"], "conditions": [
        {"type": "prefix", "video": str(metadata.parent / row["video"]), "num_frames": 17}]}]  # one sample: 17 of 25
    assert "prefix.num_frames 57 -> 17 (fitted to 64x64x25)" in words
    assert "prefix temporal_boundary 3" in words


def test_an_audio_reference_is_written_as_a_stereo_wav_into_the_scratch(tmp_path: Path) -> None:
    metadata = tmp_path / "data" / "dataset.json"
    write_data(MODES["a2a"], metadata, rows=2, frames=48, size=64)
    patches, words = condition_patches(_template(tmp_path, A2A), metadata, MODES["a2a"], BUCKET,
                                       tmp_path / "validation", tmp_path)
    sample = _by_path(patches)["validation.samples"][0]  # type: ignore[index]
    medium = Path(sample["conditions"][0]["audio"])
    assert medium.parent == tmp_path / "validation" and "/path/to" not in json.dumps(sample)
    with wave.open(str(medium)) as audio:  # the trainer's audio VAE takes 2 channels; the rows' WAVs are mono
        assert audio.getnchannels() == 2 and audio.getnframes() > 0
    assert "training_strategy.video.conditions" not in _by_path(patches)
    assert "reference.audio = tone-0.wav (its sound as a stereo WAV)" in words


def test_the_data_step_says_what_was_written(tmp_path: Path) -> None:
    words = write_data(MODES["av2av"], tmp_path / "dataset.json", rows=2, frames=48, size=64)
    assert words == ("dataset.json, 2 rows for av2av; video: 2 mp4 (64x64, 48 frames at 24 fps, with sound); "
                     "reference_video: 2 mp4 (64x64, 48 frames at 24 fps); reference_audio: 2 wav (2.0 s at 16000 Hz)")


def test_reference_audio_latents_are_linked_under_the_target_name_for_audio_only_data(tmp_path: Path) -> None:
    metadata = tmp_path / "dataset.json"
    metadata.write_text(json.dumps([{"caption": "c", "audio": "audio/chord-0.wav",
                                     "reference_audio": "references/tone-0.wav"}]))
    written = tmp_path / ".precomputed" / "reference_audio_latents" / "references" / "tone-0.pt"
    written.parent.mkdir(parents=True)
    written.write_bytes(b"latent")
    assert align_reference_audio(MODES["a2a"], metadata, tmp_path / ".precomputed") == 1
    assert (tmp_path / ".precomputed" / "reference_audio_latents" / "audio" / "chord-0.pt").read_bytes() == b"latent"
    assert written.is_file(), "what preprocessing wrote stays"
    assert align_reference_audio(MODES["a2a"], metadata, tmp_path / ".precomputed") == 0  # already there
    assert align_reference_audio(MODES["av2av"], metadata, tmp_path / ".precomputed") == 0  # named right already


@pytest.mark.parametrize(("mode", "suffix"), [("t2v", ".mp4"), ("v2a", ".mp4"), ("t2a", ".wav"), ("a2a", ".wav")])
def test_audio_only_modes_render_a_wav_and_every_other_mode_an_mp4(mode: str, suffix: str) -> None:
    assert sample_suffix(MODES[mode]) == suffix


def _wav(path: Path, samples: int, *, truncate: bool = False) -> Path:
    with wave.open(str(path), "wb") as out:
        out.setnchannels(2)
        out.setsampwidth(2)
        out.setframerate(24000)
        out.writeframes(np.zeros(samples * 2, dtype="<i2").tobytes())
    if truncate:
        path.write_bytes(path.read_bytes()[:-100])
    return path


def test_a_wav_sample_must_decode_whole(tmp_path: Path) -> None:
    assert check_sample(_wav(tmp_path / "ok.wav", 24000), MODES["t2a"]) == (
        "a 1.00 s WAV decodes: 24000 samples x 2 channel(s) at 24000 Hz")
    with pytest.raises(SmokeFailed, match="bytes of sound for a header of 24000 samples"):
        check_sample(_wav(tmp_path / "cut.wav", 24000, truncate=True), MODES["t2a"])
    junk = tmp_path / "junk.wav"
    junk.write_bytes(b"not a wav at all")
    with pytest.raises(SmokeFailed, match="does not decode as a WAV"):
        check_sample(junk, MODES["t2a"])


def test_an_mp4_sample_needs_sound_only_where_the_mode_generates_audio(tmp_path: Path) -> None:
    silent = write_clip(tmp_path / "silent.mp4", 9, 64, 64, audio=False)
    assert check_sample(silent, MODES["v2v"]) == "9 frames decode"
    with pytest.raises(SmokeFailed, match="no sound track although t2v generates audio"):
        check_sample(silent, MODES["t2v"])
    assert check_sample(write_clip(tmp_path / "loud.mp4", 9, 64, 64, audio=True), MODES["t2v"]) == (
        "9 frames decode, with sound")


def test_every_shipped_template_gets_every_condition_from_the_smoke_rows(tmp_path: Path) -> None:
    """No mode's smoke config keeps a template placeholder: each medium is a smoke file, or one derived from it."""
    from tests.real_trainer.environment import trainer_source

    source = trainer_source()
    if source is None:
        pytest.skip("../shared/ltx2-src is absent: the shipped templates cannot be read")
    configs = source / "packages" / "ltx-trainer" / "configs"
    for name, mode in MODES.items():
        scratch = tmp_path / name
        metadata = scratch / "data" / "dataset.json"
        write_data(mode, metadata, rows=2, frames=48, size=64)
        patches, _ = condition_patches(configs / mode.config, metadata, mode, BUCKET, scratch / "validation", scratch)
        samples = _by_path(patches)["validation.samples"]
        assert isinstance(samples, list) and len(samples) == 1, name
        media = [str(c[key]) for c in samples[0].get("conditions") or []
                 for key in ("image_or_video", "video", "audio", "mask") if key in c]
        assert all(Path(m).is_file() and Path(m).is_relative_to(scratch) for m in media), (name, media)
        assert bool(media) == (name not in ("t2v", "t2a")), (name, media)  # only those two validate on a prompt
