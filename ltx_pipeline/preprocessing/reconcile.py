"""Reconciling what a preprocessing wrote against the metadata it was given.

Owns the rule that a preprocessing which exited 0 but wrote fewer samples than rows fails, naming each
left-out file with the reason its log gave (``MediaSkipped`` lines of this run's part of the appended
log), except clips too short for every bucket: the data check named those before approval, so they are
only narrated. Used by ``preprocessing.run`` whether the samples were encoded or came from the cache.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ltx_pipeline.errors import RunFailed
from ltx_pipeline.ltx.buckets import Bucket
from ltx_pipeline.ltx.modes import Mode
from ltx_pipeline.trainer_log import MediaSkipped, parse_lines

__all__ = ["reconcile_written", "skipped_in"]


def skipped_in(log: Path, offset: int) -> list[MediaSkipped]:
    """The files this preprocessing run said it left out (its part of the appended log)."""
    try:
        with log.open("rb") as handle:
            handle.seek(offset)
            text = handle.read().decode("utf-8", errors="replace")
    except OSError:
        return []
    return [event for event in parse_lines(text.splitlines()) if isinstance(event, MediaSkipped)]


def reconcile_written(ctx: Any, report: Any, media: list[str], media_dir: Path, mode: Mode,
                       buckets: tuple[Bucket, ...], skipped: list[MediaSkipped], log: Path) -> set[str]:
    """Fail when a preprocessing that exited 0 wrote fewer samples than it was given, except for the
    clips too short for every bucket: the data check named those before the plan was approved, so
    losing them is the user's choice (they are still named here, with the log's reason). Returns those
    clips (as the metadata names them; empty when none was left out).

    Raises:
        RunFailed: nothing written, or a clip left out for any other reason (unreadable, no reason
            in the log): expected N, wrote M, each file with why.
    """
    primary = "latents" if mode.video_media else "audio_latents"
    missing = list(report.dropped.get(primary, ()))
    if report.counts.get(primary, 0) == 0:
        missing = list(media)
    if not missing:
        return set()
    reasons = _reasons_by_clip(skipped, media_dir)
    smallest = min(bucket.frames for bucket in buckets) if buckets else 0
    why = {clip: reasons.get(_clip_key(clip, media_dir)) or reasons.get(Path(clip).name) for clip in missing}
    foreseen = {clip for clip, reason in why.items() if reason and "fewer than the smallest bucket" in reason}
    wrote = len(media) - len(missing)
    if wrote > 0 and len(foreseen) == len(missing):
        ctx.narrate(f"Preprocessing left out {len(missing)} clip(s) shorter than the smallest bucket "
                    f"({smallest} frames), as the data check said: "
                    f"{'; '.join(f'{Path(c).name} ({why[c]})' for c in missing[:10])}")
        return set(missing)
    listed = "; ".join(f"{Path(clip).name} ({why[clip] or 'no reason in the log'})" for clip in missing[:10])
    more = f"; and {len(missing) - 10} more" if len(missing) > 10 else ""
    raise RunFailed(
        f"Preprocessing exited 0 but wrote {wrote} of {len(media)} sample(s) into {report.root}; left out: "
        f"{listed}{more}", where=str(log),
        fix="fix or remove the files named (re-encode unreadable ones, e.g. with PyAV), then run "
            "`ltx-pipeline resume`; clips too short for the bucket need a smaller or an extra shorter bucket")


def _clip_key(clip: str, media_dir: Path) -> str:
    path = Path(clip)
    return str((path if path.is_absolute() else media_dir / path).resolve())


def _reasons_by_clip(skipped: list[MediaSkipped], media_dir: Path) -> dict[str, str]:
    """Skip reasons keyed by resolved path and by file name (logs print paths either way)."""
    reasons: dict[str, str] = {}
    for event in skipped:
        reasons[_clip_key(event.path, media_dir)] = event.reason
        reasons.setdefault(Path(event.path).name, event.reason)
    return reasons
