"""The tiny Gemma 3 folder: config, weights in the original Gemma 3 key layout, tokenizer and processor sidecars.

The model is a Gemma 3 text model plus a SigLIP vision tower, built by the installed transformers from the
config it will read back; the tokenizer is a byte-level BPE trained here on a fixed corpus (no download, no
sentencepiece) with Gemma's special-token ids, and ltx-core's processor sidecars sit beside it.

Part of ``build_tiny_model.py``, a standalone script run with the *trainer's* interpreter: like it, this module
imports nothing from ltx_pipeline, only the standard library here and the trainer's own packages (torch,
ltx-core, transformers) lazily inside functions. The script's folder is ``sys.path[0]``, so it imports this
module as a sibling; the folder is deliberately not a package.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from _output_files import save_safetensors, write_json
from _seeded_init import build_module

if TYPE_CHECKING:
    import torch
    from tokenizers import Tokenizer

# Sizes: small but self-consistent. The LTX text connectors and caption projection are sized from GEMMA_HIDDEN.
GEMMA_HIDDEN = 64
GEMMA_LAYERS = 2
GEMMA_HEADS = 2
GEMMA_HEAD_DIM = 32
GEMMA_VOCAB = 512

# Gemma's own ids for pad/eos/bos/unk, then the image tokens Gemma3Processor needs, then chat turn markers.
SPECIAL_TOKENS = (
    "<pad>",
    "<eos>",
    "<bos>",
    "<unk>",
    "<start_of_image>",
    "<end_of_image>",
    "<image_soft_token>",
    "<start_of_turn>",
    "<end_of_turn>",
)
PAD_ID, EOS_ID, BOS_ID, UNK_ID, BOI_ID, EOI_ID, IMAGE_ID = range(7)
MM_TOKENS_PER_IMAGE = 4  # 28px image / 14px patch = 2x2 patches, pooled 1:1
VISION_IMAGE_SIZE = 28

# A fixed corpus for the tokenizer: English prompt-like text, so common words get merges of their own.
TOKENIZER_CORPUS = (
    "A woman with long brown hair sits at a wooden desk in a cozy home office, typing on a laptop.",
    "A chef in a white uniform stands in a professional kitchen, carefully plating a gourmet dish.",
    "Soft natural light streams through a large window, casting warm shadows across the room.",
    "The camera slowly pans across a mountain landscape at sunrise while birds sing in the distance.",
    "A red ball bounces on a green lawn; a dog runs after it and barks happily.",
    "Waves crash against the rocks of a rugged coastline under a grey, stormy sky.",
    "The audio captures the gentle clicking of keyboard keys and ambient room tone.",
    "Close-up of hands kneading dough on a floured table, then shaping it into a round loaf.",
    "A city street at night: neon signs, wet asphalt reflecting lights, cars passing by.",
    "Children laugh and play in a park as leaves fall from tall autumn trees.",
    "0123456789 numbers, punctuation! Questions? Quotes \"like this\" and 'that' - dashes, colons: done.",
)


def train_tokenizer() -> Tokenizer:
    """Train a tiny byte-level BPE locally (no download, no sentencepiece) with Gemma's special-token ids."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers

    tokenizer = Tokenizer(models.BPE(unk_token="<unk>"))
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=GEMMA_VOCAB,
        special_tokens=list(SPECIAL_TOKENS),  # ids 0.. in this order
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        min_frequency=1,
        show_progress=False,
    )
    tokenizer.train_from_iterator(TOKENIZER_CORPUS * 4, trainer=trainer)
    # Gemma's tokenizer emits <bos> itself; ltx-core prepends it when missing, so this just mirrors Gemma.
    tokenizer.post_processor = processors.TemplateProcessing(
        single="<bos> $A", pair="<bos> $A <bos> $B", special_tokens=[("<bos>", BOS_ID)]
    )
    for token_id, token in enumerate(SPECIAL_TOKENS):
        if tokenizer.token_to_id(token) != token_id:
            raise RuntimeError(f"tokenizer put {token} at id {tokenizer.token_to_id(token)}, expected {token_id}")
    if tokenizer.get_vocab_size() > GEMMA_VOCAB:
        raise RuntimeError(f"tokenizer vocab {tokenizer.get_vocab_size()} exceeds {GEMMA_VOCAB}")
    return tokenizer


