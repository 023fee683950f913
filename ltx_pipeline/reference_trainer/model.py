"""The toy audio-video transformer and its frozen base-weights file.

Owns the architecture (``ToyAVTransformer``), its description (``ToyArchitecture``, stored as
safetensors metadata so sizes are derived from the base file) and loading/creating that file.
Module names follow LTX-2's so its LoRA target patterns match the same layers:
``transformer_blocks.N.attn1.to_q|to_k|to_v|to_out.0``, ``attn2.*``, ``ff.net.0.proj``,
``ff.net.2``, ``audio_attn1.*``, ``audio_attn2.*``, ``audio_ff.*``, ``video_to_audio_attn.*``,
``audio_to_video_attn.*``, plus ``patchify_proj``/``proj_out`` and their audio twins. The audio
branch runs only when a batch carries audio latents. Every token has its own timestep, so clean
conditioning tokens (sigma 0) and noisy ones share a sequence, as in LTX-2. Unlike LTX-2, the layers
estimate the clean latent and the velocity is derived from it (``velocity_from_clean``), and the pooled
caption joins the timestep in the modulation: both let a few LoRA steps on a random base learn the
user's clips per caption (measured on the demo), which is what the toy is for.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass
from pathlib import Path

import torch
import torch.nn.functional as F
from safetensors import safe_open
from safetensors.torch import load_file, save_file
from torch import nn
from torch.utils.checkpoint import checkpoint

from ltx_pipeline.reference_trainer.vae import latent_basis

__all__ = ["ToyArchitecture", "ToyAVTransformer", "create_base", "load_base", "read_architecture"]

METADATA_KEY = "reference_toy"
LATENT_CHANNELS = 128
AUDIO_CHANNELS = 8
AUDIO_BINS = 16
# The loss's 1/sigma^2 weight is capped at 16: with 0.05 (a cap of 400) a few near-clean batches steered the
# demo's 60 steps, and the same demo ended anywhere from -8% to -43% closer to its clips; with 0.25, -33% to -46%.
MIN_SIGMA = 0.25
# The layers end in a LayerNorm and a fixed projection (outputs of about 0.6 a channel); the toy VAE's
# latents reach about 1.6 a channel of its span (uniform pixels in [-1, 1]: sqrt(128 / 48)).
CLEAN_SCALE = 3.0


@dataclass(frozen=True)
class ToyArchitecture:
    """Sizes of the toy model, stored in the base file's metadata."""

    dim: int = 64
    heads: int = 4
    layers: int = 2
    ff_mult: int = 4
    audio_dim: int = 32
    text_dim: int = 64
    text_len: int = 32
    seed: int = 0


def _timestep_features(sigma: torch.Tensor, dim: int) -> torch.Tensor:
    half = dim // 2
    freqs = torch.exp(-math.log(10000.0) * torch.arange(half, device=sigma.device) / half)
    angles = (sigma.float() * 1000.0).unsqueeze(-1) * freqs
    return torch.cat([angles.sin(), angles.cos()], dim=-1)


def velocity_from_clean(noisy: torch.Tensor, sigma: torch.Tensor, clean: torch.Tensor,
                        basis: torch.Tensor | None = None) -> torch.Tensor:
    """Flow velocity ``(noisy - clean) / sigma`` from the layers' estimate of the clean latent.

    The toy's layers predict the clean latent and the velocity follows, as ``noisy = (1 - s) clean +
    s noise`` makes ``noise - clean = (noisy - clean) / s``. A pretrained velocity model has learnt to
    carry the noise through; the toy's random base has not, and the demo's 60 LoRA steps do not teach
    it (measured: the samples stay noise). Predicting the clean latent, a LoRA learns what a caption
    looks like, not a copy of the noise. With ``basis`` ([128, k] orthonormal columns: the toy VAE
    writes latents only in their span) the estimate is kept inside the span. ``sigma`` is floored at
    ``MIN_SIGMA`` so that tokens near or at 0 (clean conditioning) and the loss's 1/sigma^2 weight stay
    bounded; below it the derived velocity is too small, so a sampler's last steps stop short of the
    estimate (the toy's samples keep a little of their noise).
    """
    s = sigma.float().unsqueeze(-1).clamp_min(MIN_SIGMA)
    estimate = clean.float() * CLEAN_SCALE
    if basis is not None:
        basis = basis.to(estimate.device)
        estimate = estimate @ basis @ basis.T
    return ((noisy.float() - estimate) / s).to(noisy.dtype)


