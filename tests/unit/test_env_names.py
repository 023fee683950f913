"""Environment variable names live in ``ltx_pipeline.env_names`` only: the source spells no ``LTX_`` name elsewhere."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import ltx_pipeline
from ltx_pipeline import env_names

ROOT = Path(ltx_pipeline.__file__).resolve().parent.parent
HOME = Path(env_names.__file__).resolve()
# A whole string literal that is an LTX variable name (LTX_PIPELINE_STORE, LTX2_ROOT); marks such as
# "LTX_PIPELINE_VALIDATION " (a trailing space, printed by trainer-side scripts) are not names.
NAME = re.compile(r"LTX2?_[A-Z0-9_]*[A-Z0-9]")


def _sources() -> list[Path]:
    return sorted(p for folder in ("ltx_pipeline", "phases") for p in (ROOT / folder).rglob("*.py"))


def _names_spelled(tree: ast.Module) -> list[tuple[int, str]]:
    exported = {id(node) for stmt in tree.body if isinstance(stmt, ast.Assign)
                and any(isinstance(t, ast.Name) and t.id == "__all__" for t in stmt.targets)
                for node in ast.walk(stmt.value)}  # __all__ lists Python names (LTX2_REPO), not variables
    return [(node.lineno, node.value) for node in ast.walk(tree)
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in exported
            and NAME.fullmatch(node.value)]


def test_no_module_but_env_names_spells_an_ltx_variable() -> None:
    found = [f"{path.relative_to(ROOT)}:{line}: {value!r}" for path in _sources() if path.resolve() != HOME
             for line, value in _names_spelled(ast.parse(path.read_text(encoding="utf-8")))]
    assert found == [], "use the constant from ltx_pipeline.env_names instead:\n" + "\n".join(found)


def test_the_scan_sees_a_spelled_name() -> None:
    tree = ast.parse('import os\n__all__ = ["LTX2_REPO"]\nos.environ.get("LTX_PIPELINE_STORE")\nprint("LTX_X ")\n')
    assert _names_spelled(tree) == [(3, "LTX_PIPELINE_STORE")]


def test_each_name_is_a_distinct_exported_constant_and_the_module_imports_nothing() -> None:
    values = {name: getattr(env_names, name) for name in env_names.__all__}
    assert all(NAME.fullmatch(value) for value in values.values())
    assert len(set(values.values())) == len(values)
    assert sorted(values) == sorted(n for n in vars(env_names) if n.endswith("_ENV"))
    tree = ast.parse(HOME.read_text(encoding="utf-8"))
    imports = [node for node in ast.walk(tree) if isinstance(node, (ast.Import, ast.ImportFrom))]
    assert [getattr(node, "module", None) for node in imports] == ["__future__"]  # the bottom floor
