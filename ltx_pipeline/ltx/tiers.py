"""VRAM tiers (seed 000): map a GPU's memory to the starting config the trainer ships.

nvidia-smi reports usable memory a little below a card's nominal size (an RTX 5090 shows 32607 MiB,
an L40 46068 MiB), so a card is first classified by its marketed size, then tiered. The smallest
card among the visible GPUs sets the tier: more GPUs add throughput, not per-GPU memory.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["MINIMUM_GB", "Tier", "classify_tier", "nominal_gb"]

MINIMUM_GB = 32
# Marketed memory sizes of data-centre and workstation cards, in GB.
_NOMINAL_SIZES = (8, 10, 11, 12, 16, 20, 24, 32, 40, 48, 64, 80, 94, 96, 120, 128, 141, 144, 180, 192, 256, 288)
_TOLERANCE = 0.08  # usable memory is up to ~7% below the marketed size (46068 MiB on a 48 GB L40)


@dataclass(frozen=True)
class Tier:
    """A VRAM tier: its user-facing name, base config and autotune baseline."""

    key: str
    name: str
    base: str  # "low_vram" or "standard"
    below_minimum: bool = False


TIER_32 = Tier("32gb", "32GB tier", "low_vram")
TIER_40_60 = Tier("40_60gb", "40–60GB tier", "low_vram")
TIER_80 = Tier("80gb_plus", "80GB+ tier", "standard")
BELOW_MINIMUM = Tier("below_minimum", "below the 32GB minimum", "low_vram", below_minimum=True)


def nominal_gb(memory_mib: int) -> int:
    """The marketed size of a card whose nvidia-smi ``memory.total`` is ``memory_mib``."""
    gib = memory_mib / 1024
    for size in _NOMINAL_SIZES:
        if gib <= size and gib >= size * (1 - _TOLERANCE):
            return size
    return int(gib)


def classify_tier(memory_mib_per_gpu: list[int]) -> tuple[Tier, int]:
    """Tier for the smallest of the visible GPUs, with that GPU's nominal size in GB."""
    smallest = nominal_gb(min(memory_mib_per_gpu))
    if smallest < MINIMUM_GB:
        return BELOW_MINIMUM, smallest
    if smallest < 40:
        return TIER_32, smallest
    if smallest < 80:
        return TIER_40_60, smallest
    return TIER_80, smallest
