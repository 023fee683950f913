"""Writing the outputs: bf16 safetensors, JSON sidecars, and staging a file or folder so it appears atomically.

A reader (the trainer, a concurrent build) must never see a half-written checkpoint or Gemma folder, so each
output is written under a temporary sibling name and renamed into place only once it is complete and checked.

Part of ``build_tiny_model.py``, a standalone script run with the *trainer's* interpreter: like it, this module
imports nothing from ltx_pipeline, only the standard library here and the trainer's own packages (torch,
ltx-core, transformers) lazily inside functions. The script's folder is ``sys.path[0]``, so it imports this
module as a sibling; the folder is deliberately not a package.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch


def save_safetensors(tensors: dict[str, torch.Tensor], path: Path, metadata: dict[str, str]) -> None:
    """Save in bf16 (as the released checkpoints are), as independent contiguous tensors."""
    import torch
    from safetensors.torch import save_file

    def stored(value: torch.Tensor) -> torch.Tensor:
        value = value.detach().to(torch.bfloat16) if value.is_floating_point() else value.detach()
        return value.contiguous().clone()

    for name, value in tensors.items():
        if value.is_floating_point() and not torch.isfinite(value).all():
            raise RuntimeError(f"non-finite values in {name}")
    save_file({name: stored(value) for name, value in tensors.items()}, str(path), metadata=metadata)
    # safetensors creates its files 0600; give them the usual umask-based mode like the JSON files.
    umask = os.umask(0)
    os.umask(umask)
    path.chmod(0o666 & ~umask)


def write_json(path: Path, payload: dict[str, Any]) -> None:
    path.write_text(json.dumps(payload, indent=2, sort_keys=True) + "\n", encoding="utf-8")


@contextlib.contextmanager
def staged(final: Path) -> Iterator[Path]:
    """Yield a temp sibling of ``final``; on success move it into place atomically, on failure remove it.

    A folder cannot be swapped in one os.replace over a non-empty folder, so an old one is first moved
    aside; a reader then sees the old folder, nothing for an instant, or the new one, never a mixture.
    """
    temp = final.with_name(f".{final.name}.tmp-{os.getpid()}")
    old = final.with_name(f".{final.name}.old-{os.getpid()}")
    _remove(temp)
    try:
        yield temp
        if final.is_dir():
            os.replace(final, old)
        os.replace(temp, final)
    finally:
        _remove(temp)
        _remove(old)


def _remove(path: Path) -> None:
    if path.is_dir():
        shutil.rmtree(path)
    elif path.exists():
        path.unlink()
