"""Model files recognised by content, never loaded and never trusted by name alone.

Owns reading a safetensors header (8 bytes of length, then JSON naming every tensor, each inside the file),
the LTX checkpoint's own description in its ``__metadata__``, and whether a folder is a Gemma text encoder
from its ``config.json``. ``probing/models.py`` searches the model folders and checks the user's paths with
these; nothing here raises for a bad file: each answer is ``(result, None)`` or ``(None, why)``.
"""

from __future__ import annotations

import json
import os
import struct
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

__all__ = ["NEEDS_GEMMA", "ModelKind", "file_kind", "folder_entries", "gemma_model_type", "metadata_config",
           "safetensors_header"]

_HEADER_LIMIT = 100 * 2**20  # the safetensors format itself refuses headers over 100 MB
_CONFIG_LIMIT = 4 * 2**20
NEEDS_GEMMA = "LTX-2 needs a Gemma text encoder (model_type gemma3)"
ModelKind = Literal["checkpoint", "text_encoder"]


def folder_entries(folder: Path) -> list[os.DirEntry[str]]:
    """The entries of ``folder`` sorted by name; [] when it cannot be listed."""
    try:
        with os.scandir(folder) as entries:
            return sorted(entries, key=lambda entry: entry.name)
    except OSError:
        return []


def safetensors_header(path: Path) -> tuple[dict[str, Any] | None, str | None]:
    """Read a safetensors header without loading any tensor: 8 bytes little-endian length N, N bytes of JSON.

    Returns:
        ``(header, None)`` when N is sane (2 bytes to 100 MB, inside the file), the header is a JSON
        object naming at least one tensor (``dtype``, ``shape``, ``data_offsets``; ``__metadata__``
        optional) and every tensor's data lies inside the file; else ``(None, why)``.
    """
    try:
        size = path.stat().st_size
        with path.open("rb") as handle:
            prefix = handle.read(8)
            if len(prefix) < 8:
                return None, f"it is {size} bytes, too short to hold a safetensors header"
            (length,) = struct.unpack("<Q", prefix)
            if not 2 <= length <= min(_HEADER_LIMIT, size - 8):
                return None, f"it is {size} bytes and its first 8 bytes give a header length of {length}"
            raw = handle.read(length)
    except OSError as exc:
        return None, f"it cannot be read ({exc.strerror or exc})"
    try:
        header = json.loads(raw.decode("utf-8"))
    except ValueError:  # UnicodeDecodeError and JSONDecodeError are both ValueErrors
        return None, "its header is not JSON"
    if not isinstance(header, dict):
        return None, "its header is not a JSON object"
    if not isinstance(header.get("__metadata__", {}), dict):
        return None, "its __metadata__ is not a JSON object"
    ends = [_tensor_end(info) for name, info in header.items() if name != "__metadata__"]
    if not ends:
        return None, "its header lists no tensors"
    if None in ends:
        return None, "its header has a tensor without a valid dtype, shape and data_offsets"
    data, needed = size - 8 - length, max(e for e in ends if e is not None)
    if needed > data:
        return None, f"its header describes {needed} bytes of tensor data but only {data} follow (a truncated file?)"
    return header, None


def _tensor_end(info: Any) -> int | None:
    """The end offset of one tensor's data, or None when its entry is malformed."""
    if not isinstance(info, dict) or not isinstance(info.get("dtype"), str):
        return None
    shape, offsets = info.get("shape"), info.get("data_offsets")
    if not isinstance(shape, list) or not all(isinstance(d, int) and d >= 0 for d in shape):
        return None
    if not (isinstance(offsets, list) and len(offsets) == 2 and all(isinstance(o, int) for o in offsets)):
        return None
    return offsets[1] if 0 <= offsets[0] <= offsets[1] else None


def metadata_config(header: Mapping[str, Any]) -> dict[str, Any] | None:
    """The JSON object in the header's ``__metadata__["config"]`` (LTX checkpoints carry one), or None."""
    raw = (header.get("__metadata__") or {}).get("config")
    try:
        config = json.loads(raw) if isinstance(raw, str) else None
    except ValueError:
        return None
    return config if isinstance(config, dict) else None


def gemma_model_type(folder: Path) -> tuple[str | None, str | None]:
    """Whether ``folder`` is a Gemma text encoder, from its ``config.json`` alone.

    Returns:
        ``(model_type, None)`` when ``model_type`` (or ``text_config.model_type``) starts with "gemma"
        (gemma3, gemma3_text, gemma2, ...); else ``(None, why)``: "/m/x/config.json says model_type 'llama'; ...".
    """
    config = folder / "config.json"
    if not config.is_file():
        return None, f"{folder} has no config.json, so it is not a model folder; {NEEDS_GEMMA}"
    try:
        if config.stat().st_size > _CONFIG_LIMIT:
            return None, f"{config} is over 4 MB, not a model config; {NEEDS_GEMMA}"
        data = json.loads(config.read_text(encoding="utf-8"))
    except OSError as exc:
        return None, f"{config} cannot be read ({exc.strerror or exc})"
    except ValueError:
        return None, f"{config} is not valid JSON; {NEEDS_GEMMA}"
    if not isinstance(data, dict):
        return None, f"{config} is not a JSON object; {NEEDS_GEMMA}"
    text_config = data.get("text_config")
    types = [data.get("model_type"), text_config.get("model_type") if isinstance(text_config, dict) else None]
    named = [t for t in types if isinstance(t, str) and t]
    gemma = next((t for t in named if t.lower().startswith("gemma")), None)
    if gemma:
        return gemma, None
    said = f"says model_type {named[0]!r}" if named else "has no model_type"
    return None, f"{config} {said}; {NEEDS_GEMMA}"


def file_kind(path: Path) -> tuple[ModelKind | None, str | None]:
    """What a ``.safetensors`` file found in a model folder is, by content first, then by name.

    Returns ``(kind, None)``, ``(None, why)`` for a file named like a model ("ltx", "gemma") whose
    header does not parse, or ``(None, None)`` for anything else (a LoRA, a VAE, another model).
    """
    name = path.name.lower()
    header, why = safetensors_header(path)
    if header is None:
        return None, f"{path} is not a valid safetensors file: {why}" if "ltx" in name or "gemma" in name else None
    config = metadata_config(header)
    if config is not None and "transformer" in config:  # the LTX checkpoint's own description
        return "checkpoint", None
    if "gemma" in name:  # a split pack's packed text encoder
        return "text_encoder", None
    return ("checkpoint", None) if config is None and "ltx" in name else (None, None)
