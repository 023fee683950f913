"""Reading a trainer config mapping by dotted path (``optimization.batch_size``), as YAML loads it."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["config_value"]


def config_value(config: Mapping[str, Any] | None, dotted: str, default: Any = None) -> Any:
    """The value at ``dotted`` (an explicit null included), or ``default`` when a key is absent."""
    node: Any = config
    for part in dotted.split("."):
        if not isinstance(node, Mapping) or part not in node:
            return default
        node = node[part]
    return node
