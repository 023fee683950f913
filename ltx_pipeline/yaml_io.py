"""Reading YAML fast: PyYAML's libyaml-backed safe loader when the wheel has it, else the pure-Python one.

Configs, run requests and surfaces are read many times per engine run; PyYAML's ``safe_load`` parses
in pure Python, about ten times slower than the same ``SafeLoader`` semantics over libyaml
(``CSafeLoader``: same constructors, same types). Dumping stays with ``yaml.safe_dump``, whose layout
the project's files and tests rely on.
"""

from __future__ import annotations

from typing import IO, Any

import yaml

__all__ = ["load_yaml"]

_LOADER: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def load_yaml(source: str | bytes | IO[str] | IO[bytes]) -> Any:
    """PyYAML's ``safe_load(source)``, through libyaml when available."""
    return yaml.load(source, Loader=_LOADER)  # noqa: S506 - a safe loader, C or Python
