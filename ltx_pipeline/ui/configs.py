"""The configs a run launched, line by line, with every recorded patch marked on its line with its reason.

The patches are the ones the phases stored (``ConfigPatchOutputs`` per stage, then the autotune winner's,
applied to every stage); the text is the config file as it is on disk now, which is what the trainer
read. A patch is placed on the line of its dotted path by walking the YAML's indentation; one whose key
is not found (a list item, a key removed since) is still listed under the config, with no line.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from ltx_pipeline.ltx.config_patch import PatchRecord
from ltx_pipeline.outputs.autotune import AutotuneOutputs
from ltx_pipeline.outputs.config_patch import ConfigPatchOutputs
from ltx_pipeline.outputs.validate import PatchRecordOutputs
from ltx_pipeline.ui.files import file_url, read_inside

__all__ = ["stage_configs", "validation_prompts"]

_KEY = re.compile(r"^(?P<indent>\s*(?:-\s+)?)(?P<key>[A-Za-z0-9_.\"'-]+)\s*:")


def stage_configs(root: Path, config_patch: ConfigPatchOutputs | None,
                  autotune: AutotuneOutputs | None) -> list[dict[str, Any]]:
    """Each stage's config: its path and URL, its lines (each with the patches set on it) and every patch."""
    if config_patch is None:
        return []
    winners = list(autotune.patches) if autotune is not None and autotune.off is None else []
    out = []
    for stage in config_patch.configs:
        path = Path(stage.config)
        text = read_inside(root, path)
        lines = text.splitlines()
        patches = [_patch(p, "config_patch") for p in stage.patches]
        patches += [_patch(p, "autotune") for p in winners if p.stage in (None, stage.stage)]
        marks: dict[int, list[dict[str, Any]]] = {}
        for patch in patches:
            patch["line"] = _line_of(lines, patch["path"])
            if patch["line"] is not None:
                marks.setdefault(patch["line"], []).append(patch)
        out.append({"stage": stage.stage, "path": str(path), "url": file_url(root, path), "template": stage.template,
                    "missing": not text, "patches": patches,
                    "lines": [{"number": n, "text": line, "patches": marks.get(n, [])}
                              for n, line in enumerate(lines, start=1)]})
    return out


def validation_prompts(root: Path, config_file: Path) -> list[str]:
    """The validation prompts a stage config asks the trainer to render, in order (sample k is prompt k)."""
    import yaml

    try:
        data = yaml.safe_load(read_inside(root, config_file)) or {}
    except yaml.YAMLError:
        return []
    validation = data.get("validation") if isinstance(data, dict) else None
    if not isinstance(validation, dict):
        return []
    samples = validation.get("samples") or []
    if samples:  # each sample: {prompt, ...}
        return [str(s.get("prompt", "")) if isinstance(s, dict) else str(s) for s in samples]
    return [str(p) for p in validation.get("prompts") or []]


def _patch(record: PatchRecord | PatchRecordOutputs, source: str) -> dict[str, Any]:
    return {"path": record.path, "old": record.old, "new": record.new, "reason": record.reason,
            "added": record.added, "source": source}


def _line_of(lines: list[str], dotted: str) -> int | None:
    """The 1-based line holding the last part of ``dotted`` (``optimization.steps``, ``validation.samples.1.prompt``),
    or None."""
    start, parent, item = 0, -1, False
    for part in dotted.split("."):
        found = _item_line(lines, start, parent, int(part)) if part.isdigit() else \
            _key_line(lines, start, parent, part, item)
        if found is None:
            return None
        start, parent = found
        item = part.isdigit()
        start += 0 if item else 1
    return start + (1 if item else 0)


def _key_line(lines: list[str], start: int, parent: int, key: str, item: bool) -> tuple[int, int] | None:
    """(line index, key column) of ``key`` in the mapping below column ``parent`` from ``start`` on; ``item``: the
    first line is a list item's dash line, whose first key sits after the dash."""
    for index in range(start, len(lines)):
        line = lines[index]
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        raw = len(line) - len(line.lstrip())
        if raw <= parent and not (item and index == start):
            return None  # left the parent's block
        match = _KEY.match(line)
        if match is not None and match["key"].strip("\"'") == key:
            return index, len(match["indent"])
    return None


def _item_line(lines: list[str], start: int, parent: int, number: int) -> tuple[int, int] | None:
    """(line index, dash column) of the ``number``-th item of the list below the key at column ``parent``."""
    column, seen = None, -1
    for index in range(start, len(lines)):
        line = lines[index]
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        raw, dash = len(line) - len(line.lstrip()), line.lstrip().startswith("- ") or line.strip() == "-"
        if raw < parent or (raw == parent and not dash) or (column is not None and raw < column):
            return None
        if dash and (column is None or raw == column):
            column, seen = raw, seen + 1
            if seen == number:
                return index, raw
    return None
