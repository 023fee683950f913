"""Reading a trainer config mapping by dotted path (``optimization.batch_size``), as YAML loads it."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["config_value", "lax_int"]


def config_value(config: Mapping[str, Any] | None, dotted: str, default: Any = None) -> Any:
    """The value at ``dotted`` (an explicit null included), or ``default`` when a key is absent."""
    node: Any = config
    for part in dotted.split("."):
        if not isinstance(node, Mapping) or part not in node:
            return default
        node = node[part]
    return node


def lax_int(value: Any) -> int | None:
    """An int as pydantic's lax mode reads it (YAML may hold "100" or 100.0), else None (bools are not ints)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str) and value.strip().lstrip("-").isdigit():
        return int(value)
    return None