def gemma_config_dict() -> dict[str, Any]:
    """config.json for Gemma3ForConditionalGeneration, completed by the installed transformers."""
    from transformers import Gemma3Config

    config = Gemma3Config(
        text_config={
            "vocab_size": GEMMA_VOCAB,
            "hidden_size": GEMMA_HIDDEN,
            "intermediate_size": 2 * GEMMA_HIDDEN,
            "num_hidden_layers": GEMMA_LAYERS,
            "num_attention_heads": GEMMA_HEADS,
            "num_key_value_heads": 1,
            "head_dim": GEMMA_HEAD_DIM,
            "query_pre_attn_scalar": GEMMA_HEAD_DIM,
            "max_position_embeddings": 2048,  # prompts are always padded to 1024 tokens
            "sliding_window": 512,
            # Gemma 3 interleaves sliding and full attention with a RoPE base each; keep one layer of each.
            "layer_types": ["sliding_attention", "full_attention"],
            "rope_parameters": {
                "sliding_attention": {"rope_type": "default", "rope_theta": 10_000.0},
                "full_attention": {"rope_type": "default", "rope_theta": 1_000_000.0},
            },
            "pad_token_id": PAD_ID,
            "eos_token_id": EOS_ID,
            "bos_token_id": BOS_ID,
        },
        vision_config={
            "hidden_size": 32,
            "intermediate_size": 64,
            "num_hidden_layers": 1,
            "num_attention_heads": 2,
            "image_size": VISION_IMAGE_SIZE,
            "patch_size": 14,
            "vision_use_head": False,  # Gemma 3's SigLIP has no pooling head
        },
        mm_tokens_per_image=MM_TOKENS_PER_IMAGE,
        boi_token_index=BOI_ID,
        eoi_token_index=EOI_ID,
        image_token_index=IMAGE_ID,
        pad_token_id=PAD_ID,
        eos_token_id=EOS_ID,
        bos_token_id=BOS_ID,
    )
    config_dict = config.to_diff_dict()
    config_dict["architectures"] = ["Gemma3ForConditionalGeneration"]
    return config_dict


def gemma_sidecars() -> dict[str, dict[str, Any]]:
    """tokenizer/processor sidecars: ltx-core always builds the processor, even when it only encodes."""
    return {
        "tokenizer_config.json": {
            # Not GemmaTokenizer: transformers would rebuild it as a sentencepiece-style BPE and lose this one.
            "tokenizer_class": "PreTrainedTokenizerFast",
            "bos_token": "<bos>",
            "eos_token": "<eos>",
            "pad_token": "<pad>",
            "unk_token": "<unk>",
            "extra_special_tokens": {
                "image_token": "<image_soft_token>",
                "boi_token": "<start_of_image>",
                "eoi_token": "<end_of_image>",
            },
            "padding_side": "left",
            "clean_up_tokenization_spaces": False,
            "model_max_length": 1024,
        },
        "processor_config.json": {"processor_class": "Gemma3Processor", "image_seq_length": MM_TOKENS_PER_IMAGE},
        "preprocessor_config.json": {
            "image_processor_type": "Gemma3ImageProcessor",
            "size": {"height": VISION_IMAGE_SIZE, "width": VISION_IMAGE_SIZE},
            "do_resize": True,
            "resample": 2,
            "do_rescale": True,
            "rescale_factor": 1 / 255,
            "do_normalize": True,
            "image_mean": [0.5, 0.5, 0.5],
            "image_std": [0.5, 0.5, 0.5],
            "do_convert_rgb": None,
            "do_pan_and_scan": False,
        },
    }


# transformers-5 module names -> the original Gemma 3 checkpoint names that GEMMA3_LLM_KEY_OPS maps back.
GEMMA_HF_TO_FILE = (
    ("model.language_model.", "language_model.model."),
    ("model.vision_tower.", "vision_tower.vision_model."),
    ("model.multi_modal_projector.", "multi_modal_projector."),
)


def gemma_file_state_dict(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    """Rename a transformers-5 Gemma3ForConditionalGeneration state dict to the Gemma 3 file layout."""
    renamed: dict[str, torch.Tensor] = {}
    for key, value in model.state_dict().items():
        if key == "lm_head.weight":
            continue  # tied to embed_tokens; the loader mirrors it back
        for hf_prefix, file_prefix in GEMMA_HF_TO_FILE:
            if key.startswith(hf_prefix):
                renamed[file_prefix + key.removeprefix(hf_prefix)] = value
                break
        else:
            raise RuntimeError(f"unexpected Gemma state-dict key {key}")
    return renamed


def build_gemma_folder(folder: Path) -> torch.nn.Module:
    """Write the whole Gemma folder (into a temp folder renamed later) and return the HF model."""
    from transformers import AutoModelForImageTextToText
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING

    folder.mkdir(parents=True)
    train_tokenizer().save(str(folder / "tokenizer.json"))
    write_json(folder / "config.json", gemma_config_dict())
    for name, payload in gemma_sidecars().items():
        write_json(folder / name, payload)
    # Build from config.json as ltx-core reads it back (its build_gemma_hf_config needs the weights present).
    config_dict = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    config = CONFIG_MAPPING[config_dict["model_type"]].from_dict(config_dict)
    model = build_module(lambda: AutoModelForImageTextToText.from_config(config))
    save_safetensors(gemma_file_state_dict(model), folder / "model.safetensors", {"format": "pt"})
    return model

