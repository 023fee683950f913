"""The smoke test's record and the probe's "Smoke test" finding: offered, passed, failed (a blocker), stale."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from ltx_pipeline.backends.ltx import LtxBackend
from ltx_pipeline.smoke import SmokeRecord, save_record
from ltx_pipeline.smoke.finding import SMOKE_ITEM, smoke_finding
from ltx_pipeline.smoke.identity import smoke_command, smoke_identity
from tests.conftest import make_tree

TRAINER = "packages/ltx-trainer"


def _checkout_and_env(tmp_path: Path) -> tuple[LtxBackend, Path]:
    root = tmp_path / "LTX-2"
    make_tree(root, {f"{TRAINER}/configs/t2v_lora.yaml": "model: {}\n", f"{TRAINER}/scripts/train.py": "",
                     f"{TRAINER}/scripts/process_dataset.py": "", f"{TRAINER}/src/ltx_trainer/__init__.py": ""})
    python = tmp_path / "env" / "bin" / "python"
    python.parent.mkdir(parents=True)
    python.write_text("#!/bin/sh\n")
    python.chmod(python.stat().st_mode | stat.S_IXUSR)
    (tmp_path / "env" / "lib" / "python3.11" / "site-packages").mkdir(parents=True)
    return LtxBackend(root, python=python), tmp_path / "ws"


def _record(backend: LtxBackend, passed: bool) -> SmokeRecord:
    return SmokeRecord(key=smoke_identity(backend, "t2v"), passed=passed, mode="t2v", finished_at="2026-12-05T10:00:00",
                       seconds=61.0, trainer_root=str(backend.root), environment=backend.environment_words,
                       command=smoke_command(backend, "t2v"), failed_step=None if passed else "environment",
                       diagnosis=None if passed else "module 'pandas' is not installed",
                       fix=None if passed else "pip install pandas")


def test_not_run_is_offered_with_the_command(tmp_path: Path) -> None:
    backend, workspace = _checkout_and_env(tmp_path)
    finding = smoke_finding(backend, workspace, "t2v")
    assert finding is not None and finding.item == SMOKE_ITEM and finding.status == "warning"
    assert f"--trainer-python {backend.python}" in (finding.next_step or "")
    assert SMOKE_ITEM in backend.heavy_prerequisites  # a failed one blocks approval


def test_a_failed_smoke_test_is_missing_with_its_fix_and_a_pass_is_ok(tmp_path: Path) -> None:
    backend, workspace = _checkout_and_env(tmp_path)
    save_record(workspace, _record(backend, passed=False))
    failed = smoke_finding(backend, workspace, "t2v")
    assert failed is not None and failed.status == "missing"
    assert "pandas" in failed.detail and "pip install pandas" in (failed.next_step or "")
    assert smoke_command(backend, "t2v") in (failed.next_step or "")
    save_record(workspace, _record(backend, passed=True))
    passed = smoke_finding(backend, workspace, "t2v")
    assert passed is not None and passed.status == "ok" and "61 s" in passed.detail


def test_installing_a_package_makes_the_record_stale(tmp_path: Path) -> None:
    backend, workspace = _checkout_and_env(tmp_path)
    save_record(workspace, _record(backend, passed=True))
    site = tmp_path / "env" / "lib" / "python3.11" / "site-packages"
    before = site.stat().st_mtime_ns
    (site / "pandas").mkdir()  # what pip does
    os.utime(site, ns=(before + 10**9, before + 10**9))
    finding = smoke_finding(backend, workspace, "t2v")
    assert finding is not None and finding.status == "warning", "the environment changed: offered again"
