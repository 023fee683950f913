"""What a LoRA weights file holds, read from its safetensors header alone (no torch, no tensor data).

The LTX-2 trainer saves a LoRA (``LtxvTrainer._save_checkpoint``) as PEFT's adapter state dict with
``base_model.model.`` stripped and ``diffusion_model.`` prepended, "ComfyUI-compatible" in its own words:
every key is ``diffusion_model.<module>.lora_A.weight`` or ``.lora_B.weight``, the strategy's
``get_checkpoint_metadata()`` (an IC-LoRA's ``reference_downscale_factor``...) as the file's metadata.
ltx-core's ``LTXV_LORA_COMFY_RENAMING_MAP`` and the trainer's own ``_load_lora_checkpoint`` strip that same
prefix to load it. ``inspect_weights`` checks that layout and reports it; it never changes the file.
"""

from __future__ import annotations

import json
import struct
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ltx_pipeline.errors import BadInput

__all__ = ["COMFY_PREFIX", "LORA_SUFFIXES", "WeightsFacts", "inspect_weights"]

COMFY_PREFIX = "diffusion_model."
LORA_SUFFIXES = (".lora_A.weight", ".lora_B.weight")
_MAX_HEADER = 100 * 1024 * 1024  # safetensors' own limit on the header's size


@dataclass(frozen=True)
class WeightsFacts:
    """A LoRA file's layout: its adapted modules, rank, tensor dtypes and metadata, or why it is not one."""

    path: Path
    size: int
    modules: tuple[str, ...]  # the adapted modules, as the file names them (prefix and suffix off)
    ranks: tuple[int, ...]  # the distinct ranks (lora_A's first dimension)
    dtypes: tuple[str, ...]
    metadata: dict[str, str] = field(default_factory=dict)
    problem: str | None = None  # why the file is not in the trainer's ComfyUI layout; None when it is

    @property
    def rank(self) -> int | None:
        return self.ranks[0] if len(self.ranks) == 1 else None


def _header(path: Path) -> dict[str, Any]:
    """The safetensors header (tensor name -> dtype, shape, offsets; ``__metadata__``).

    Raises:
        BadInput: the file is missing or not a safetensors file.
    """
    try:
        with path.open("rb") as handle:
            (length,) = struct.unpack("<Q", handle.read(8))
            if not 0 < length <= _MAX_HEADER:
                raise ValueError(f"a header of {length} bytes")
            header = json.loads(handle.read(length))
    except (OSError, struct.error, ValueError, UnicodeDecodeError) as exc:
        raise BadInput(f"{path} cannot be read as a safetensors file: {exc}", where=str(path),
                       fix="export a checkpoint the trainer finished writing (see `ltx-pipeline status`)") from exc
    if not isinstance(header, dict):
        raise BadInput(f"{path} has no safetensors header", where=str(path),
                       fix="export a checkpoint the trainer finished writing (see `ltx-pipeline status`)")
    return header


def inspect_weights(path: Path) -> WeightsFacts:
    """The layout of the LoRA weights file at ``path``: modules, rank, dtypes, metadata, and any problem.

    Raises:
        BadInput: the file cannot be read as safetensors.
    """
    header = _header(path)
    metadata = {str(k): str(v) for k, v in (header.pop("__metadata__", None) or {}).items()}
    shapes: dict[str, dict[str, Any]] = {k: v for k, v in header.items() if isinstance(v, dict)}
    problem = _layout_problem(list(shapes))
    a_keys = [k for k in shapes if k.endswith(LORA_SUFFIXES[0])]
    modules = tuple(sorted(k[len(COMFY_PREFIX):-len(LORA_SUFFIXES[0])] for k in a_keys))
    ranks = tuple(sorted({int(shapes[k]["shape"][0]) for k in a_keys if shapes[k].get("shape")}))
    dtypes = tuple(sorted({str(v.get("dtype")) for v in shapes.values()}))
    return WeightsFacts(path, path.stat().st_size, modules, ranks, dtypes, metadata, problem)


def _layout_problem(keys: list[str]) -> str | None:
    """Why ``keys`` are not the trainer's ComfyUI LoRA layout (prefixed A/B pairs), or None."""
    if not keys:
        return "it holds no tensors"
    unprefixed = [k for k in keys if not k.startswith(COMFY_PREFIX)]
    if unprefixed:
        return f"{len(unprefixed)} key(s) lack the {COMFY_PREFIX!r} prefix, e.g. {unprefixed[0]!r}"
    not_lora = [k for k in keys if not k.endswith(LORA_SUFFIXES)]
    if not_lora:
        return f"{len(not_lora)} key(s) are not LoRA factors (lora_A/lora_B), e.g. {not_lora[0]!r}"
    a_side = {k[: -len(LORA_SUFFIXES[0])] for k in keys if k.endswith(LORA_SUFFIXES[0])}
    b_side = {k[: -len(LORA_SUFFIXES[1])] for k in keys if k.endswith(LORA_SUFFIXES[1])}
    unpaired = sorted(a_side ^ b_side)
    if unpaired:
        return f"{len(unpaired)} module(s) have lora_A without lora_B or the reverse, e.g. {unpaired[0]!r}"
    return None
