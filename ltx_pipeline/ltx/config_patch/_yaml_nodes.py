"""Ruamel nodes for patched values: keeping the template's style, and its comment blocks in place.

Owns ``styled`` (a new value dressed like the one it replaces: quoting, folded-prompt fold points,
flow or block lists, in-place edits of lists and mappings so their comments stay attached) and
``insert`` (append a key to a mapping; the comment block that trailed the mapping's old last entry,
usually the next section's banner, moves below the new key instead of above it).
"""

from __future__ import annotations

from typing import Any

import yaml
from ruamel.yaml.comments import CommentedMap, CommentedSeq
from ruamel.yaml.error import CommentMark
from ruamel.yaml.scalarstring import (
    DoubleQuotedScalarString,
    FoldedScalarString,
    LiteralScalarString,
    SingleQuotedScalarString,
)
from ruamel.yaml.tokens import CommentToken

__all__ = ["insert", "styled"]

_FOLD_WIDTH = 90  # the shipped templates fold prompts at about this width


def styled(value: Any, old: Any) -> Any:
    """``value`` as a ruamel node that keeps ``old``'s style: quoting, folding, flow/block, comments."""
    if isinstance(value, str):
        return _styled_str(value, old)
    if isinstance(value, (list, tuple)):
        items = list(value)
        if isinstance(old, CommentedSeq):  # edit in place: comments on items stay attached
            tail = _pop_tail(old)  # the comment block after the list stays after it
            for index, item in enumerate(items[: len(old)]):
                old[index] = styled(item, old[index])
            for item in items[len(old):]:
                # New items borrow the quoting of the last string item (tags: ["ltx2", "t2v"]).
                model = old[-1] if len(old) and isinstance(old[-1], str) else None
                old.append(styled(item, model))
            del old[len(items):]
            if tail and len(old):
                _attach_tail(old, tail)
            return old
        seq = CommentedSeq(styled(item, None) for item in items)
        short_numbers = 0 < len(items) <= 4 and all(
            isinstance(i, (int, float)) and not isinstance(i, bool) for i in items)
        if short_numbers:  # dims-like tuples (video_dims, spatial_region) read best as [960, 544, 49]
            seq.fa.set_flow_style()
        else:
            seq.fa.set_block_style()
        return seq
    if isinstance(value, dict):
        if isinstance(old, CommentedMap):
            tail = _pop_tail(old)
            for key in [k for k in old if k not in value]:
                del old[key]
            for key, item in value.items():
                if key in old:
                    old[key] = styled(item, old[key])
                else:
                    insert(old, key, styled(item, None))
            if tail and len(old):
                _attach_tail(old, tail)
            return old
        mapping = CommentedMap()
        for key, item in value.items():
            mapping[key] = styled(item, None)
        return mapping
    return value


def _styled_str(value: str, old: Any) -> Any:
    if isinstance(old, FoldedScalarString):
        folded = FoldedScalarString(value)
        folded.fold_pos = _fold_positions(value, str(old), list(getattr(old, "fold_pos", [])))
        return folded
    for style in (DoubleQuotedScalarString, SingleQuotedScalarString, LiteralScalarString):
        if isinstance(old, style):
            return style(value)
    # A plain scalar PyYAML (YAML 1.1, what the trainer uses) would read as a non-string, such as
    # "yes" or "1e-4", is quoted so the trainer gets the string.
    resolved = yaml.resolver.Resolver().resolve(yaml.ScalarNode, value, (True, False))
    if resolved != "tag:yaml.org,2002:str" or value != value.strip() or "\n" in value:
        return DoubleQuotedScalarString(value)
    return value


def _fold_positions(new: str, old: str, old_folds: list[int]) -> list[int]:
    """Fold points for ``new``: ``old``'s where ``new`` contains ``old``, greedy wrapping elsewhere."""
    width = max((b - a for a, b in zip([-1, *old_folds], [*old_folds, len(old)], strict=True)),
                default=_FOLD_WIDTH)
    start = new.find(old) if old else -1
    if start < 0:
        return _wrap(new, 0, width)
    kept = [start + pos for pos in old_folds]
    end = start + len(old)
    if end < len(new) - 1 and new[end] == " " != new[end + 1]:
        # Appended words start on a line of their own, so the template's lines stay as they were.
        return [*kept, end, *_wrap(new, end + 1, width)]
    last_line_start = (kept[-1] + 1) if kept else 0
    return kept + _wrap(new, last_line_start, max(width, end - last_line_start + 1))


def _wrap(text: str, begin: int, width: int) -> list[int]:
    """Greedy fold points (single spaces between words) so lines from ``begin`` stay within ``width``."""
    folds: list[int] = []
    line_start, candidate = begin, -1
    for pos in range(begin, len(text)):
        single_space = text[pos] == " " and 0 < pos < len(text) - 1 and text[pos - 1] != " " != text[pos + 1]
        if pos - line_start >= width and candidate >= 0:
            folds.append(candidate)
            line_start, candidate = candidate + 1, -1
        if single_space:
            candidate = pos
    if len(text) - line_start > width and candidate >= 0:
        folds.append(candidate)
    return folds


def insert(mapping: CommentedMap, key: str, value: Any) -> None:
    """Append ``key``; the comment block that trailed the old last entry moves below the new one."""
    tail = _pop_tail(mapping) if len(mapping) else None
    mapping[key] = value
    if tail:
        _attach_tail(mapping, tail)


def _pop_tail(node: Any) -> str | None:
    """Detach the comment lines after ``node``'s last entry (its end-of-line comment stays)."""
    if isinstance(node, CommentedMap) and node:
        key = list(node)[-1]
        child, slot = node[key], 2
    elif isinstance(node, CommentedSeq) and node:
        key = len(node) - 1
        child, slot = node[key], 0
    else:
        return None
    if isinstance(child, (CommentedMap, CommentedSeq)) and child and not child.fa.flow_style():
        return _pop_tail(child)
    entry = node.ca.items.get(key)
    token = entry[slot] if entry and len(entry) > slot else None
    if not isinstance(token, CommentToken) or "\n" not in token.value:
        return None
    head, tail = token.value.split("\n", 1)
    if not tail:
        return None
    if head.strip():
        token.value = head + "\n"
    else:
        entry[slot] = None
    return tail


def _attach_tail(node: Any, tail: str) -> None:
    if isinstance(node, CommentedMap):
        key, slot = list(node)[-1], 2
    else:
        key, slot = len(node) - 1, 0
    child = node[key]
    if isinstance(child, (CommentedMap, CommentedSeq)) and child and not child.fa.flow_style():
        _attach_tail(child, tail)
        return
    entry = node.ca.items.setdefault(key, [None, None, None, None])
    entry[slot] = CommentToken("\n" + tail, CommentMark(0), None)
