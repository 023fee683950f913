"""Flow matching on the strategy's modalities: timesteps, conditioning tokens, noisy inputs, loss.

Owns how a config's ``training_strategy`` becomes a training step, following facts §1.5 and
§1.11: per-sample timesteps (``shifted_logit_normal`` with its sequence-length shift, or
``uniform``), intrinsic conditions drawn per sample (first_frame, prefix, suffix, spatial_crop,
mask: clean tokens at sigma 0, excluded from the loss), frozen modalities (``is_generated:
false``: all clean, no loss), and the masked velocity MSE (velocity = noise - clean), video plus
audio. IC-LoRA ``reference`` conditions and the legacy ``video_to_video`` strategy are refused
with a clear message: the toy model has no reference path.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch

__all__ = ["Modality", "StepInputs", "modalities_of", "prepare_step", "sample_sigmas", "step_loss", "video_coords"]

SPATIAL = 32


@dataclass
class Modality:
    """One modality of the strategy: its batch key, whether it is denoised, its conditions."""

    kind: str  # "video" or "audio"
    key: str
    generated: bool
    conditions: list[Any] = field(default_factory=list)


def modalities_of(strategy: Any) -> list[Modality]:
    """The modalities a training strategy config trains on, video first.

    Raises:
        ValueError: a strategy or condition the reference trainer cannot train.
    """
    name = strategy.name
    if name == "text_to_video":
        found = [Modality("video", "latents", True)]
        if strategy.with_audio:
            found.append(Modality("audio", "audio_latents", True))
        return found
    if name != "flexible":
        raise ValueError(f"The reference trainer does not support the '{name}' training strategy; "
                         "use training_strategy.name: flexible")
    found = []
    for kind, modality in (("video", strategy.video), ("audio", strategy.audio)):
        if modality is None:
            continue
        for condition in modality.conditions:
            if condition.type == "reference":
                raise ValueError("The reference trainer does not support 'reference' (IC-LoRA) conditions")
        found.append(Modality(kind, f"{kind}_latents", modality.is_generated, list(modality.conditions)))
    if not any(m.kind == "video" for m in found):
        raise ValueError("The reference trainer needs a video modality (audio-only strategies are not supported)")
    return found


def sample_sigmas(batch: int, seq_len: int, mode: str, params: dict, generator: torch.Generator | None = None,
                  ) -> torch.Tensor:
    """Per-sample noise levels in (0, 1) for ``mode`` with the config's sampler params."""
    if mode == "uniform":
        return _uniform(batch, generator, **params)
    return _shifted_logit_normal(batch, seq_len, generator, **params)


def _uniform(batch: int, generator: torch.Generator | None, min_value: float = 0.0,
             max_value: float = 1.0) -> torch.Tensor:
    return min_value + (max_value - min_value) * torch.rand(batch, generator=generator)


def _shifted_logit_normal(batch: int, seq_len: int, generator: torch.Generator | None, std: float = 1.0,
                          eps: float = 1e-3, uniform_prob: float = 0.1) -> torch.Tensor:
    # The shift is linear in sequence length: 0.95 at 1024 tokens, 2.05 at 4096 (extrapolated).
    mu = 0.95 + (seq_len - 1024) * (2.05 - 0.95) / (4096 - 1024)
    sigmas = torch.sigmoid(mu + std * torch.randn(batch, generator=generator))
    uniform = torch.rand(batch, generator=generator)
    use_uniform = torch.rand(batch, generator=generator) < uniform_prob
    sigmas = torch.where(use_uniform, uniform, sigmas)
    return sigmas.clamp(eps, 1 - eps)


def video_coords(frames: int, height: int, width: int, device: torch.device) -> torch.Tensor:
    """(frame, row, column) of each token in [F', H', W'] order, shape [N, 3]."""
    grid = torch.meshgrid(torch.arange(frames), torch.arange(height), torch.arange(width), indexing="ij")
    return torch.stack([axis.flatten() for axis in grid], dim=-1).to(device)


