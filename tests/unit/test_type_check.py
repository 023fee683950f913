"""mypy passes with the repository's configuration (``[tool.mypy]`` in pyproject.toml).

Every module of ``ltx_pipeline`` and ``phases`` is checked as ``mypy --strict`` checks it; only the toy
trainer (``ltx_pipeline.reference_trainer``, a separate program) may have its errors ignored, and the
second test holds that line. The first run builds ``.mypy_cache`` (tens of seconds, mostly torch's
stubs); later runs take a second or two.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10: mypy's own TOML reader
    import tomli as tomllib

REPO = Path(__file__).resolve().parents[2]
TOY_TRAINER = "ltx_pipeline.reference_trainer"


def _mypy_config() -> dict[str, Any]:
    config: dict[str, Any] = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["mypy"]
    return config


def _modules(override: dict[str, Any]) -> list[str]:
    module = override["module"]
    return [module] if isinstance(module, str) else list(module)


@pytest.mark.long  # 47 s cold on CI's 2 cores (2026-12-07): in the long suite, still run by the README command
@pytest.mark.slow  # 27-33 s on a clean clone (mypy builds its cache): ordered first, so it never runs last alone
def test_mypy_is_clean_with_the_pyproject_config() -> None:
    pytest.importorskip("mypy", reason="mypy is not installed")
    done = subprocess.run([sys.executable, "-m", "mypy", "--config-file", str(REPO / "pyproject.toml")],
                          capture_output=True, text=True, cwd=REPO, check=False, timeout=280)
    assert done.returncode == 0, f"mypy failed (exit {done.returncode}):\n{done.stdout}{done.stderr}"


def test_every_module_is_strict_and_only_the_toy_trainer_hides_its_errors() -> None:
    config = _mypy_config()
    assert config.get("strict") is True
    hiding = [m for o in config.get("overrides", []) if o.get("ignore_errors") for m in _modules(o)
              if m != TOY_TRAINER and not m.startswith(f"{TOY_TRAINER}.")]
    assert hiding == [], "fix these modules' type errors instead of ignoring them"
    # An override may relax what a library lacks (its stubs), never a strict check of our own modules.
    relaxed = {m: sorted(k for k, v in o.items() if v is False) for o in config.get("overrides", [])
               for m in _modules(o) if m.split(".")[0] in ("ltx_pipeline", "phases")
               and not m.startswith(TOY_TRAINER) and any(v is False for v in o.values())}
    assert relaxed == {}
