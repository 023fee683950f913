"""The room map is enforced mechanically: import-linter contracts and ruff run as tests."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def test_import_contracts_hold() -> None:
    from importlinter.cli import lint_imports

    assert lint_imports(config_filename=str(REPO / "pyproject.toml")) == 0


def test_ruff_is_clean() -> None:
    ruff = shutil.which("ruff") or str(Path(sys.executable).parent / "ruff")
    if not Path(ruff).exists():
        pytest.skip("ruff is not installed")
    done = subprocess.run([ruff, "check", "--quiet", str(REPO)], capture_output=True, text=True, cwd=REPO)
    assert done.returncode == 0, done.stdout + done.stderr


def test_no_shell_subprocesses_in_shipped_code() -> None:
    offenders = [str(p) for folder in ("ltx_pipeline", "phases") for p in (REPO / folder).rglob("*.py")
                 if "shell=True" in p.read_text() or "os.system(" in p.read_text()]
    assert offenders == []
