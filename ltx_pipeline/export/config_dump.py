"""Reading the trainer's ``training_config.yaml`` as plain data, for the model card's figures.

The trainer writes it with ``yaml.dump(config.model_dump())``, PyYAML's full dumper: tuples come out as
``!!python/tuple`` and enums as ``!!python/object/apply:<Enum>``. This loader is YAML's safe loader that reads
those tags as lists and values, never as objects. The exported copy is the file itself, unchanged.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from ltx_pipeline.errors import BadInput

__all__ = ["read_trainer_config"]


class _TrainerDump(yaml.SafeLoader):  # type: ignore[misc]  # PyYAML ships no types
    pass


def _plain(loader: Any, suffix: str, node: Any) -> Any:
    if isinstance(node, yaml.SequenceNode):
        items = loader.construct_sequence(node, deep=True)
        # An enum is ``apply:<Enum> [value]``: its value; a tuple stays every item it has.
        return items[0] if suffix.startswith("object/apply:") and len(items) == 1 else list(items)
    if isinstance(node, yaml.MappingNode):
        return loader.construct_mapping(node, deep=True)
    return loader.construct_scalar(node)


_TrainerDump.add_multi_constructor("tag:yaml.org,2002:python/", _plain)


def read_trainer_config(path: Path) -> dict[str, Any]:
    """The config the trainer saved, as plain dicts, lists and values.

    Raises:
        BadInput: the file cannot be read as YAML, or holds no mapping.
    """
    try:
        data = yaml.load(path.read_text(encoding="utf-8"), Loader=_TrainerDump)  # noqa: S506 - safe loader + tags
    except (OSError, yaml.YAMLError) as exc:
        raise BadInput(f"{path} cannot be read: {exc}", where=str(path),
                       fix="export a run whose trainer finished starting (it writes this file then)") from exc
    if not isinstance(data, dict):
        raise BadInput(f"{path} holds no config", where=str(path),
                       fix="export a run whose trainer finished starting (it writes this file then)")
    return data
