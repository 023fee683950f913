"""Validation: a real denoising pass of the toy model per sample, decoded and written as an mp4.

Owns sample generation at ``validation.video_dims`` mapped to the latent grid the way LTX-2's VAE
maps it (W/32, H/32, (F-1)/8+1), Euler steps of the flow from sigma 1 to 0 over
``inference_steps``, classifier-free guidance against ``negative_prompt`` when
``video_cfg_scale != 1`` (a second, sequential forward, as the trainer runs its guidance passes),
audio tokens when audio is generated, and the file ``samples/step_{step:06d}_{k}.mp4``
(k = sample index + 1): the latents decoded by the toy VAE to W x H pixels and F frames, H.264 at
``validation.frame_rate``, which any video player opens. As the trainer's ``save_video``, generated
audio goes into that mp4 as a stereo AAC track (the audio latents decoded by ``vae.decode_audio`` at
16 kHz), and with ``validation.generate_video: false`` the sample is that sound alone,
``step_{step:06d}_{k}.wav`` (16-bit PCM), as the trainer writes for audio-only modes. The toy always
denoises video (its audio branch attends to it); without audio to write, the mp4 stays as it was.
"""

from __future__ import annotations

import io
import wave
from pathlib import Path

import numpy as np
import numpy.typing as npt
import torch

from ltx_pipeline.ltx.media import write_video
from ltx_pipeline.reference_trainer.data import encode_caption
from ltx_pipeline.reference_trainer.flow import video_coords
from ltx_pipeline.reference_trainer.model import AUDIO_BINS, AUDIO_CHANNELS, LATENT_CHANNELS
from ltx_pipeline.reference_trainer.vae import AUDIO_RATE, decode, decode_audio
from ltx_pipeline.workspace import atomic_write

__all__ = ["generate_samples", "latent_grid"]

AUDIO_TOKENS_PER_SECOND = 25


def latent_grid(width: int, height: int, frames: int) -> tuple[int, int, int]:
    """(F', H', W') for pixel dims, at least one token per axis."""
    return max(1, (frames - 1) // 8 + 1), max(1, height // 32), max(1, width // 32)


@torch.no_grad()
def _denoise(model: torch.nn.Module, config, arch, sample, generate_audio: bool,  # noqa: ANN001
             device: torch.device, salt: str) -> tuple[torch.Tensor, tuple[int, int, int], torch.Tensor | None]:
    validation = config.validation
    width, height, frames = sample.video_dims or validation.video_dims
    grid = latent_grid(width, height, frames)
    generator = torch.Generator().manual_seed(sample.seed or validation.seed)
    tokens = grid[0] * grid[1] * grid[2]
    video = torch.randn(1, tokens, LATENT_CHANNELS, generator=generator).to(device)
    coords = video_coords(*grid, device=device)
    audio = None
    if generate_audio:
        steps_t = max(1, round(frames / validation.frame_rate * AUDIO_TOKENS_PER_SECOND))
        audio = torch.randn(1, steps_t, AUDIO_CHANNELS * AUDIO_BINS, generator=generator).to(device)
    prompts = [encode_caption(sample.prompt, arch.text_len, arch.text_dim, salt)]
    if validation.video_cfg_scale != 1.0:
        prompts.append(encode_caption(validation.negative_prompt, arch.text_len, arch.text_dim, salt))
    sigmas = torch.linspace(1.0, 0.0, validation.inference_steps + 1)
    for i in range(validation.inference_steps):
        sigma, step = sigmas[i].item(), (sigmas[i + 1] - sigmas[i]).item()
        outputs = []
        for text, mask in prompts:
            v_sigma = torch.full((1, tokens), sigma, device=device)
            a_sigma = None if audio is None else torch.full((1, audio.shape[1]), sigma, device=device)
            outputs.append(model(video, v_sigma, coords, text[None].to(device), mask[None].to(device),
                                 audio, a_sigma))
        velocity, audio_velocity = outputs[0]
        if len(outputs) == 2:
            velocity = outputs[1][0] + validation.video_cfg_scale * (velocity - outputs[1][0])
        video = video + step * velocity.float()
        if audio is not None:
            audio = audio + step * audio_velocity.float()
    return video, grid, audio


def _sound(audio: torch.Tensor) -> npt.NDArray[np.float32]:
    """Denoised audio tokens ``[1, T, 128]`` -> ``[2, samples]`` float32 at ``AUDIO_RATE`` (stereo, as the trainer)."""
    latents = audio[0].float().cpu().reshape(audio.shape[1], AUDIO_CHANNELS, AUDIO_BINS).permute(1, 0, 2)
    mono = decode_audio(latents)
    return np.stack([mono, mono])


def _write_wav(path: Path, sound: npt.NDArray[np.float32]) -> None:
    """``[channels, samples]`` in [-1, 1] as 16-bit PCM, as the trainer's ``_save_audio``."""
    buffer = io.BytesIO()
    with wave.open(buffer, "wb") as out:
        out.setnchannels(sound.shape[0])
        out.setsampwidth(2)
        out.setframerate(AUDIO_RATE)
        out.writeframes((np.clip(sound.T, -1.0, 1.0) * 32767).astype("<i2").tobytes())
    atomic_write(path, buffer.getvalue())


def generate_samples(model: torch.nn.Module, config, arch, step: int, output_dir: Path,  # noqa: ANN001
                     generate_audio: bool, device: torch.device, salt: str) -> list[Path]:
    """Denoise every validation sample and write its mp4 (with its sound) or, sound only, its wav; returns the paths."""
    was_training = model.training
    model.eval()
    written = []
    try:
        validation = config.validation
        for index, sample in enumerate(validation.samples):
            latents, grid, audio = _denoise(model, config, arch, sample, generate_audio, device, salt)
            sound = None if audio is None else _sound(audio)
            path = output_dir / "samples" / f"step_{step:06d}_{index + 1}.mp4"
            path.parent.mkdir(parents=True, exist_ok=True)
            if sound is not None and not validation.generate_video:
                path = path.with_suffix(".wav")
                _write_wav(path, sound)
            else:
                frames = (sample.video_dims or validation.video_dims)[2]
                grid_latents = latents[0].float().cpu().reshape(*grid, LATENT_CHANNELS).permute(3, 0, 1, 2)
                write_video(path, decode(grid_latents, frames), float(validation.frame_rate), sound, AUDIO_RATE)
            written.append(path)
    finally:
        model.train(was_training)
    return written
