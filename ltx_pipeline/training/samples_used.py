"""How many samples the trainer actually trained on, read from what it wrote.

The trainer keeps only the samples that have a file in every configured data source, and says how
many it dropped in one line (``Skipped N invalid samples from M total``, logged only when N > 0).
Without that line every primary latent file under the stage's ``.precomputed`` was used. The
figure is what ``run-summary.md`` and ``status`` report; a training that dropped samples the plan
counted fails after its summary is written (the weights stay), with the fix.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ltx_pipeline.errors import RunFailed
from ltx_pipeline.trainer_log import DatasetLoaded, SamplesSkipped, parse_lines

__all__ = ["check_samples_used", "samples_used"]


def samples_used(log_path: str | Path, preprocessed_root: str | Path | None) -> dict[str, Any]:
    """``{"used", "total", "skipped", "source", "log"}`` for one stage's training.

    ``used`` is None when neither the log nor the precomputed folder says (a log not written yet).
    """
    log = Path(log_path)
    try:
        text = log.read_text(encoding="utf-8", errors="replace")
    except OSError:
        text = ""
    events = parse_lines(text.splitlines())
    skips = [e for e in events if isinstance(e, SamplesSkipped)]
    loaded = [e for e in events if isinstance(e, DatasetLoaded)]
    if skips:  # the last attempt's dataset load is the one that trained
        last = skips[-1]
        return {"used": last.total - last.skipped, "total": last.total, "skipped": last.skipped,
                "source": f"the trainer's `Skipped {last.skipped} invalid samples from {last.total} total`",
                "log": str(log)}
    if loaded:
        return {"used": loaded[-1].samples, "total": loaded[-1].samples, "skipped": 0,
                "source": "the trainer's `Loaded dataset with N samples`", "log": str(log)}
    files = _primary_files(Path(preprocessed_root)) if preprocessed_root else None
    return {"used": files, "total": files, "skipped": 0 if files is not None else None,
            "source": "the precomputed latent files (the trainer logged no skipped samples)", "log": str(log)}


def check_samples_used(stages: list[dict[str, Any]], planned: int, agreed: int = 0) -> None:
    """Fail when a stage's trainer dropped samples the plan counted on.

    ``agreed``: skips the plan announced (``--audio on`` over a reused ``.precomputed``: its silent
    samples have no audio latents and only the trainer can leave them out).

    Raises:
        RunFailed: naming the stage, how many were used of how many, where it was read, and the fix.
    """
    for stage in stages:
        used = stage.get("samples_used") or {}
        if (used.get("skipped") or 0) > agreed:
            raise RunFailed(f"Stage {stage['stage']} trained on {used['used']} of {used['total']} sample(s): the "
                            f"trainer skipped {used['skipped']} with a missing data source (planned {planned}); "
                            "the weights were kept but were not trained on the data you approved",
                            where=used["log"],
                            fix="for clips without sound, rerun with --audio off (video only on every clip) or "
                                "--audio on (the silent clips left out before training); else check that "
                                "every sample has a file in each .precomputed subfolder the config names")


def _primary_files(root: Path) -> int | None:
    folder = root / "latents" if (root / "latents").is_dir() else root / "audio_latents"
    if not folder.is_dir():
        return None
    return sum(1 for path in folder.rglob("*.pt") if path.is_file())


def samples_text(planned: int, stages: list[dict[str, Any]]) -> tuple[str, list[str]]:
    """The dataset's sample words for run-summary.md and the loud lines when a trainer dropped samples.

    Returns:
        ``"N sample(s) trained on"`` (with the plan's count when they differ) and one ``**Warning**``
        line per stage whose trainer skipped samples.
    """
    used = [s.get("samples_used") or {} for s in stages]
    figures = {u["used"] for u in used if u.get("used") is not None}
    if not figures:
        words = f"{planned} sample(s) planned; what the trainer used was not logged"
    elif len(figures) == 1:
        (count,) = figures
        words = f"{count} sample(s) trained on" + (f", of {planned} planned" if count != planned else "")
    else:
        words = ", ".join(f"stage {s['stage']}: {u['used']}" for s, u in zip(stages, used, strict=True)
                          if u.get("used") is not None) + f" sample(s) trained on, of {planned} planned"
    loud = [f"- **Warning: stage {s['stage']} trained on {u['used']} of {u['total']} sample(s)**: the trainer "
            f"skipped {u['skipped']} ({u['source']} in `{u['log']}`)" for s, u in zip(stages, used, strict=True)
            if u.get("skipped")]
    return words, loud
