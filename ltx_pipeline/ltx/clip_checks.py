"""Checks on the clips themselves, from the probe's measurements: too short for the buckets, and the
spread of frame rates and sizes the trainer will meet (it converts none of them). Sound is decided in
the plan (``ltx.audio_choice``)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from ltx_pipeline.ltx.buckets import TEMPORAL_FACTOR, Bucket
from ltx_pipeline.ltx.data_check import Check, name_some

__all__ = ["check_clip_lengths", "check_media_facts", "usable_rows"]


def usable_rows(rows: int, media: Iterable[str], media_dir: Path, frame_counts: Mapping[str, int | None],
                stages: Iterable[Iterable[Bucket]]) -> int:
    """The rows every stage's preprocessing keeps: ``rows`` less the clips (``media``, as the metadata names them,
    relative to ``media_dir``) shorter than a stage's smallest bucket, which it skips (facts §6.3); the fewest over
    the stages. A clip the probe did not measure counts as kept. Batch sizes and ranks are judged on this count:
    a batch larger than the samples left gives the trainer an epoch with no batch (drop_last)."""
    frames = {str(Path(clip).resolve()): n for clip, n in frame_counts.items()}
    lengths = [frames.get(str((media_dir / value).resolve())) for value in media]
    kept = rows
    for buckets in stages:
        shortest = min((bucket.frames for bucket in buckets), default=0)
        short = sum(1 for n in lengths if n is not None and n < shortest)
        kept = min(kept, max(0, rows - short))
    return kept


def check_clip_lengths(frame_counts: Mapping[str, int | None], buckets: Iterable[Bucket]) -> list[Check]:
    """Name the clips too short for every planned bucket.

    Preprocessing skips, with only a warning in its log, any clip with fewer frames than the
    smallest bucket's F (facts §6.3), so the loss is surfaced here with the three ways out.

    Args:
        frame_counts: clip -> frame count (None where it could not be measured).
        buckets: the planned buckets.

    Returns:
        ``short-clip`` (warning; error ``no-usable-clips`` when every measured clip is short) and
        ``unmeasured-clip`` (info) findings.
    """
    planned = list(buckets)
    if not planned or not frame_counts:
        return []
    shortest = min(planned, key=lambda bucket: bucket.frames)
    short = {clip: n for clip, n in frame_counts.items() if n is not None and n < shortest.frames}
    unmeasured = [clip for clip, n in frame_counts.items() if n is None]
    checks: list[Check] = []
    measured = len(frame_counts) - len(unmeasured)
    if short:
        fewest = min(short.values())
        fits = max(1, (fewest - 1) // TEMPORAL_FACTOR * TEMPORAL_FACTOR + 1)
        smaller = Bucket(shortest.width, shortest.height, fits)
        everyone = len(short) == measured
        fix = (f"choose one: (1) a smaller bucket such as {smaller} for all clips; (2) an extra shorter bucket "
               f"{smaller} beside the others (several buckets force optimization.batch_size: 1); "
               f"(3) accept losing {'them' if not everyone else 'all clips (nothing would train)'}")
        named = [f"{Path(clip).name} ({n} frames)" for clip, n in sorted(short.items())]
        checks.append(Check("error" if everyone else "warning", "no-usable-clips" if everyone else "short-clip",
                            f"{len(short)} of {measured} clip(s) are shorter than the smallest bucket {shortest} "
                            f"({shortest.frames} frames) and would be skipped by preprocessing: {name_some(named)}",
                            "buckets", fix))
    if unmeasured:
        checks.append(Check("info", "unmeasured-clip",
                            f"{len(unmeasured)} clip(s) could not be measured: "
                            f"{name_some(Path(c).name for c in unmeasured)}", None,
                            "re-encode them (PyAV could not count their frames); reconciliation after "
                            "preprocessing will name any that were skipped"))
    return checks


def check_media_facts(facts: Mapping[str, Mapping[str, Any]]) -> list[Check]:
    """The spread of frame rates and sizes the probe measured.

    Clips without sound are the plan's business (``ltx.audio_choice``): it decides before approval
    whether the run trains audio, and on which clips.

    Args:
        facts: clip -> the probe's facts (``kind``, ``fps``, ``width``, ``height``).
    """
    if not facts:
        return []
    videos = {clip: f for clip, f in facts.items() if f.get("kind") == "video"}
    rates = Counter(round(float(f["fps"]), 3) for f in videos.values())
    sizes = Counter(f"{f['width']}x{f['height']}" for f in facts.values())
    rate_text = ", ".join(f"{rate:g} fps ({n})" for rate, n in sorted(rates.items())) or "no video clips"
    size_text = ", ".join(f"{size} ({n})" for size, n in sizes.most_common(5))
    more = f" and {len(sizes) - 5} more size(s)" if len(sizes) > 5 else ""
    return [Check("info", "media-spread", f"{len(facts)} clip(s) measured: {rate_text}; sizes {size_text}{more}",
                  None, "preprocessing resizes and centre-crops every clip to its bucket and keeps its frames "
                        "as they are (no frame-rate conversion)")]
