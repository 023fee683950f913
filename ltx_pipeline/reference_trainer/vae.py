"""The toy video VAE: pixels to latents of LTX-2's shape and back, with a fixed linear projection.

Owns ``encode`` (``[F, H, W, 3]`` uint8 frames -> ``[128, F', H/32, W/32]`` latents, F' = (F-1)/8+1,
the grid LTX-2's VAE produces) and ``decode`` (latents -> frames). It is NOT LTX-2's VAE: a latent
frame is the mean of its frames (the first alone, then groups of 8, as the causal VAE groups them),
each 32x32 patch is averaged to 4x4 RGB (48 values) and projected onto 128 channels by a fixed,
seeded matrix with orthonormal columns. Decoding is the exact transpose, so what a LoRA learns in
latent space comes back as the colours and coarse shapes of the user's frames. ``encode_audio`` is
the toy audio VAE: per latent step (25 a second) the log magnitude spectrum of the clip's own sound,
pooled to 128 bands and standardised, so a tone is a steady, learnable pattern.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
import torch

__all__ = ["AUDIO_RATE", "LATENT_CHANNELS", "decode", "encode", "encode_audio", "latent_basis"]

LATENT_CHANNELS = 128
PATCH = 32  # pixels per latent cell, each axis
CELL = 4  # a patch is pooled to CELL x CELL RGB values
TIME = 8  # frames per latent frame after the first
_SEED = 20250101
# Pixels in [-1, 1] give patch vectors whose entries have a variance near 1/3; the scale brings the
# latents to about unit variance, the scale of the flow's noise.
_SCALE = float(np.sqrt(3.0 * LATENT_CHANNELS / (3 * CELL * CELL)))


def _projection() -> torch.Tensor:
    """[128, 48] with orthonormal columns, the same on every machine (seeded QR)."""
    generator = torch.Generator().manual_seed(_SEED)
    matrix = torch.randn(LATENT_CHANNELS, 3 * CELL * CELL, generator=generator, dtype=torch.float64)
    q, _ = torch.linalg.qr(matrix)
    return q.float()


def latent_basis() -> torch.Tensor:
    """[128, 48] orthonormal columns whose span holds every latent ``encode`` writes."""
    return _projection()


def latent_frames(frames: int) -> int:
    return (frames - 1) // TIME + 1


def _time_groups(frames: int) -> list[slice]:
    later = [slice(1 + TIME * (t - 1), min(frames, 1 + TIME * t)) for t in range(1, latent_frames(frames))]
    return [slice(0, 1), *later]


def encode(pixels: npt.NDArray[np.uint8]) -> torch.Tensor:
    """``[F, H, W, 3]`` uint8 (H, W multiples of 32, F = 8k+1) -> ``[128, F', H/32, W/32]`` float32."""
    count, height, width, _ = pixels.shape
    video = torch.from_numpy(np.ascontiguousarray(pixels)).float().div(127.5).sub(1.0)  # [F, H, W, 3]
    grouped = torch.stack([video[group].mean(dim=0) for group in _time_groups(count)])  # [F', H, W, 3]
    cells = torch.nn.functional.avg_pool2d(grouped.permute(0, 3, 1, 2), PATCH // CELL)  # [F', 3, H/8, W/8]
    t, c, h, w = cells.shape
    patches = cells.reshape(t, c, h // CELL, CELL, w // CELL, CELL).permute(0, 2, 4, 1, 3, 5)
    vectors = patches.reshape(t, h // CELL, w // CELL, c * CELL * CELL)  # [F', H', W', 48]
    latents = vectors @ _projection().T * _SCALE  # [F', H', W', 128]
    return latents.permute(3, 0, 1, 2).contiguous()


def decode(latents: torch.Tensor, frames: int) -> npt.NDArray[np.uint8]:
    """``[128, F', H', W']`` -> ``[frames, 32 H', 32 W', 3]`` uint8 (each latent frame repeated over its group).

    In numpy and PIL, off the torch allocator: the reference trainer's measured peaks are its
    transformer's, as the memory model of the tiers was calibrated.
    """
    from PIL import Image

    _, t, h, w = latents.shape
    projection = _projection().numpy()
    vectors = latents.detach().float().cpu().numpy().transpose(1, 2, 3, 0) @ projection / _SCALE  # [F', H', W', 48]
    cells = vectors.reshape(t, h, w, 3, CELL, CELL).transpose(0, 1, 4, 2, 5, 3).reshape(t, h * CELL, w * CELL, 3)
    rgb = np.clip((cells + 1.0) * 127.5, 0, 255).round().astype(np.uint8)
    size = (w * PATCH, h * PATCH)
    pictures = [np.asarray(Image.fromarray(rgb[index]).resize(size, Image.Resampling.BILINEAR)) for index in range(t)]
    groups = _time_groups(frames)
    repeated = [pictures[index] for index, group in enumerate(groups[:t]) for _ in range(group.stop - group.start)]
    return np.stack(repeated)


AUDIO_RATE = 16000
AUDIO_STEPS_PER_SECOND = 25
_AUDIO_BANDS = 128  # = 8 channels x 16 bins, the latent's shape


def encode_audio(samples: npt.NDArray[np.float32], steps: int) -> torch.Tensor:
    """Mono float32 at ``AUDIO_RATE`` -> ``[8, steps, 16]`` latents (log-band spectrum per 40 ms)."""
    hop = AUDIO_RATE // AUDIO_STEPS_PER_SECOND
    padded = np.zeros(steps * hop, dtype=np.float32)
    padded[: min(samples.size, padded.size)] = samples[: padded.size]
    spectrum = np.abs(np.fft.rfft(padded.reshape(steps, hop) * np.hanning(hop), axis=1))  # [steps, hop/2+1]
    bands = np.array_split(spectrum[:, 1:], _AUDIO_BANDS, axis=1)
    features = np.log1p(np.stack([band.mean(axis=1) for band in bands], axis=1))  # [steps, 128]
    # Standardised over the clip and clipped: a pure tone is one bright band, silence is all zeros.
    scaled = np.clip((features - features.mean()) / (features.std() + 1e-6), -4.0, 4.0)
    return torch.from_numpy(scaled.astype(np.float32)).reshape(steps, 8, 16).permute(1, 0, 2).contiguous()
