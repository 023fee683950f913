"""Validation: a real denoising pass of the toy model per sample, written as a small PNG strip.

Owns sample generation at ``validation.video_dims`` mapped to the latent grid the way LTX-2's VAE
maps it (W/32, H/32, (F-1)/8+1), Euler steps of the flow from sigma 1 to 0 over
``inference_steps``, classifier-free guidance against ``negative_prompt`` when
``video_cfg_scale != 1`` (a second, sequential forward, as the trainer runs its guidance passes),
audio tokens when audio is generated, and the file ``samples/step_{step:06d}_{k}.png``
(k = sample index + 1): latent channels 0-2 of each latent frame, side by side, scaled to 0-255.
"""

from __future__ import annotations

import struct
import zlib
from pathlib import Path

import torch

from ltx_pipeline.reference_trainer.data import encode_caption
from ltx_pipeline.reference_trainer.flow import video_coords
from ltx_pipeline.reference_trainer.model import AUDIO_BINS, AUDIO_CHANNELS, LATENT_CHANNELS
from ltx_pipeline.workspace import atomic_write

__all__ = ["generate_samples", "latent_grid", "png_bytes"]

AUDIO_TOKENS_PER_SECOND = 25


def latent_grid(width: int, height: int, frames: int) -> tuple[int, int, int]:
    """(F', H', W') for pixel dims, at least one token per axis."""
    return max(1, (frames - 1) // 8 + 1), max(1, height // 32), max(1, width // 32)


def png_bytes(image: torch.Tensor) -> bytes:
    """Encode an RGB uint8 image [H, W, 3] as PNG (zlib, no extra dependency)."""
    height, width, _ = image.shape
    rows = b"".join(b"\x00" + bytes(image[row].flatten().tolist()) for row in range(height))

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b"")


def _strip(latents: torch.Tensor, grid: tuple[int, int, int], zoom: int = 4) -> torch.Tensor:
    frames, height, width = grid
    rgb = latents[0, :, :3].float().reshape(frames, height, width, 3)
    low, high = rgb.min(), rgb.max()
    rgb = ((rgb - low) / (high - low + 1e-8) * 255).round().to(torch.uint8)
    strip = torch.cat(list(rgb), dim=1)  # frames side by side
    return strip.repeat_interleave(zoom, 0).repeat_interleave(zoom, 1)


@torch.no_grad()
def _denoise(model: torch.nn.Module, config, arch, sample, generate_audio: bool,  # noqa: ANN001
             device: torch.device, salt: str) -> tuple[torch.Tensor, tuple[int, int, int]]:
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
    return video, grid


def generate_samples(model: torch.nn.Module, config, arch, step: int, output_dir: Path,  # noqa: ANN001
                     generate_audio: bool, device: torch.device, salt: str) -> list[Path]:
    """Denoise every validation sample and write its PNG; returns the written paths."""
    was_training = model.training
    model.eval()
    written = []
    try:
        for index, sample in enumerate(config.validation.samples):
            latents, grid = _denoise(model, config, arch, sample, generate_audio, device, salt)
            path = output_dir / "samples" / f"step_{step:06d}_{index + 1}.png"
            written.append(atomic_write(path, png_bytes(_strip(latents.cpu(), grid))))
    finally:
        model.train(was_training)
    return written
