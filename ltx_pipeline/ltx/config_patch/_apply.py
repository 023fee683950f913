"""Comment-preserving patching of trainer configs, and the checks around it.

Owns the public patch API every phase uses (config patch, autotune's winner, resume's
``load_checkpoint``, failure fixes): ``apply_patches`` sets values at dotted paths in a template's
text and returns the new text with a record per change, ``render_diff`` shows it, and
``check_patched`` runs the schema mirror on the result. The stage rules (which patches a plan
stage needs) live in ``config_patch_stage`` and are re-exported here. Everything is pure: text in,
text out; the phase writes the file with ``atomic_write``.

Invariant: a patched value changes only its own lines (plus lines for keys that were added); the
template's comments, key order, quoting and flow style survive, and a patch that sets the value
already there changes nothing and is not recorded.
"""

from __future__ import annotations

import difflib
from collections.abc import Sequence
from pathlib import Path

import yaml

from ltx_pipeline.ltx.config_patch._records import MISSING, Patch, PatchRecord, PromptRewrite
from ltx_pipeline.ltx.config_patch._round_trip import RoundTrip, float_text, split_path
from ltx_pipeline.ltx.config_patch._stage import KNOB_PATHS, StagePaths, patches_for_stage
from ltx_pipeline.ltx.trainer_config import ConfigFinding, validate_trainer_config
from ltx_pipeline.yaml_io import load_yaml

__all__ = [
    "KNOB_PATHS",
    "MISSING",
    "Patch",
    "PatchRecord",
    "PromptRewrite",
    "StagePaths",
    "apply_patches",
    "check_patched",
    "float_text",
    "patches_for_stage",
    "render_diff",
]


def apply_patches(text: str, patches: Sequence[Patch]) -> tuple[str, list[PatchRecord]]:
    """Set each patch's value at its dotted path, keeping everything else of ``text`` as it was.

    Patches apply in order (a later one sees the earlier ones). Missing mappings on the way are
    created; list items are addressed by index and must exist. A value equal to what
    ``yaml.safe_load`` (the trainer's reader) already finds there is skipped, so ``learning_rate:
    1e-4`` (a string to PyYAML) does get rewritten as the float ``0.0001``. A ``PromptRewrite``
    value expands into one patch per rewritten prompt.

    Args:
        text: the config (a template or an already patched config).
        patches: the changes, each with its reason.

    Returns:
        The new text (``text`` itself when nothing changed) and one record per change.

    Raises:
        BadConfig: ``text`` is not a YAML mapping, a path is malformed or runs through a scalar
            or past the end of a list, or a value cannot be written as YAML.
    """
    config = RoundTrip(text)
    records: list[PatchRecord] = []
    for patch in patches:
        if isinstance(patch.value, PromptRewrite):
            current = config.get(split_path(patch.path))
            concrete = patch.value.expand(patch.path, current, patch.reason)
        else:
            concrete = [patch]
        for item in concrete:
            parts = split_path(item.path)
            old = config.get(parts)
            new = _plain(item.value)
            if old is not MISSING and _same(old, new):
                continue
            config.set(parts, item.value)
            added = old is MISSING
            records.append(PatchRecord(item.path, None if added else old, new, item.reason, added))
    if not records:
        return text, []
    return config.render(), records


def render_diff(before: str, after: str, before_name: str, after_name: str) -> str:
    """A unified diff of two config texts (empty when they are equal), e.g. template vs config.yaml."""
    return "".join(
        difflib.unified_diff(
            before.splitlines(keepends=True), after.splitlines(keepends=True), before_name, after_name
        )
    )


def check_patched(text: str, *, relaxed_paths: bool, cwd: Path | None = None) -> list[ConfigFinding]:
    """Read ``text`` as the trainer does (``yaml.safe_load``) and run the schema mirror on it.

    Args:
        text: a patched config.
        relaxed_paths: skip existence checks (placeholders); never good enough for a launch.
        cwd: where relative paths resolve; None means the process working directory.

    Returns:
        The mirror's findings; a text that is not YAML or not a mapping gives one finding at the
        top level. Empty when the trainer's config step would accept it.
    """
    try:
        data = load_yaml(text)
    except yaml.YAMLError as error:
        return [ConfigFinding("", f"not valid YAML: {str(error).splitlines()[0]}", "yaml_syntax")]
    if not isinstance(data, dict):
        return [ConfigFinding("", "the config must be a mapping of sections", "model_type")]
    return validate_trainer_config(data, relaxed_paths=relaxed_paths, cwd=cwd)


def _plain(value: object) -> object:
    if isinstance(value, (list, tuple)):
        return [_plain(item) for item in value]
    if isinstance(value, dict):
        return {key: _plain(item) for key, item in value.items()}
    return value


def _same(old: object, new: object) -> bool:
    """Equal as the trainer would read them, with bool, int, float and str kept apart (1 != True != 1.0)."""
    if isinstance(old, list) and isinstance(new, list):
        return len(old) == len(new) and all(_same(a, b) for a, b in zip(old, new, strict=True))
    if isinstance(old, dict) and isinstance(new, dict):
        return old.keys() == new.keys() and all(_same(old[k], new[k]) for k in old)
    return type(old) is type(new) and old == new
