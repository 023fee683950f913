"""The probe's "Smoke test" finding for the ltx backend: offered, passed, or failed (an approval blocker).

Reads the record ``ltx-pipeline smoke`` left for this checkout + environment + mode; never runs anything.
"""

from __future__ import annotations

from pathlib import Path

from ltx_pipeline.backends.ltx import LtxBackend
from ltx_pipeline.probing import Finding
from ltx_pipeline.smoke.cache import load_record, record_path
from ltx_pipeline.smoke.identity import smoke_command, smoke_identity
from ltx_pipeline.smoke.run import SMOKE_MODES

__all__ = ["SMOKE_ITEM", "smoke_finding", "smoke_record_file"]

SMOKE_ITEM = "Smoke test"


def _mode(mode: str) -> str:
    return mode if mode in SMOKE_MODES else "t2v"


def smoke_record_file(backend: LtxBackend, workspace: Path, mode: str) -> Path | None:
    """Where this checkout + environment's record is (or would be); None when the checkout is unusable."""
    if backend.environment_problem() is not None:
        return None
    return record_path(workspace, smoke_identity(backend, _mode(mode)))


def smoke_finding(backend: LtxBackend, workspace: Path, mode: str) -> Finding | None:
    """The finding, or None when the checkout or environment cannot run at all (other findings say why)."""
    if backend.environment_problem() is not None:
        return None
    mode = _mode(mode)
    command = smoke_command(backend, mode)
    record = load_record(workspace, smoke_identity(backend, mode))
    if record is None:
        return Finding(SMOKE_ITEM, "warning", "not run for this checkout and environment",
                       f"`{command} --workspace {workspace}` runs your trainer end to end on a tiny model in about "
                       "a minute, and finds a broken environment before a 22B model loads")
    if record.passed:
        return Finding(SMOKE_ITEM, "ok", f"passed {record.finished_at[:16].replace('T', ' ')} UTC in "
                                         f"{record.seconds:.0f} s ({record.mode})")
    return Finding(SMOKE_ITEM, "missing", f"failed at {record.failed_step}: {record.diagnosis}",
                   f"{record.fix}; then `{command} --workspace {workspace}` clears this")
