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


SHIPPED = ("ltx_pipeline", "phases")
MAX_MODULE_LINES = 500


def _folders() -> list[Path]:
    roots = [REPO / name for name in (*SHIPPED, "tests", "benchmarks")]
    return [p for root in roots for p in (root, *root.rglob("*")) if p.is_dir() and "__pycache__" not in p.parts]


def _stem_word(name: str) -> str:
    """The first word of a file name: `_round_trip.py` -> round, `test_gpu_probe.py` -> gpu."""
    stem = name.split(".")[0].lstrip("_")
    for role in ("test_", "bench_"):  # a role prefix, like a suffix in other languages
        stem = stem.removeprefix(role)
    return stem.split("_")[0]


def test_no_module_is_over_the_size_limit() -> None:
    too_long = {str(p.relative_to(REPO)): n for folder in SHIPPED for p in (REPO / folder).rglob("*.py")
                if (n := len(p.read_text(encoding="utf-8").splitlines())) > MAX_MODULE_LINES}
    assert too_long == {}, f"split these along their seams (limit {MAX_MODULE_LINES} lines)"


def test_no_folder_holds_three_files_sharing_a_name_prefix() -> None:
    """A shared prefix is a folder waiting to be made: `config_patch_*.py` belongs in `config_patch/`."""
    crowded = {}
    for folder in _folders():
        words: dict[str, list[str]] = {}
        for p in folder.iterdir():
            if p.is_file() and p.name not in ("__init__.py", "conftest.py", "README.md"):
                words.setdefault(_stem_word(p.name), []).append(p.name)
        # One stem in several formats (dataset.csv, dataset.json) is one name, not a crowd.
        crowded.update({f"{folder.relative_to(REPO)}/{w}*": sorted(names) for w, names in words.items()
                        if len({n.split(".")[0] for n in names}) >= 3})
    assert crowded == {}
