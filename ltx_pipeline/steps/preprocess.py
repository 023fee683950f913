"""The one preprocessing step autotune (its sanity set) and train (the full set) both use.

Heavy: only phases past the approval gate call it. It runs the backend's preprocess command for a
stage's buckets (mixed: one call with all buckets; chained: one call per stage into its own
folder), supervised and recorded, appending to ``logs/preprocess.log``; it never passes
``--overwrite``. Existing output is verified first and reused when it matches (the trainer's
preprocessing also skips files it already wrote). Afterwards the output is reconciled against
the metadata: every dropped clip is named, the audio gate holds, shapes match the buckets. The
checkpoint/text-encoder pair that made the text conditions is recorded beside them, and output
made with another pair is refused.
"""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path
from typing import Any

from ltx_pipeline.errors import BadDataset, PhaseFailed
from ltx_pipeline.ltx.buckets import Bucket, format_buckets
from ltx_pipeline.ltx.data_check import Check, check_conditions_pairing, has_errors
from ltx_pipeline.ltx.metadata import read_metadata_rows
from ltx_pipeline.ltx.modes import Mode
from ltx_pipeline.ltx.precomputed import inspect_precomputed
from ltx_pipeline.trainer_log import read_tail
from ltx_pipeline.workspace import atomic_write

__all__ = ["PAIRING_FILE", "preprocess", "write_subset_metadata"]

PAIRING_FILE = "ltx-pipeline-conditions.json"


def preprocess(ctx: Any, *, mode: Mode, metadata_file: Path, buckets: tuple[Bucket, ...], output_dir: Path,
               stage: int, model_path: str, text_encoder_path: str, pairing: dict[str, Any] | None,
               extra_flags: list[str]) -> dict[str, Any]:
    """Make sure ``output_dir`` holds this stage's latents; return the reconciliation report.

    Raises:
        BadDataset: the output was made for other buckets or another model pair, or fails the audio gate.
        PhaseFailed: the preprocessing command failed (with the tail of its log).
    """
    media = _primary_media(metadata_file, mode)
    if output_dir.is_dir() and any(output_dir.iterdir()):
        _refuse_other_pair(output_dir, pairing)
        report = inspect_precomputed(output_dir, mode, list(buckets), load=_load, metadata_media=media,
                                     metadata_dir=metadata_file.parent)
        if report.ok and not report.dropped:
            ctx.narrate(f"Stage {stage}: {output_dir} already holds {report.usable_samples} matching sample(s); "
                        "reusing it.")
            return _summary(report, reused=True)
        _refuse_mismatch(report.checks, output_dir)
    ctx.narrate(f"Preprocessing {metadata_file.name} at {format_buckets(buckets)} into {output_dir} "
                "(resolution-specific latents; this can take a while on large datasets).")
    spec = ctx.backend.preprocess_command(metadata_file, format_buckets(buckets), output_dir, model_path=model_path,
                                          text_encoder_path=text_encoder_path, trigger=ctx.request.trigger,
                                          extra_flags=extra_flags)
    log = ctx.paths.logs / "preprocess.log"
    handle = ctx.journal.run_to_end("preprocess", stage, spec, log)
    record = handle.exit()
    if record is None or record["exit_code"] != 0:
        tail = " | ".join(line.strip() for line in read_tail(log, 3) if line.strip())
        raise PhaseFailed(ctx.phase, 0, f"preprocessing failed ({'killed' if record is None else record})"
                          f": {tail}", str(log))
    if pairing is not None:
        atomic_write(output_dir / PAIRING_FILE, json.dumps(pairing, indent=2), root=ctx.workspace)
    report = inspect_precomputed(output_dir, mode, list(buckets), load=_load, metadata_media=media,
                                 metadata_dir=metadata_file.parent)
    for check in report.checks:
        if check.severity == "warning":
            ctx.warn(check.line())
    if has_errors(report.checks):
        first = next(c for c in report.checks if c.severity == "error")
        raise BadDataset(f"Preprocessed data failed its check: {first.message}", where=str(output_dir),
                         fix=first.fix or "see logs/preprocess.log")
    return _summary(report, reused=False)


def write_subset_metadata(ctx: Any, metadata_file: Path, rows: int, target: Path) -> tuple[Path, int]:
    """A metadata file holding the first ``rows`` rows, media paths made absolute (it lives in the run)."""
    data = read_metadata_rows(metadata_file)[:rows]
    media_keys = ("video", "media_path", "audio", "reference_video", "ref_media_path", "reference_audio",
                  "video_mask", "audio_mask")
    for row in data:
        for key in media_keys:
            if row.get(key) and not Path(str(row[key])).is_absolute():
                row[key] = str((metadata_file.parent / str(row[key])).resolve())
    atomic_write(target, json.dumps(data, indent=2), root=ctx.workspace)
    return target, len(data)


def _primary_media(metadata_file: Path, mode: Mode) -> list[str]:
    column = "video" if mode.video_media else "audio"
    rows = read_metadata_rows(metadata_file)
    names = [str(r.get(column) or r.get("media_path") or "") for r in rows]
    return [n for n in names if n]


def _refuse_other_pair(output_dir: Path, pairing: dict[str, Any] | None) -> None:
    record = output_dir / PAIRING_FILE
    if pairing is None or not record.is_file():
        return
    checks = check_conditions_pairing(json.loads(record.read_text(encoding="utf-8")), pairing)
    if has_errors(checks):
        raise BadDataset(checks[0].message, where=str(output_dir), fix=checks[0].fix or "preprocess elsewhere")


def _refuse_mismatch(checks: list[Check], output_dir: Path) -> None:
    mismatch = next((c for c in checks if c.code in ("shape-mismatch", "bad-sample")), None)
    if mismatch is not None:
        raise BadDataset(mismatch.message, where=str(output_dir),
                         fix=mismatch.fix or "preprocess into a new folder; existing data is never overwritten")


def _summary(report: Any, reused: bool) -> dict[str, Any]:
    return {"root": report.root, "samples": report.usable_samples, "counts": report.counts,
            "dropped": {k: list(v) for k, v in report.dropped.items()}, "reused": reused,
            "checks": [asdict(c) for c in report.checks]}


def _load(path: Path) -> dict[str, Any]:
    import torch  # only while verifying preprocessed samples

    return torch.load(path, weights_only=True, map_location="cpu")
