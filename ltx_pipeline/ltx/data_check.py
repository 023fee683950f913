"""The data-check rules: a dataset's metadata, its clip lengths and the identity of preprocessed data.

Owns ``Check``, the one finding record the data-check and validate rules share (severity, stable
code, one-line message, where, concrete fix), and the rules that need no tensors: the metadata
columns each mode needs (legacy aliases included), media that is missing, duplicated or without a
caption, clips too short for the planned buckets (preprocessing would skip them silently, facts
§6.3), and the rule refusing preprocessed data whose identity (``ltx.data_identity``: the content of
the checkpoint and text encoder, the buckets and the flags that made it) differs from the run's. The
``.precomputed/`` rules are in ``ltx.precomputed``; the launch rules in ``ltx.launch_checks``. Rules
return findings; they raise only when a file cannot be read at all.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

# The identity records are re-exported: the data-check phase and preprocessing read them through this door.
from ltx_pipeline.ltx.data_identity import (
    data_identity,
    identity_changes,
    legacy_pairing_matches,
    made_with,
    model_identity,
    model_label,
)
from ltx_pipeline.ltx.metadata import metadata_columns, read_metadata_rows, resolve_media, sample_name
from ltx_pipeline.ltx.modes import COLUMN_ALIASES, Mode

__all__ = [
    "Check",
    "MetadataReport",
    "Severity",
    "check_data_identity",
    "check_metadata",
    "data_identity",
    "format_checks",
    "has_errors",
    "identity_changes",
    "legacy_pairing_matches",
    "made_with",
    "model_identity",
    "model_label",
    "name_some",
]

Severity = Literal["error", "warning", "info"]
MAX_NAMED = 10
_CAPTION_CANDIDATES = ("caption", "text", "prompt", "captions", "description")


@dataclass(frozen=True)
class Check:
    """One finding of a data or launch rule.

    Attributes:
        severity: "error" blocks the next step; "warning" needs a decision; "info" is a note.
        code: stable slug, e.g. ``missing-column``, ``short-clip``, ``audio-gate``.
        message: one line: what is wrong and where.
        path: dotted config path or file path the finding is about, if any.
        fix: the concrete fix, or the options when the user must choose.
    """

    severity: Severity
    code: str
    message: str
    path: str | None = None
    fix: str | None = None

    def line(self) -> str:
        """``<severity> [<code>] <message> Fix: <fix>`` on one line."""
        return f"{self.severity} {self.text()}"

    def text(self) -> str:
        """``[<code>] <message> Fix: <fix>``: the line for a channel that names the severity itself (a warning)."""
        text = f"[{self.code}] {self.message.rstrip('.')}."
        if self.fix:
            text += f" Fix: {self.fix.rstrip('.')}."
        return " ".join(text.split())


def format_checks(checks: Iterable[Check]) -> list[str]:
    """One line per finding, errors first, then warnings, then notes (stable within a severity)."""
    order = {"error": 0, "warning": 1, "info": 2}
    return [check.line() for check in sorted(checks, key=lambda c: order[c.severity])]


def has_errors(checks: Iterable[Check]) -> bool:
    """Whether any finding is an error."""
    return any(check.severity == "error" for check in checks)


def name_some(names: Iterable[str], limit: int = MAX_NAMED) -> str:
    """``a, b, c`` naming at most ``limit`` items, then ``and N more``."""
    items = list(names)
    shown = ", ".join(items[:limit])
    return shown + (f" and {len(items) - limit} more" if len(items) > limit else "")


@dataclass(frozen=True)
class MetadataReport:
    """What ``check_metadata`` found in a metadata file.

    Attributes:
        path: the metadata file.
        mode: the mode name checked against.
        rows: number of rows.
        columns: every column found.
        column_map: the mode's column (``video``, ``reference_video`` ...) -> the column used
            (``media_path`` where the legacy alias is used); absent columns are left out.
        media_by_column: the mode's media column -> the non-empty paths as written, in row order.
        checks: the findings.
    """

    path: str
    mode: str
    rows: int
    columns: tuple[str, ...]
    column_map: dict[str, str]
    media_by_column: dict[str, tuple[str, ...]]
    checks: list[Check] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not has_errors(self.checks)

    def primary_media(self) -> tuple[str, ...]:
        """The clips preprocessing encodes: the ``video`` column, else the ``audio`` one."""
        return self.media_by_column.get("video") or self.media_by_column.get("audio") or ()

    def sample_names(self) -> dict[str, str]:
        """Primary media path as written -> its relative ``.pt`` name in ``.precomputed/``."""
        base = Path(self.path).resolve().parent  # preprocessing is given the resolved metadata path
        return {media: sample_name(base, media) for media in self.primary_media()}


def _is_file(path: Path) -> bool:
    """``Path.is_file`` that treats any OS error (e.g. a name too long for the filesystem) as missing."""
    try:
        return path.is_file()
    except OSError:
        return False


def check_metadata(metadata_file: Path, mode: Mode, *, caption_column: str = "caption") -> MetadataReport:
    """Check a metadata file against what a mode's preprocessing needs.

    Args:
        metadata_file: the .csv/.json/.jsonl file; media paths are relative to its folder.
        mode: the training mode (its ``columns`` are required; ``video`` may be the legacy
            ``media_path`` and ``reference_video`` the legacy ``ref_media_path``).
        caption_column: the caption column preprocessing will be told to read.

    Returns:
        The report; its checks are ``missing-column``, ``wrong-type`` (a JSON caption or media path
        that is not a string), ``empty-media-path``, ``missing-media`` (errors), ``duplicate-media``
        and ``empty-caption`` (warnings).

    Raises:
        BadDataset: the file cannot be read or parsed, or has no rows.
    """
    metadata_file = Path(metadata_file).expanduser().absolute()
    rows = read_metadata_rows(metadata_file)
    columns = metadata_columns(rows)
    where = str(metadata_file)
    base = metadata_file.parent
    checks: list[Check] = []
    column_map: dict[str, str] = {}
    for wanted in mode.columns:
        names = (caption_column,) if wanted == "caption" else COLUMN_ALIASES.get(wanted, (wanted,))
        found = next((name for name in names if name in columns), None)
        if found is None:
            checks.append(_missing_column(wanted, names, columns, mode, where))
        else:
            column_map[wanted] = found
    checks += _wrong_types(rows, column_map, metadata_file.name, where)
    media_by_column: dict[str, tuple[str, ...]] = {}
    for wanted, column in column_map.items():
        if wanted == "caption":
            continue
        values = [_text(row.get(column)) for row in rows]
        media_by_column[wanted] = tuple(value for value in values if value)
        empty_rows = [str(number) for number, (row, value) in enumerate(zip(rows, values, strict=True), start=1)
                      if not value and _kind(row.get(column)) is None]  # a wrong type is named as such
        if empty_rows:
            checks.append(Check("error", "empty-media-path",
                                f"{len(empty_rows)} row(s) of {metadata_file.name} have no `{column}` path "
                                f"(rows {name_some(empty_rows)})", where,
                                f"fill in `{column}` for those rows or remove them"))
        missing = [value for value in media_by_column[wanted] if not _is_file(resolve_media(base, value))]
        if missing:
            checks.append(Check("error", "missing-media",
                                f"{len(missing)} file(s) in `{column}` of {metadata_file.name} do not exist: "
                                f"{name_some(missing)}", where,
                                f"fix or remove those rows; paths are relative to {base}"))
    primary = next((w for w in ("video", "audio") if w in media_by_column), None)
    if primary is not None:
        checks += _duplicates(media_by_column[primary], base, column_map[primary], where)
    if "caption" in column_map:
        checks += _empty_captions(rows, column_map, primary, where)
    return MetadataReport(where, mode.name, len(rows), columns, column_map, media_by_column, checks)


def _text(value: Any) -> str:
    return value.strip() if isinstance(value, str) else ""


def _kind(value: Any) -> str | None:
    """What a JSON value that should be text is instead, in words (None for text or no value).

    CSV cells are always text (or absent): a number-like caption there is text, and only JSON and
    JSONL can hold a number, a boolean, a list or an object where the trainer reads a string.
    """
    if value is None or isinstance(value, str):
        return None
    shown = json.dumps(value, ensure_ascii=False)
    shown = shown if len(shown) <= 40 else shown[:39] + "…"
    if isinstance(value, bool):
        return f"a boolean ({shown})"
    if isinstance(value, int | float):
        return f"a number ({shown})"
    if isinstance(value, list):
        return f"a list ({shown})"
    if isinstance(value, dict):
        return f"an object ({shown})"
    return f"a {type(value).__name__}"


def _wrong_types(rows: list[dict[str, Any]], column_map: dict[str, str], name: str, where: str) -> list[Check]:
    """Every cell of a column the mode reads that holds no text: row, column, what it is, what it must be."""
    cells = []
    for number, row in enumerate(rows, start=1):
        for wanted, column in column_map.items():
            kind = _kind(row.get(column))
            if kind is not None:
                must = "text" if wanted == "caption" else "a media path as text"
                cells.append(f"row {number} `{column}` is {kind}, must be {must}")
    if not cells:
        return []
    named = "; ".join(cells[:MAX_NAMED]) + (f"; and {len(cells) - MAX_NAMED} more" if len(cells) > MAX_NAMED else "")
    return [Check("error", "wrong-type", f"{len(cells)} cell(s) of {name} have the wrong type: {named}",
                  where, 'write each caption and media path as a JSON string, e.g. {"caption": "a red fox", '
                         '"video": "videos/a.mp4"}, one clip per row')]


def _missing_column(wanted: str, names: tuple[str, ...], columns: tuple[str, ...], mode: Mode,
                    where: str) -> Check:
    accepted = " or ".join(f"`{name}`" for name in names)
    fix = f"add a {accepted} column"
    if wanted == "caption":
        other = next((name for name in _CAPTION_CANDIDATES if name in columns and name != names[0]), None)
        if other:
            fix = (f"rename column `{other}` to `{names[0]}` in {Path(where).name} (the trainer reads `{names[0]}`; "
                   "ltx-pipeline never edits your metadata), then run again")
        else:
            fix = f"add a `{names[0]}` column (caption the clips first)"
    return Check("error", "missing-column",
                 f"Mode {mode.name} needs column {accepted} in {Path(where).name}; found: "
                 f"{', '.join(columns) or 'none'}", where, fix)


def _duplicates(media: tuple[str, ...], base: Path, column: str, where: str) -> list[Check]:
    resolved = [str(resolve_media(base, value).resolve()) for value in media]
    counts = Counter(resolved)
    first: dict[str, str] = {}
    for value, key in zip(media, resolved, strict=True):
        if counts[key] > 1:
            first.setdefault(key, f"{value} (x{counts[key]})")
    named = list(first.values())
    if not named:
        return []
    # NOTE: preprocessing keys captions by media path, so repeated rows collapse to one sample
    # carrying the last row's caption (facts §6.2).
    return [Check("warning", "duplicate-media",
                  f"{len(named)} clip(s) are listed more than once in `{column}`: {name_some(named)}; "
                  "preprocessing keeps one sample each, with the last row's caption", where,
                  "remove the repeated rows, or merge their captions into one row")]


def _empty_captions(rows: list[dict[str, Any]], column_map: dict[str, str], primary: str | None,
                    where: str) -> list[Check]:
    caption = column_map["caption"]
    media_column = column_map.get(primary) if primary else None
    empty = [(_text(row.get(media_column)) if media_column else "") or f"row {number}"
             for number, row in enumerate(rows, start=1)
             if not _text(row.get(caption)) and _kind(row.get(caption)) is None]  # a wrong type is an error
    if not empty:
        return []
    return [Check("warning", "empty-caption",
                  f"{len(empty)} row(s) have an empty `{caption}`: {name_some(empty)}", where,
                  "caption those clips before preprocessing (an empty caption trains on no text)")]


def check_data_identity(recorded: Mapping[str, Any] | None, current: Mapping[str, Any], where: str) -> list[Check]:
    """Refuse to reuse preprocessed data (a user's own folder) made with another model.

    Args:
        recorded: the ``data_identity`` this engine stored beside the data when it made it, or None.
        current: the ``data_identity`` the run would preprocess with.
        where: the folder checked.

    Returns:
        Nothing when the models match; ``data-identity-unproven`` (warning) without a record;
        ``data-identity`` (error) naming both models when they differ; ``data-flags`` (warning)
        when only the trigger or flags differ. Buckets are left to the latent-shape check.
    """
    fresh = "pass --fresh-preprocess to preprocess into the run's own folder (yours is left as it is)"
    now = f"{model_label(current['model'])} + {model_label(current['text_encoder'])}"
    if recorded is None:
        return [Check("warning", "data-identity-unproven",
                      f"{where} has no record of the model it was made with: cannot prove its latents and text "
                      f"conditions come from {now}", where,
                      f"reuse it only if you know they do; otherwise {fresh}")]
    changes = identity_changes(recorded, current)
    if "model" in changes or "text encoder" in changes or "record" in changes:
        before = f"{model_label(recorded.get('model') or {})} + {model_label(recorded.get('text_encoder') or {})}"
        old_path = (recorded.get("model") or {}).get("path")
        return [Check("error", "data-identity",
                      f"{where} was made with another model ({before}); this run uses {now}: refusing to reuse "
                      "its latents and text conditions", where,
                      f"{fresh}, or train with the model it was made with (--model-path {old_path})")]
    if "flags" in changes:
        return [Check("warning", "data-flags", f"{where} was made with other preprocessing flags ({changes['flags']})",
                      where, f"reuse it only if that is what you want; otherwise {fresh}")]
    return []
