"""A failed smoke command's diagnosis: the trainer's own evidence line and the fix, from its log."""

from __future__ import annotations

from pathlib import Path

from ltx_pipeline.trainer_log import classify_failure, read_tail

__all__ = ["diagnose_log"]

# On a machine without a GPU the trainer logs this at every statistic; it is not a failure (facts §3.5).
_HARMLESS = ("Failed to get GPU memory from nvidia-smi",)


def diagnose_log(exit_code: int, log: Path) -> tuple[str, str]:
    """``(diagnosis, fix)`` for a command that exited ``exit_code`` (-1: timed out) with its output in ``log``."""
    if exit_code == -1:
        return "it did not finish in time", f"read {log}; run it again on an idle machine"
    tail = [line for line in read_tail(log, 200) if not any(h in line for h in _HARMLESS)]
    failure = classify_failure(exit_code, None, tail)
    advice = " ".join(step.reason if step.path is None else f"set {step.path}: {step.value} ({step.reason})"
                      for step in failure.fix[:2])
    return f"exit {exit_code}, {failure.kind}: {failure.evidence}", advice or f"read {log}"
