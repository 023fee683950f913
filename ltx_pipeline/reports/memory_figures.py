"""Memory figures in words for people: one formatter, so a small toy's peak never reads ``0.00 GB``."""

from __future__ import annotations

__all__ = ["NOT_MEASURED", "format_gb"]

NOT_MEASURED = "not measured"


def format_gb(value: float | None, *, missing: str = NOT_MEASURED, places: int = 1) -> str:
    """A memory figure for people: never ``0.0`` for a small measurement, ``missing`` when there is none.

    Zero is not a measurement of anything that ran, so it reads as ``missing`` too. ``places`` is the decimals of a
    figure of 1 GiB or more (run-summary.md gives two, as the trainer prints its own peak).
    """
    if value is None or value <= 0:
        return missing
    if value >= 1:
        return f"{value:.{places}f} GiB"
    if value >= 0.01:
        return f"{value:.2f} GiB"
    return f"{value * 1024:.1f} MiB"