def _condition_mask(condition: Any, shape: tuple[int, ...], sample: dict) -> torch.Tensor:
    """Tokens a condition keeps clean, flattened in token order ([F'*H'*W'] or [T])."""
    mask = torch.zeros(shape, dtype=torch.bool)
    if condition.type == "first_frame":
        mask[0] = True
    elif condition.type == "prefix":
        mask[: condition.temporal_boundary] = True
    elif condition.type == "suffix":
        mask[max(0, shape[0] - condition.temporal_boundary):] = True
    elif condition.type == "spatial_crop":
        y1, x1, y2, x2 = (v // SPATIAL for v in condition.spatial_region)
        mask[:, max(0, y1): min(shape[1], y2), max(0, x1): min(shape[2], x2)] = True
    elif condition.type == "mask":
        mask = sample[condition.mask_dir]["mask"].reshape(shape) > 0.5
    return mask.flatten()


@dataclass
class StepInputs:
    """Model inputs and loss targets for one batch."""

    video: torch.Tensor
    video_sigma: torch.Tensor
    video_target: torch.Tensor
    video_loss_mask: torch.Tensor
    coords: torch.Tensor
    text: torch.Tensor
    text_mask: torch.Tensor
    audio: torch.Tensor | None = None
    audio_sigma: torch.Tensor | None = None
    audio_target: torch.Tensor | None = None
    audio_loss_mask: torch.Tensor | None = None


def _tokens(kind: str, latents: torch.Tensor) -> tuple[torch.Tensor, tuple[int, ...]]:
    if kind == "video":  # [B, 128, F, H, W] -> [B, F*H*W, 128]
        b, c, f, h, w = latents.shape
        return latents.permute(0, 2, 3, 4, 1).reshape(b, f * h * w, c), (f, h, w)
    b, c, t, bins = latents.shape  # [B, 8, T, 16] -> [B, T, 128]
    return latents.permute(0, 2, 1, 3).reshape(b, t, c * bins), (t,)


def prepare_step(batch: dict, modalities: list[Modality], mode: str, params: dict,
                 device: torch.device, sigma: torch.Tensor | None = None) -> StepInputs:
    """Noise a batch: shared per-sample sigma, conditions drawn per sample, velocity targets.

    ``sigma`` ([B]) stands in for the sampler's draw: the holdout loss measures at fixed noise levels.
    """
    conditions = batch["conditions"]
    text = conditions["video_prompt_embeds"].float().to(device)
    text_mask = conditions["prompt_attention_mask"].to(device)
    parts: dict[str, tuple] = {}
    coords = None
    for modality in modalities:
        clean, shape = _tokens(modality.kind, batch[modality.key]["latents"].float().to(device))
        b, n, _ = clean.shape
        if modality.kind == "video":
            coords = video_coords(*shape, device=device)
            sigma = (sample_sigmas(b, n, mode, params) if sigma is None else sigma.float()).to(device)
        keep_clean = torch.zeros(b, n, dtype=torch.bool, device=device)
        for i in range(b):
            sample = {k: {kk: vv[i] for kk, vv in v.items()} for k, v in batch.items() if isinstance(v, dict)}
            for condition in modality.conditions:
                if torch.rand(()) < condition.probability:
                    keep_clean[i] |= _condition_mask(condition, shape, sample).to(device)
        if not modality.generated:
            keep_clean[:] = True
        token_sigma = torch.where(keep_clean, torch.zeros(()), sigma[:, None].expand(b, n).to(device))
        noise = torch.randn_like(clean)
        noisy = (1 - token_sigma[..., None]) * clean + token_sigma[..., None] * noise
        parts[modality.kind] = (noisy, token_sigma, noise - clean, (~keep_clean).float())
    video = parts["video"]
    audio = parts.get("audio", (None, None, None, None))
    return StepInputs(video[0], video[1], video[2], video[3], coords, text, text_mask, *audio)


def masked_velocity_loss(prediction: torch.Tensor, target: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Per-sample MSE over tokens the mask keeps, shape [B]."""
    per_token = (prediction.float() - target).pow(2).mean(dim=-1)
    return (per_token * mask).sum(dim=1) / mask.sum(dim=1).clamp_min(1.0)


def step_loss(model: torch.nn.Module, inputs: StepInputs) -> torch.Tensor:
    """Mean flow-matching loss of one batch (video + audio when audio is present)."""
    video_pred, audio_pred = model(inputs.video, inputs.video_sigma, inputs.coords, inputs.text,
                                   inputs.text_mask, inputs.audio, inputs.audio_sigma)
    loss = masked_velocity_loss(video_pred, inputs.video_target, inputs.video_loss_mask)
    if audio_pred is not None:
        loss = loss + masked_velocity_loss(audio_pred, inputs.audio_target, inputs.audio_loss_mask)
    return loss.mean()
