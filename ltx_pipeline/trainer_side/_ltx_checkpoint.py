"""The LTX-2 parts of the unified checkpoint: their architecture (``__metadata__["config"]``), the parts
themselves, built by the installed ltx-core's own configurators, and the file keys they are stored under.

Parts: the audio+video transformer, the text connectors and feature extractor, the conv video VAE, the audio
VAE and the vocoder. The sizes are small but self-consistent, and the file keys are the inverses of the
loaders' key maps, so ltx-core's ``SingleGPUModelBuilder`` reads the file back as it reads a released one.

Part of ``build_tiny_model.py``, a standalone script run with the *trainer's* interpreter: like it, this module
imports nothing from ltx_pipeline, only the standard library here and the trainer's own packages (torch,
ltx-core, transformers) lazily inside functions. The script's folder is ``sys.path[0]``, so it imports this
module as a sibling; the folder is deliberately not a package.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from _gemma_folder import GEMMA_HIDDEN
from _seeded_init import build_module
from _step_errors import step

if TYPE_CHECKING:
    import torch

# Small but self-consistent sizes. The values marked "fixed" below are hard-coded elsewhere in ltx-core or the
# trainer, so they cannot shrink.
TRANSFORMER_LAYERS = 2


def transformer_config() -> dict[str, Any]:
    """The ``transformer`` section: LTXModel plus the text connectors (V1 layout, LTX-2)."""
    return {
        # check_config_value raises when any of these is *missing*, not only when it is wrong.
        "dropout": 0.0,
        "attention_bias": True,
        "num_vector_embeds": None,
        "activation_fn": "gelu-approximate",
        "num_embeds_ada_norm": 1000,
        "use_linear_projection": False,
        "only_cross_attention": False,
        "cross_attention_norm": True,
        "double_self_attention": False,
        "upcast_attention": False,
        "standardization_norm": "rms_norm",
        "norm_elementwise_affine": False,
        "qk_norm": "rms_norm",
        "positional_embedding_type": "rope",
        "use_audio_video_cross_attention": True,
        "share_ff": False,
        "av_cross_ada_norm": True,
        "use_middle_indices_grid": True,
        # Sizes. num_attention_heads must equal audio_num_attention_heads (checked by the configurator).
        "num_layers": TRANSFORMER_LAYERS,
        "num_attention_heads": 2,
        "attention_head_dim": 32,
        "cross_attention_dim": 64,  # = video inner dim (heads x head dim)
        "audio_num_attention_heads": 2,
        "audio_attention_head_dim": 16,
        "audio_cross_attention_dim": 32,  # = audio inner dim
        "in_channels": 128,  # fixed: video latent channels
        "out_channels": 128,
        "audio_in_channels": 128,  # fixed: 8 audio latent channels x 16 mel bins
        "audio_out_channels": 128,
        "caption_channels": GEMMA_HIDDEN,  # V1: the caption projection reads the connector output
        "norm_eps": 1e-6,
        "positional_embedding_theta": 10000.0,
        "positional_embedding_max_pos": [20, 2048, 2048],
        "audio_positional_embedding_max_pos": [20],
        "timestep_scale_multiplier": 1000,
        "rope_type": "split",
        "frequencies_precision": "float64",
        "cross_attention_adaln": False,
        "apply_gated_attention": False,
        # Connectors: heads x head dim must equal the Gemma hidden size in V1.
        "connector_num_attention_heads": 2,
        "connector_attention_head_dim": GEMMA_HIDDEN // 2,
        "connector_num_layers": 1,
        "connector_positional_embedding_max_pos": [4096],
        "audio_connector_num_attention_heads": 2,
        "audio_connector_attention_head_dim": GEMMA_HIDDEN // 2,
        "audio_connector_num_layers": 1,
    }


def video_vae_config() -> dict[str, Any]:
    """The ``vae`` section: a conv VAE with the default 32x32x8 compression and no channel growth."""
    return {
        "_class_name": "CausalVideoAutoencoder",  # the conv VAE; anything else selects the diffusion VAE
        "dims": 3,
        "in_channels": 3,
        "out_channels": 3,
        "latent_channels": 128,  # fixed: the trainer hard-codes 128 latent channels
        # The scale factors are derived from these lists: patch 4 x 2^3 spatial, 2^3 temporal.
        "encoder_blocks": [
            ["compress_space_res", {"multiplier": 1}],
            ["compress_time_res", {"multiplier": 1}],
            ["compress_all_res", {"multiplier": 1}],
            ["compress_all_res", {"multiplier": 1}],
        ],
        "decoder_blocks": [
            ["compress_space", {"multiplier": 1}],
            ["compress_time", {"multiplier": 1}],
            ["compress_all", {"multiplier": 1}],
            ["compress_all", {"multiplier": 1}],
        ],
        "patch_size": 4,
        "decoder_base_channels": 16,
        "norm_layer": "pixel_norm",
        "latent_log_var": "uniform",
        "causal_decoder": False,
        "timestep_conditioning": False,
    }


def audio_vae_config() -> dict[str, Any]:
    """The ``audio_vae`` section: the mel VAE with the smallest channel ladder."""
    return {
        "model": {
            "params": {
                "ddconfig": {
                    "ch": 128,  # fixed: the per-channel statistics are sized by ch, and must hold 8 x 16
                    "out_ch": 2,
                    "in_channels": 2,
                    "ch_mult": [1, 1, 1],  # three levels -> 4x downsampling (64 mel bins -> 16)
                    "num_res_blocks": 1,
                    "attn_resolutions": [],
                    "resolution": 256,
                    "z_channels": 8,  # fixed
                    "double_z": True,
                    "dropout": 0.0,
                    "mid_block_add_attention": False,
                    "norm_type": "pixel",
                    "causality_axis": "height",
                    "mel_bins": 64,  # fixed: the vocoder reads 2 x 64 mel channels
                },
                "sampling_rate": 16000,
            }
        },
        "preprocessing": {
            "stft": {"filter_length": 1024, "hop_length": 160, "causal": True},
            "mel": {"n_mel_channels": 64},
        },
    }


def vocoder_config() -> dict[str, Any]:
    """The ``vocoder`` section: the LTX-2 (pre-2.3, no BWE) HiFi-GAN layout at a tiny width."""
    return {
        "resblock": "1",  # checked: a flat vocoder must be resblock "1" and stereo
        "stereo": True,
        "upsample_initial_channel": 64,
        "upsample_rates": [6, 5, 2, 2, 2],  # x240 = one 16 kHz mel hop (160) at 24 kHz
        "upsample_kernel_sizes": [16, 15, 8, 4, 4],
        "resblock_kernel_sizes": [3, 7, 11],
        "resblock_dilation_sizes": [[1, 3, 5], [1, 3, 5], [1, 3, 5]],
        "output_sampling_rate": 24000,
    }


def checkpoint_metadata() -> dict[str, Any]:
    """The decoded ``__metadata__``: only ``config``, so the checkpoint pairs with a Gemma 3 text encoder."""
    return {
        "config": {
            "transformer": transformer_config(),
            "vae": video_vae_config(),
            "audio_vae": audio_vae_config(),
            "vocoder": vocoder_config(),
        }
    }


def build_ltx_parts(metadata: dict[str, Any], gemma_folder: Path) -> dict[str, torch.nn.Module]:
    """Build each part with the installed ltx-core's own configurators, from the metadata it will read."""
    from ltx_core.model.audio_vae import (
        AudioDecoderConfigurator,
        AudioEncoderConfigurator,
        VocoderConfigurator,
    )
    from ltx_core.model.transformer.model_configurator import LTXModelConfigurator
    from ltx_core.model.video_vae import VideoDecoderConfigurator, VideoEncoderConfigurator
    from ltx_core.text_encoders.gemma import EmbeddingsProcessorConfigurator

    embeddings = EmbeddingsProcessorConfigurator.with_gemma_model_path(str(gemma_folder))
    factories: dict[str, Callable[[], torch.nn.Module]] = {
        "transformer": lambda: LTXModelConfigurator.from_metadata(metadata),
        "embeddings_processor": lambda: embeddings.from_metadata(metadata),
        "video_encoder": lambda: VideoEncoderConfigurator.from_metadata(metadata),
        "video_decoder": lambda: VideoDecoderConfigurator.from_metadata(metadata),
        "audio_encoder": lambda: AudioEncoderConfigurator.from_metadata(metadata),
        "audio_decoder": lambda: AudioDecoderConfigurator.from_metadata(metadata),
        "vocoder": lambda: VocoderConfigurator.from_metadata(metadata),
    }
    parts: dict[str, torch.nn.Module] = {}
    for name, factory in factories.items():
        with step(f"building the {name.replace('_', ' ')} with ltx-core's configurator"):
            parts[name] = build_module(factory)
    return parts


