"""Validation samples carry the sound the toy generated: the audio VAE's inverse, and the files it goes into.

As the trainer's validation: generated audio is muxed into the sample mp4 as an AAC track, a run that
generates no audio writes a video-only mp4, and ``generate_video: false`` writes the sound alone as a wav.
"""

from __future__ import annotations

import wave

import numpy as np
import pytest
import torch
from conftest import train_in_process

from ltx_pipeline.reference_trainer.vae import AUDIO_RATE, decode_audio, encode_audio

AV_STRATEGY = {"name": "flexible",
               "video": {"is_generated": True, "latents_dir": "latents"},
               "audio": {"is_generated": True, "latents_dir": "audio_latents"}}
STEPS = 50  # two seconds of latents
SECONDS = np.arange(AUDIO_RATE * 2) / AUDIO_RATE


def _standardised(seed: int) -> torch.Tensor:
    z = torch.randn(8, STEPS, 16, generator=torch.Generator().manual_seed(seed))
    return (z - z.mean()) / z.std(unbiased=False)


@pytest.mark.parametrize("name, latents", [
    ("a 440 Hz tone", lambda: encode_audio((0.2 * np.sin(2 * np.pi * 440 * SECONDS)).astype(np.float32), STEPS)),
    ("a chord", lambda: encode_audio((0.2 * np.sin(2 * np.pi * 440 * SECONDS)
                                      + 0.2 * np.sin(2 * np.pi * 660 * SECONDS)).astype(np.float32), STEPS)),
    ("noise", lambda: encode_audio(np.random.default_rng(0).normal(0, 0.1, SECONDS.size).astype(np.float32), STEPS)),
    ("random latents", lambda: _standardised(1)),
])
def test_decoded_audio_encodes_back_to_its_latents(name, latents):
    z = latents()
    sound = decode_audio(z)
    assert sound.dtype == np.float32 and sound.shape == (STEPS * AUDIO_RATE // 25,)
    back = encode_audio(sound, STEPS)
    error = (back - z).abs().mean().item()
    correlation = np.corrcoef(back.flatten(), z.flatten())[0, 1]
    # Measured: mean error 0.016-0.044, correlation 0.98-0.998. Noise or silence in place of the decode
    # gives a correlation near 0.
    assert error < 0.07 and correlation > 0.97, (name, error, correlation)
    loudest = np.sqrt((sound.reshape(STEPS, -1).astype(np.float64) ** 2).mean(axis=1)).max()
    assert 0.1 < loudest < 0.2, loudest  # audible, and far from clipping


def test_decoding_is_deterministic_and_silence_stays_silent():
    z = _standardised(2)
    assert np.array_equal(decode_audio(z), decode_audio(z.clone()))
    silence = encode_audio(np.zeros(AUDIO_RATE, dtype=np.float32), 25)
    assert not decode_audio(silence).any()


def _audio_tracks(path):  # noqa: ANN001, ANN202
    """(audio stream count, the first one's decoded frames as ``[channels, samples]`` float32) of a media file."""
    import av

    with av.open(str(path)) as container:
        if not container.streams.audio:
            return 0, None
        frames = [frame.to_ndarray() for frame in container.decode(container.streams.audio[0])]
        return len(container.streams.audio), np.concatenate(frames, axis=1).astype(np.float32)


def _sample_of_a_run(project, capsys, monkeypatch, generate_audio: bool):  # noqa: ANN001, ANN202
    """Train one step with audio and validate once; returns the sample's path."""
    out = project.root / f"audio-{generate_audio}"
    config = project.config(f"audio-{generate_audio}.yaml", output_dir=str(out), training_strategy=AV_STRATEGY,
                            optimization={"steps": 1},
                            validation={"interval": 1, "skip_initial_validation": True,
                                        "generate_audio": generate_audio})
    code, log = train_in_process(config, capsys, monkeypatch=monkeypatch)
    assert code == 0, log
    return out / "samples" / "step_000001_1.mp4"


def test_a_sample_mp4_has_an_audio_track_iff_validation_generates_audio(project, capsys, monkeypatch):
    from ltx_pipeline.ltx.media import read_media_info

    silent = _sample_of_a_run(project, capsys, monkeypatch, generate_audio=False)
    info = read_media_info(silent)
    assert (info.kind, info.frames, info.has_audio) == ("video", 9, False)
    assert _audio_tracks(silent) == (0, None)

    sample = _sample_of_a_run(project, capsys, monkeypatch, generate_audio=True)
    info = read_media_info(sample)
    assert (info.kind, info.frames, info.has_audio, info.audio_sample_rate) == ("video", 9, True, AUDIO_RATE)
    streams, samples = _audio_tracks(sample)
    assert streams == 1 and samples is not None and samples.shape[0] == 2  # stereo, as the trainer's save_video
    assert np.abs(samples).max() > 0.05  # a sound, not a silent track
    # The track lasts as long as the video (9 frames at 24 fps), give or take AAC's padding.
    assert abs(samples.shape[1] / AUDIO_RATE - 9 / 24) < 0.1


def test_an_audio_only_validation_writes_a_wav_as_the_trainer_does(project, capsys, monkeypatch):
    out = project.root / "wav"
    config = project.config("wav.yaml", output_dir=str(out), training_strategy=AV_STRATEGY,
                            optimization={"steps": 1},
                            validation={"interval": 1, "skip_initial_validation": True, "generate_video": False})
    code, log = train_in_process(config, capsys, monkeypatch=monkeypatch)
    assert code == 0, log
    assert sorted(p.name for p in (out / "samples").iterdir()) == ["step_000001_1.wav"]
    with wave.open(str(out / "samples" / "step_000001_1.wav")) as sound:
        assert (sound.getframerate(), sound.getsampwidth(), sound.getnchannels()) == (AUDIO_RATE, 2, 2)
        pcm = np.frombuffer(sound.readframes(sound.getnframes()), dtype="<i2")
    assert pcm.size == 2 * round(9 / 24 * 25) * AUDIO_RATE // 25  # 9 frames at 24 fps: 9 latent steps of 40 ms
    assert np.abs(pcm).max() > 1000