def _pooled(text: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Mean of the caption's real tokens [B, L, d] -> [B, d], at the timestep features' norm (sqrt d)."""
    keep = mask.to(text.dtype)[..., None]
    pooled = (text * keep).sum(1) / keep.sum(1).clamp_min(1.0)
    return F.normalize(pooled, dim=-1) * math.sqrt(text.shape[-1])


def _positions(coords: torch.Tensor, dim: int) -> torch.Tensor:
    """Fixed sinusoidal features of integer coordinates [N, k] -> [N, dim]."""
    parts = []
    per_axis = dim // coords.shape[1] // 2 * 2
    for axis in range(coords.shape[1]):
        half = per_axis // 2
        freqs = torch.exp(-math.log(100.0) * torch.arange(half, device=coords.device) / max(half, 1))
        angles = coords[:, axis : axis + 1].float() * freqs
        parts += [angles.sin(), angles.cos()]
    features = torch.cat(parts, dim=-1)
    return F.pad(features, (0, dim - features.shape[1]))


class Attention(nn.Module):
    """Multi-head attention with LTX-2's projection names (``to_out`` is [Linear, Dropout])."""

    def __init__(self, query_dim: int, context_dim: int, heads: int) -> None:
        super().__init__()
        self.heads = heads
        self.to_q = nn.Linear(query_dim, query_dim)
        self.to_k = nn.Linear(context_dim, query_dim)
        self.to_v = nn.Linear(context_dim, query_dim)
        self.to_out = nn.ModuleList([nn.Linear(query_dim, query_dim), nn.Dropout(0.0)])

    def forward(self, x: torch.Tensor, context: torch.Tensor | None = None,
                mask: torch.Tensor | None = None) -> torch.Tensor:
        context = x if context is None else context
        b, n, d = x.shape
        h = self.heads
        q = self.to_q(x).view(b, n, h, d // h).transpose(1, 2)
        k = self.to_k(context).view(b, context.shape[1], h, d // h).transpose(1, 2)
        v = self.to_v(context).view(b, context.shape[1], h, d // h).transpose(1, 2)
        attn_mask = None if mask is None else mask[:, None, None, :].bool()
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=attn_mask)
        out = out.transpose(1, 2).reshape(b, n, d)
        return self.to_out[1](self.to_out[0](out))


class GELUProj(nn.Module):
    def __init__(self, dim: int, inner: int) -> None:
        super().__init__()
        self.proj = nn.Linear(dim, inner)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.gelu(self.proj(x), approximate="tanh")


class FeedForward(nn.Module):
    """``net = [GELUProj, Dropout, Linear]`` so ``ff.net.0.proj`` and ``ff.net.2`` exist."""

    def __init__(self, dim: int, mult: int) -> None:
        super().__init__()
        self.net = nn.ModuleList([GELUProj(dim, dim * mult), nn.Dropout(0.0), nn.Linear(dim * mult, dim)])

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for layer in self.net:
            x = layer(x)
        return x


def _modulate(norm: nn.LayerNorm, x: torch.Tensor, shift_scale: torch.Tensor) -> torch.Tensor:
    shift, scale = shift_scale.chunk(2, dim=-1)
    return norm(x) * (1 + scale) + shift


class ToyBlock(nn.Module):
    """One audio-video block: self, text-cross and feed-forward per modality, then cross-modal."""

    def __init__(self, arch: ToyArchitecture) -> None:
        super().__init__()
        d, a = arch.dim, arch.audio_dim
        self.norm1, self.norm2, self.norm3 = (nn.LayerNorm(d, elementwise_affine=False) for _ in range(3))
        self.attn1 = Attention(d, d, arch.heads)
        self.attn2 = Attention(d, d, arch.heads)
        self.ff = FeedForward(d, arch.ff_mult)
        self.audio_norm1, self.audio_norm2, self.audio_norm3 = (
            nn.LayerNorm(a, elementwise_affine=False) for _ in range(3)
        )
        self.audio_attn1 = Attention(a, a, arch.heads)
        self.audio_attn2 = Attention(a, a, arch.heads)
        self.audio_ff = FeedForward(a, arch.ff_mult)
        self.audio_to_video_attn = Attention(d, a, arch.heads)
        self.video_to_audio_attn = Attention(a, d, arch.heads)

    def forward(self, video: torch.Tensor, video_mod: torch.Tensor, text: torch.Tensor,
                text_mask: torch.Tensor, audio: torch.Tensor | None, audio_mod: torch.Tensor | None,
                audio_text: torch.Tensor | None) -> tuple[torch.Tensor, torch.Tensor | None]:
        video = video + self.attn1(_modulate(self.norm1, video, video_mod))
        video = video + self.attn2(self.norm2(video), text, text_mask)
        if audio is not None:
            audio = audio + self.audio_attn1(_modulate(self.audio_norm1, audio, audio_mod))
            audio = audio + self.audio_attn2(self.audio_norm2(audio), audio_text, text_mask)
            new_video = video + self.audio_to_video_attn(self.norm3(video), audio)
            audio = audio + self.video_to_audio_attn(self.audio_norm3(audio), video)
            video = new_video
            audio = audio + self.audio_ff(self.audio_norm3(audio))
        video = video + self.ff(self.norm3(video))
        return video, audio


class ToyAVTransformer(nn.Module):
    """The reference trainer's denoiser: predicts flow-matching velocity for video/audio tokens."""

    def __init__(self, arch: ToyArchitecture) -> None:
        super().__init__()
        self.arch = arch
        d, a = arch.dim, arch.audio_dim
        self.patchify_proj = nn.Linear(LATENT_CHANNELS, d)
        self.audio_patchify_proj = nn.Linear(AUDIO_CHANNELS * AUDIO_BINS, a)
        self.caption_projection = nn.Linear(arch.text_dim, d)
        self.audio_caption_projection = nn.Linear(arch.text_dim, a)
        self.adaln_single = nn.Linear(d, 2 * d)
        self.audio_adaln_single = nn.Linear(d, 2 * a)
        self.transformer_blocks = nn.ModuleList(ToyBlock(arch) for _ in range(arch.layers))
        self.norm_out = nn.LayerNorm(d, elementwise_affine=False)
        self.audio_norm_out = nn.LayerNorm(a, elementwise_affine=False)
        self.proj_out = nn.Linear(d, LATENT_CHANNELS)
        self.audio_proj_out = nn.Linear(a, AUDIO_CHANNELS * AUDIO_BINS)
        self.gradient_checkpointing = False
        # Not a parameter nor in the state dict: fixed by the toy VAE, like its projection.
        self.latent_basis = latent_basis()

    def forward(self, video: torch.Tensor, video_sigma: torch.Tensor, video_coords: torch.Tensor,
                text: torch.Tensor, text_mask: torch.Tensor, audio: torch.Tensor | None = None,
                audio_sigma: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Velocity for video tokens [B, N, 128] (and audio tokens [B, T, 128]).

        Args:
            video: noisy video latent tokens [B, N, 128].
            video_sigma: per-token noise level [B, N] (0 = clean conditioning token).
            video_coords: integer (frame, row, column) of each token [N, 3].
            text: caption features [B, L, text_dim]; text_mask: [B, L], 1 = real token.
            audio: noisy audio tokens [B, T, 128] or None; audio_sigma: [B, T].
        """
        d = self.arch.dim
        x = self.patchify_proj(video) + _positions(video_coords, d).to(video.dtype)
        text_v = self.caption_projection(text)
        # The pooled caption joins the timestep in the modulation (as in DiT-style models): cross-attention
        # alone, near-uniform over captions that differ by two words, let 60 LoRA steps learn one render
        # for every prompt (measured on the demo's data).
        timestep = _timestep_features(video_sigma, d).to(x.dtype) + _pooled(text_v, text_mask)[:, None, :]
        video_mod = self.adaln_single(timestep)
        audio_x = audio_mod = text_a = None
        if audio is not None:
            steps = torch.arange(audio.shape[1], device=audio.device)[:, None]
            audio_x = self.audio_patchify_proj(audio) + _positions(steps, self.arch.audio_dim).to(audio.dtype)
            audio_mod = self.audio_adaln_single(_timestep_features(audio_sigma, d).to(x.dtype))
            text_a = self.audio_caption_projection(text)
        for block in self.transformer_blocks:
            args = (x, video_mod, text_v, text_mask, audio_x, audio_mod, text_a)
            if self.gradient_checkpointing and torch.is_grad_enabled():
                x, audio_x = checkpoint(block, *args, use_reentrant=False)
            else:
                x, audio_x = block(*args)
        video_out = velocity_from_clean(video, video_sigma, self.proj_out(self.norm_out(x)), self.latent_basis)
        audio_out = None
        if audio_x is not None and audio is not None and audio_sigma is not None:
            audio_out = velocity_from_clean(audio, audio_sigma, self.audio_proj_out(self.audio_norm_out(audio_x)))
        return video_out, audio_out


def create_base(path: Path, arch: ToyArchitecture) -> Path:
    """Write seeded fp32 base weights and the architecture metadata to ``path`` (.safetensors)."""
    torch.manual_seed(arch.seed)
    model = ToyAVTransformer(arch)
    tensors = {name: value.detach().contiguous() for name, value in model.state_dict().items()}
    metadata = {
        METADATA_KEY: json.dumps(asdict(arch)),
        "description": "ltx-pipeline reference trainer toy model. Not LTX-2.",
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    save_file(tensors, str(tmp), metadata=metadata)
    _canonical_header(tmp)
    tmp.replace(path)
    return path


def _canonical_header(path: Path) -> None:
    """Rewrite a safetensors header with sorted keys: the same seed then gives the same bytes.

    safetensors writes the metadata map in hash order, which changes from process to process; the model's
    identity (and so every latent cache key) hashes the header, so two runs' identical toy bases must be
    byte-identical files. The header is 8-byte aligned with trailing spaces, as the format requires.
    """
    raw = path.read_bytes()
    size = int.from_bytes(raw[:8], "little")
    header = json.loads(raw[8:8 + size])
    text = json.dumps(header, sort_keys=True, separators=(",", ":")).encode("utf-8")
    text += b" " * (-len(text) % 8)
    path.write_bytes(len(text).to_bytes(8, "little") + text + raw[8 + size:])


def read_architecture(path: Path) -> ToyArchitecture:
    """The architecture stored in a base file's metadata.

    Raises:
        ValueError: the file is not a reference-trainer base (e.g. a real LTX-2 checkpoint).
    """
    with safe_open(str(path), framework="pt") as handle:
        metadata = handle.metadata() or {}
    if METADATA_KEY not in metadata:
        raise ValueError(
            f"{path} is not a reference-trainer base model (no '{METADATA_KEY}' metadata). "
            "Create one with: python -m ltx_pipeline.reference_trainer.make_base PATH"
        )
    return ToyArchitecture(**json.loads(metadata[METADATA_KEY]))


def load_base(path: Path, dtype: torch.dtype) -> ToyAVTransformer:
    """Build the model from the base file, weights cast to ``dtype``, on the host."""
    arch = read_architecture(path)
    model = ToyAVTransformer(arch)
    model.load_state_dict(load_file(str(path)), strict=True)
    return model.to(dtype)
