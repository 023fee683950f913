"""The round-trip checks: every part's state dict, pushed through the loader's own key map, must come out whole.

The loader builds modules on the meta device and loads with ``strict=False``, so a parameter or persistent
buffer missing from the file silently stays on meta until the first forward. These checks run before anything
is renamed into place: the Gemma folder is loaded the way ltx-core loads it (tokenizer, processor, key map),
and each LTX part's state dict must be complete, with the right shapes, after its trainer loader's key map.

Part of ``build_tiny_model.py``, a standalone script run with the *trainer's* interpreter: like it, this module
imports nothing from ltx_pipeline, only the standard library here and the trainer's own packages (torch,
ltx-core, transformers) lazily inside functions. The script's folder is ``sys.path[0]``, so it imports this
module as a sibling; the folder is deliberately not a package.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch
    from ltx_core.loader.sd_ops import SDOps


def loaded_keys(file_tensors: dict[str, torch.Tensor], sd_ops: SDOps) -> dict[str, tuple[int, ...]]:
    """What the loader's key map turns the file's tensors into (key -> shape)."""
    out: dict[str, tuple[int, ...]] = {}
    for name, value in file_tensors.items():
        mapped = sd_ops.apply_to_key(name)
        if mapped is None:
            continue
        for key, new_value in sd_ops.apply_to_key_value(mapped, value):
            out[key] = tuple(new_value.shape)
    return out


def check_complete(
    label: str, state: dict[str, torch.Tensor], file_tensors: dict[str, torch.Tensor], sd_ops: SDOps
) -> None:
    """Fail unless the loader would fill every entry of ``state`` (params + persistent buffers), right-shaped."""
    loaded = loaded_keys(file_tensors, sd_ops)
    expected = {key: tuple(value.shape) for key, value in state.items()}
    missing = sorted(key for key in expected if key not in loaded)
    if missing:
        raise RuntimeError(f"{label}: {len(missing)} tensors would stay on meta, e.g. {missing[:3]}")
    wrong = sorted(key for key, shape in expected.items() if loaded[key] != shape)
    if wrong:
        raise RuntimeError(f"{label}: shape mismatch for {wrong[:3]}")


def check_ltx_checkpoint(parts: dict[str, torch.nn.Module], tensors: dict[str, torch.Tensor]) -> None:
    """Run each part's state dict through the key map its trainer loader uses."""
    from ltx_core.model.audio_vae import (
        AUDIO_VAE_DECODER_COMFY_KEYS_FILTER,
        AUDIO_VAE_ENCODER_COMFY_KEYS_FILTER,
        VOCODER_COMFY_KEYS_FILTER,
    )
    from ltx_core.model.transformer.model_configurator import LTXV_MODEL_COMFY_RENAMING_MAP
    from ltx_core.model.video_vae import VAE_DECODER_COMFY_KEYS_FILTER, VAE_ENCODER_COMFY_KEYS_FILTER
    from ltx_core.text_encoders.gemma import EMBEDDINGS_PROCESSOR_KEY_OPS

    key_maps = {
        "transformer": LTXV_MODEL_COMFY_RENAMING_MAP,
        "embeddings_processor": EMBEDDINGS_PROCESSOR_KEY_OPS,
        "video_encoder": VAE_ENCODER_COMFY_KEYS_FILTER,
        "video_decoder": VAE_DECODER_COMFY_KEYS_FILTER,
        "audio_encoder": AUDIO_VAE_ENCODER_COMFY_KEYS_FILTER,
        "audio_decoder": AUDIO_VAE_DECODER_COMFY_KEYS_FILTER,
        "vocoder": VOCODER_COMFY_KEYS_FILTER,
    }
    for name, module in parts.items():
        check_complete(name, module.state_dict(), tensors, key_maps[name])


def check_gemma_folder(folder: Path, model: torch.nn.Module) -> None:
    """Load the folder's assets and key map the way ltx-core does: tokenizer, processor, every weight."""
    from ltx_core.text_encoders.gemma import (
        GemmaAssets,
        build_gemma_processor,
        build_gemma_tokenizer,
        get_gemma_ops,
    )
    from safetensors.torch import load_file

    assets = GemmaAssets.load(str(folder))
    tokenizer = build_gemma_tokenizer(assets)
    build_gemma_processor(assets, tokenizer.tokenizer)
    tokens = tokenizer.tokenize_with_weights("a tiny test prompt")["gemma"]
    if len(tokens) != tokenizer.max_length or tokens[-1][1] != 1:
        raise RuntimeError("the tokenizer does not left-pad prompts to the encoder's fixed length")
    sd_ops, _module_ops = get_gemma_ops(str(folder))
    file_tensors = load_file(str(folder / "model.safetensors"))
    # LTXGemmaTextEncoder holds the HF model under ``.model``, so that is where the key map lands.
    wrapper_state = {f"model.{key}": value for key, value in model.state_dict().items()}
    check_complete("gemma", wrapper_state, file_tensors, sd_ops)

