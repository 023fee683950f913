"""The room map is enforced mechanically: import-linter contracts and ruff run as tests."""

from __future__ import annotations

import ast
import copy
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]


def test_import_contracts_hold() -> None:
    from importlinter.cli import lint_imports

    assert lint_imports(config_filename=str(REPO / "pyproject.toml")) == 0


def _contract(name_start: str) -> Any:
    """The pyproject contract whose name starts with ``name_start``, built as lint-imports builds it."""
    from importlinter.api import read_configuration
    from importlinter.contracts.forbidden import ForbiddenContract
    from importlinter.contracts.independence import IndependenceContract

    config = read_configuration(str(REPO / "pyproject.toml"))
    options = next(c for c in config["contracts_options"] if c["name"].startswith(name_start))
    kind = {"forbidden": ForbiddenContract, "independence": IndependenceContract}[options["type"]]
    return kind(name=options["name"], session_options=config["session_options"], contract_options=options)


@pytest.mark.parametrize(("contract", "importer", "imported"), [
    ("Phases are independent", "phases.data_check", "phases.config_patch"),
    ("Phases are independent", "phases.train", "phases.monitor"),
    ("Phases and the rooms they use never open the store", "ltx_pipeline.training.nodes", "ltx_pipeline.store.store"),
    ("Phases and the rooms they use never open the store", "ltx_pipeline.autotune.study", "ltx_pipeline.store"),
    ("Phases and the rooms they use never open the store", "phases.train", "ltx_pipeline.store.models"),
    ("Only the CLI uses typer and rich", "ltx_pipeline.reports.summary", "rich"),
    ("Only the CLI uses typer and rich", "ltx_pipeline.backends.ltx", "typer"),
    ("torch and optuna stay out", "ltx_pipeline.backends.reference", "torch"),
    ("torch and optuna stay out", "ltx_pipeline.evaluation.render", "optuna"),
    ("cli holds no decision about a run's state", "ltx_pipeline.cli.workflow", "phases"),
])
def test_a_forbidden_import_breaks_its_contract(contract: str, importer: str, imported: str) -> None:
    """Each contract is kept by the code as it is, and broken by the one import it exists to stop."""
    import grimp

    graph = grimp.build_graph("ltx_pipeline", "phases", include_external_packages=True)
    assert _contract(contract).check(copy.deepcopy(graph), verbose=False).kept  # a check may prune the graph
    graph.add_import(importer=importer, imported=imported, line_number=1, line_contents=f"import {imported}")
    assert not _contract(contract).check(graph, verbose=False).kept


def _module_level_imports(tree: ast.Module, names: set[str]) -> list[int]:
    """Lines that import one of ``names`` outside any function (so at import time), bar TYPE_CHECKING blocks."""
    found: list[int] = []

    def visit(node: ast.AST) -> None:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            return  # a lazy import: paid only when the function runs
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            return  # read by type checkers only
        if isinstance(node, ast.Import) and any(a.name.split(".")[0] in names for a in node.names):
            found.append(node.lineno)
        if isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").split(".")[0] in names:
            found.append(node.lineno)
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(tree)
    return found


def test_torch_and_optuna_are_imported_only_inside_functions() -> None:
    """The torch/optuna contract lists who may import them; this says how: lazily, never at start-up."""
    toy = REPO / "ltx_pipeline" / "reference_trainer"  # a separate program: torch is what it is about
    eager = {f"{p.relative_to(REPO)}:{line}" for folder in SHIPPED for p in (REPO / folder).rglob("*.py")
             if toy not in p.parents
             for line in _module_level_imports(ast.parse(p.read_text(encoding="utf-8")), {"torch", "optuna"})}
    assert eager == set()


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
MAX_MODULE_LINES = 400
MAX_FUNCTION_LINES = 60


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


def _long_functions(tree: ast.Module, limit: int) -> list[str]:
    """`name (N lines)` for each function or method in ``tree`` longer than ``limit`` lines, nested ones too."""
    return [f"{node.name} ({length} lines)" for node in ast.walk(tree)
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
            and (length := (node.end_lineno or node.lineno) - node.lineno + 1) > limit]


def test_no_function_is_over_the_size_limit() -> None:
    too_long = [f"{p.relative_to(REPO)}: {name}" for folder in SHIPPED for p in sorted((REPO / folder).rglob("*.py"))
                for name in _long_functions(ast.parse(p.read_text(encoding="utf-8")), MAX_FUNCTION_LINES)]
    assert too_long == [], f"split these into named steps (limit {MAX_FUNCTION_LINES} lines): {too_long}"


def test_the_function_size_check_counts_a_function_from_def_to_last_line() -> None:
    at_limit = ast.parse("def fits():\n" + "    x = 1\n" * (MAX_FUNCTION_LINES - 1))  # its def line makes 60
    over = ast.parse("class C:\n    def long(self):\n" + "        x = 1\n" * MAX_FUNCTION_LINES)  # a method too
    assert _long_functions(at_limit, MAX_FUNCTION_LINES) == []
    assert _long_functions(over, MAX_FUNCTION_LINES) == [f"long ({MAX_FUNCTION_LINES + 1} lines)"]


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
