"""mypy passes with the repository's configuration (``[tool.mypy]`` in pyproject.toml).

The engine, the store and the LTX rules are checked strictly, the rest of ``ltx_pipeline`` and
``phases`` plainly; the configuration says which modules and how. The first run builds
``.mypy_cache`` (tens of seconds, mostly torch's stubs); later runs take a second or two.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def test_mypy_is_clean_with_the_pyproject_config() -> None:
    pytest.importorskip("mypy", reason="mypy is not installed")
    done = subprocess.run([sys.executable, "-m", "mypy", "--config-file", str(REPO / "pyproject.toml")],
                          capture_output=True, text=True, cwd=REPO, check=False, timeout=280)
    assert done.returncode == 0, f"mypy failed (exit {done.returncode}):\n{done.stdout}{done.stderr}"
