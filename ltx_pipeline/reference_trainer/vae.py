"""The toy video VAE: pixels to latents of LTX-2's shape and back, with a fixed linear projection.

Owns ``encode`` (``[F, H, W, 3]`` uint8 frames -> ``[128, F', H/32, W/32]`` latents, F' = (F-1)/8+1,
the grid LTX-2's VAE produces) and ``decode`` (latents -> frames). It is NOT LTX-2's VAE: a latent
frame is the mean of its frames (the first alone, then groups of 8, as the causal VAE groups them),
each 32x32 patch is averaged to 4x4 RGB (48 values) and projected onto 128 channels by a fixed,
seeded matrix with orthonormal columns. Decoding is the exact transpose, so what a LoRA learns in
latent space comes back as the colours and coarse shapes of the user's frames. ``encode_audio`` is
the toy audio VAE: per latent step (25 a second) the log magnitude spectrum of the clip's own sound,
pooled to 128 bands and standardised, so a tone is a steady, learnable pattern; ``decode_audio`` is
its inverse up to that standardisation (latents -> a waveform whose ``encode_audio`` is close to them).
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
import torch

__all__ = ["AUDIO_RATE", "LATENT_CHANNELS", "decode", "decode_audio", "encode", "encode_audio", "latent_basis"]

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
_HOP = AUDIO_RATE // AUDIO_STEPS_PER_SECOND  # 640 samples (40 ms) per latent step, frames do not overlap


def _band_levels(frames: npt.NDArray[np.floating]) -> npt.NDArray[np.float64]:
    """``[steps, 640]`` samples -> ``[steps, 128]``: mean Hann-windowed FFT magnitude of each band (DC left out)."""
    spectrum = np.abs(np.fft.rfft(frames * np.hanning(_HOP), axis=1))  # [steps, hop/2+1]
    bands = np.array_split(spectrum[:, 1:], _AUDIO_BANDS, axis=1)
    return np.stack([band.mean(axis=1) for band in bands], axis=1)


def encode_audio(samples: npt.NDArray[np.float32], steps: int) -> torch.Tensor:
    """Mono float32 at ``AUDIO_RATE`` -> ``[8, steps, 16]`` latents (log-band spectrum per 40 ms)."""
    padded = np.zeros(steps * _HOP, dtype=np.float32)
    padded[: min(samples.size, padded.size)] = samples[: padded.size]
    features = np.log1p(_band_levels(padded.reshape(steps, _HOP)))  # [steps, 128]
    # Standardised over the clip and clipped: a pure tone is one bright band, silence is all zeros.
    scaled = np.clip((features - features.mean()) / (features.std() + 1e-6), -4.0, 4.0)
    return torch.from_numpy(scaled.astype(np.float32)).reshape(steps, 8, 16).permute(1, 0, 2).contiguous()


# decode_audio's synthesis. Each band sounds as sinusoids on its own FFT bins: bin k of a 640-sample frame
# is 25k Hz, a whole number of periods per frame, so a steady band is one unbroken sinusoid across frames.
# The Hann window spreads a bin onto its two neighbours; a 3-bin band therefore plays its centre bin (the
# spread stays inside the band) and a 2-bin band its two bins in opposite phase (a third of the level spills
# out, against all of it for a single bin). Phases are seeded: the same latents give the same waveform.
_BAND_BINS = np.array_split(np.arange(1, _HOP // 2 + 1), _AUDIO_BANDS)
_BIN_BAND = np.concatenate([np.full(bins.size, band) for band, bins in enumerate(_BAND_BINS)])
_BIN_WEIGHT = np.concatenate([np.eye(1, bins.size, bins.size // 2)[0] if bins.size % 2
                              else np.r_[np.zeros(bins.size // 2 - 1), 1.0, -1.0, np.zeros(bins.size // 2 - 1)]
                              for bins in _BAND_BINS])
_BAND_PHASE = np.random.default_rng(_SEED).uniform(0.0, 2.0 * np.pi, _AUDIO_BANDS)
# A band's mean windowed magnitude per unit of sinusoid amplitude: a centre bin gives hop/4 on its bin and
# hop/8 on each neighbour (mean hop/6); in an opposite pair each bin gets hop/4 plus its partner's hop/8.
_LEVEL_PER_AMPLITUDE = np.array([_HOP / 6 if bins.size % 2 else 3 * _HOP / 8 for bins in _BAND_BINS])
_SINUSOIDS = np.array([1 if bins.size % 2 else 2 for bins in _BAND_BINS])
_LOUDEST_RMS = 0.15  # the loudest 40 ms of a decoded clip: about the demo clips' 0.2-amplitude tone
_RAMP = 32  # samples of crossfade each side of a frame boundary, where the Hann window is below 0.025
_REFINE = 8  # rounds of per-band gain correction against the measured levels


def _synthesise(amplitudes: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    """``[steps, 128]`` sinusoid amplitudes per band -> ``[steps, 640]`` samples, crossfaded at frame boundaries."""
    spectrum = np.zeros((amplitudes.shape[0], _HOP // 2 + 1), dtype=np.complex128)
    # irfft turns a coefficient S at bin k into a sinusoid of amplitude 2|S|/hop.
    spectrum[:, 1:] = amplitudes[:, _BIN_BAND] * _BIN_WEIGHT * np.exp(1j * _BAND_PHASE[_BIN_BAND]) * (_HOP / 2)
    periods = np.fft.irfft(spectrum, n=_HOP, axis=1)  # one period of each frame's sound
    frames = periods.copy()
    if len(frames) > 1:  # a step in amplitude clicks: fade between the two frames' sounds instead
        fade = 0.5 - 0.5 * np.cos(np.pi * (np.arange(2 * _RAMP) + 0.5) / (2 * _RAMP))
        around = np.r_[_HOP - _RAMP:_HOP, 0:_RAMP]  # both sounds are periodic in the frame, so either covers it
        blended = (1.0 - fade) * periods[:-1][:, around] + fade * periods[1:][:, around]
        frames[:-1, _HOP - _RAMP:], frames[1:, :_RAMP] = blended[:, :_RAMP], blended[:, _RAMP:]
    return frames


def _loudest_rms(levels: npt.NDArray[np.float64]) -> float:
    """The RMS of the loudest frame a ``[steps, 128]`` band-level target plays at, before refinement."""
    amplitudes = levels / _LEVEL_PER_AMPLITUDE
    return float(np.sqrt((_SINUSOIDS * amplitudes**2 / 2).sum(axis=1)).max())


def decode_audio(latents: torch.Tensor) -> npt.NDArray[np.float32]:
    """``[8, steps, 16]`` latents -> mono float32 at ``AUDIO_RATE``, ``steps`` x 40 ms: ``encode_audio``'s inverse.

    ``encode_audio`` standardises each clip, so loudness is lost and any positive scaling of the latents'
    range describes the clip: the lowest latent plays as silence, the highest as the top of a log1p range
    chosen so the loudest 40 ms has an RMS of 0.15. Band levels are then matched by sinusoids and refined
    against ``encode_audio``'s own measurement, so ``encode_audio(decode_audio(z))`` is close to ``z`` for
    the standardised latents it writes. Flat latents (silence encoded) decode to silence.
    """
    steps = latents.shape[1]
    z = latents.detach().float().cpu().numpy().astype(np.float64).transpose(1, 0, 2).reshape(steps, _AUDIO_BANDS)
    spread = z.max() - z.min()
    if spread < 1e-6:
        return np.zeros(steps * _HOP, dtype=np.float32)
    unit = (z - z.min()) / spread
    low, high = 0.0, 20.0  # log1p range; the loudness grows with it, so bisect for the target RMS
    for _ in range(40):
        middle = (low + high) / 2
        low, high = (low, middle) if _loudest_rms(np.expm1(middle * unit)) > _LOUDEST_RMS else (middle, high)
    target = np.expm1(low * unit)
    amplitudes = target / _LEVEL_PER_AMPLITUDE
    for _ in range(_REFINE):
        measured = _band_levels(_synthesise(amplitudes))
        amplitudes *= target / np.maximum(measured, 1e-12)
    return np.clip(_synthesise(amplitudes).reshape(-1), -1.0, 1.0).astype(np.float32)