# module-key prefix -> file-key prefix, first match wins; "" is the catch-all. These are the inverses of the
# loaders' key maps (LTXV_MODEL_COMFY_RENAMING_MAP, EMBEDDINGS_PROCESSOR_KEY_OPS, the *_COMFY_KEYS_FILTERs).
FILE_PREFIXES: dict[str, tuple[tuple[str, str], ...]] = {
    "transformer": (("", "model.diffusion_model."),),
    "embeddings_processor": (
        ("feature_extractor.aggregate_embed.", "text_embedding_projection.aggregate_embed."),
        ("video_connector.", "model.diffusion_model.video_embeddings_connector."),
        ("audio_connector.", "model.diffusion_model.audio_embeddings_connector."),
    ),
    "video_encoder": (("per_channel_statistics.", "vae.per_channel_statistics."), ("", "vae.encoder.")),
    "video_decoder": (("per_channel_statistics.", "vae.per_channel_statistics."), ("", "vae.decoder.")),
    "audio_encoder": (("per_channel_statistics.", "audio_vae.per_channel_statistics."), ("", "audio_vae.encoder.")),
    "audio_decoder": (("per_channel_statistics.", "audio_vae.per_channel_statistics."), ("", "audio_vae.decoder.")),
    "vocoder": (("", "vocoder."),),
}


def file_key(part: str, key: str) -> str:
    for module_prefix, file_prefix in FILE_PREFIXES[part]:
        if key.startswith(module_prefix):
            return file_prefix + key.removeprefix(module_prefix)
    raise RuntimeError(f"no file prefix for {part} key {key}")


def ltx_file_state_dict(parts: dict[str, torch.nn.Module]) -> dict[str, torch.Tensor]:
    """Merge every part's full state dict under the prefixes the loaders expect.

    Encoder and decoder share one ``per_channel_statistics`` entry in the file, so both must agree.
    """
    import torch

    merged: dict[str, torch.Tensor] = {}
    for part, module in parts.items():
        for key, value in module.state_dict().items():
            name = file_key(part, key)
            if name in merged and not torch.equal(merged[name], value):
                raise RuntimeError(f"{part} disagrees with an earlier part on shared tensor {name}")
            merged[name] = value
    return merged

