"""Training data: the trainer's precomputed ``.pt`` layout, and the toy "text encoder".

Owns sample discovery as ltx-trainer's ``PrecomputedDataset`` does it (facts §6.4): descend into
``.precomputed`` when present, require every source directory, take ``latents`` (else the first
source) as primary, keep only relative paths present in every source (legacy
``latent_X`` -> ``condition_X`` for conditions), and raise the trainer's messages when nothing is
left. Also owns ``encode_caption``: a deterministic, hash-seeded stand-in for Gemma used by both
preprocessing and validation, so the same words give the same features everywhere.
"""

from __future__ import annotations

import hashlib
import logging
from pathlib import Path

import torch
from torch.utils.data import Dataset

__all__ = ["PrecomputedSamples", "caption_salt", "encode_caption"]

logger = logging.getLogger("ltxv_trainer")


def _word_vector(word: str, dim: int, salt: str) -> torch.Tensor:
    digest = hashlib.sha256(f"{salt}\0{word}".encode()).digest()
    generator = torch.Generator().manual_seed(int.from_bytes(digest[:8], "little"))
    return torch.randn(dim, generator=generator)


def encode_caption(caption: str, length: int, dim: int, salt: str = "") -> tuple[torch.Tensor, torch.Tensor]:
    """Caption -> (features [length, dim] float32, attention mask [length] bool), left-padded.

    One hash-seeded vector per lower-cased word (``salt`` ties features to a base model), the
    way a text encoder's pre-connector features are left-padded to a fixed length; words past
    ``length`` are truncated.
    """
    words = caption.lower().split()[:length]
    embeds = torch.zeros(length, dim)
    mask = torch.zeros(length, dtype=torch.bool)
    start = length - len(words)
    for offset, word in enumerate(words):
        embeds[start + offset] = _word_vector(word, dim, salt)
    mask[start:] = True
    return embeds, mask


def caption_salt(arch) -> str:  # noqa: ANN001 - ToyArchitecture
    """Ties caption features to a base model: preprocessing and validation must agree on it."""
    return f"{arch.seed}:{arch.text_dim}"


def _condition_name(relative: Path) -> Path:
    if relative.name.startswith("latent_"):
        return relative.with_name("condition_" + relative.name[len("latent_"):])
    return relative


class PrecomputedSamples(Dataset):
    """Samples found under ``data_root`` for the given ``{dir_name: output_key}`` sources."""

    def __init__(self, data_root: str | Path, sources: dict[str, str]) -> None:
        root = Path(data_root).expanduser().resolve()
        if not root.exists():
            raise FileNotFoundError(f"Data root directory does not exist: {root}")
        if (root / ".precomputed").is_dir():
            root = root / ".precomputed"
        self.root = root
        self.sources = dict(sources)
        dirs = {name: root / name for name in self.sources}
        for name, path in dirs.items():
            if not path.is_dir():
                raise FileNotFoundError(f"Required {name} directory does not exist: {path}")
        primary = "latents" if "latents" in self.sources else next(iter(self.sources))
        primary_files = sorted(dirs[primary].rglob("*.pt"))
        if not primary_files:
            raise ValueError(f"No data files found in {dirs[primary]}")
        counts = {name: sum(1 for _ in path.rglob("*.pt")) for name, path in dirs.items()}
        self.samples: list[dict[str, Path]] = []
        for file in primary_files:
            relative = file.relative_to(dirs[primary])
            sample = {}
            for name, path in dirs.items():
                candidate = path / (_condition_name(relative) if name == "conditions" else relative)
                if not candidate.is_file() and name == "conditions":
                    candidate = path / relative
                if candidate.is_file():
                    sample[self.sources[name]] = candidate
                else:
                    logger.debug(f"Skipping {relative}: no matching file in {name}/")
                    break
            else:
                self.samples.append(sample)
        skipped = len(primary_files) - len(self.samples)
        if not self.samples:
            raise ValueError(
                f"No valid samples found in {root} - all configured data sources "
                f"({list(self.sources)}) must have matching files (per-source counts: {counts})"
            )
        if skipped:
            logger.info(f"Skipped {skipped} invalid samples from {len(primary_files)} total")

    def __len__(self) -> int:
        return len(self.samples)

    def __getitem__(self, index: int) -> dict:
        item: dict = {"idx": index}
        for key, file in self.samples[index].items():
            try:
                item[key] = torch.load(file, map_location="cpu", weights_only=True)
            except Exception as error:  # noqa: BLE001 - the trainer wraps every load error the same way
                raise RuntimeError(f"Failed to load {key} from {file}: {error}") from error
        return item
