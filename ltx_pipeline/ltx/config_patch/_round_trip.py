"""The comment-preserving YAML round trip behind config patching.

Owns ``RoundTrip``: a trainer config loaded twice, once with ruamel.yaml (round-trip mode:
comments, key order, quoting, flow style, folded prompts) to edit, and once with
``yaml.safe_load`` to know what the trainer reads. Patches are set in both; equality and the
recorded old values use the trainer's view.

Invariant: lines a patch does not touch come back byte for byte. ruamel re-renders a few things
on dump (``{ }`` becomes ``{}``, ``[ 1, 2 ]`` becomes ``[1, 2]``), so ``render`` dumps the
unchanged and the patched document the same way, diffs the two dumps, and applies only that diff
to the original text. The result is checked by reading it back with ``yaml.safe_load``; if the
splice ever disagrees with the patched data the plain dump (comments kept, some spacing
normalised) is used instead, and if that disagrees too, ``BadConfig`` is raised.
"""

from __future__ import annotations

import difflib
import io
import math
from typing import Any

import yaml
from ruamel.yaml import YAML
from ruamel.yaml.comments import CommentedMap, CommentedSeq
from ruamel.yaml.error import YAMLError
from ruamel.yaml.representer import RoundTripRepresenter

from ltx_pipeline.errors import BadConfig
from ltx_pipeline.ltx.config_patch._records import MISSING
from ltx_pipeline.ltx.config_patch._yaml_nodes import insert, styled
from ltx_pipeline.yaml_io import load_yaml

__all__ = ["RoundTrip", "float_text", "split_path"]

_SCALARS = (bool, int, float, str, type(None))


def split_path(path: str) -> list[str]:
    """``"a.b.0.c"`` -> ``["a", "b", "0", "c"]``; empty segments are refused."""
    parts = path.split(".")
    if not path or any(not part for part in parts):
        raise BadConfig(f"Patch path {path!r} is not a dotted path", where=path,
                        fix="write paths like optimization.learning_rate or validation.samples.0.prompt")
    return parts


class RoundTrip:
    """A trainer config being patched: the ruamel document, the trainer's view, the original text."""

    def __init__(self, text: str) -> None:
        self.text = text
        try:
            self.view = load_yaml(text)
        except yaml.YAMLError as error:
            raise BadConfig(f"Config template is not valid YAML: {error}".splitlines()[0],
                            fix="correct the template's YAML syntax") from error
        if not isinstance(self.view, dict):
            raise BadConfig("Config template must be a mapping of sections at the top level",
                            fix="start the template with keys such as `model:` and `data:`")
        self._yaml = YAML()
        self._yaml.Representer = _Representer
        self._yaml.preserve_quotes = True
        self._yaml.width = 4096  # never re-wrap lines; folded prompts keep their own fold points
        try:
            self.doc = self._yaml.load(text)
        except YAMLError as error:
            raise BadConfig(f"Config template cannot be round-tripped: {error}".splitlines()[0],
                            fix="correct the template's YAML syntax") from error
        mapping, sequence, offset = _guess_indent(self.doc)
        self._yaml.indent(mapping=mapping, sequence=sequence, offset=offset)
        self._before = self._dump()

    def get(self, parts: list[str]) -> Any:
        """The trainer's current value at ``parts``, or ``MISSING``."""
        node: Any = self.view
        for depth, part in enumerate(parts):
            if isinstance(node, dict):
                if part not in node:
                    return MISSING
                node = node[part]
            elif isinstance(node, list):
                index = _index(parts, depth, node)
                node = node[index]
            elif node is None:
                return MISSING
            else:
                raise _not_container(parts, depth, node)
        return node

    def set(self, parts: list[str], value: Any) -> None:
        """Set ``value`` at ``parts`` in both documents, creating missing mappings on the way."""
        _check_value(value, ".".join(parts))
        node: Any = self.doc
        plain: Any = self.view
        for depth, part in enumerate(parts[:-1]):
            if isinstance(node, CommentedSeq):
                index = _index(parts, depth, node)
                node, plain = node[index], plain[index]
                continue
            if not isinstance(node, CommentedMap):
                raise _not_container(parts, depth, plain)
            if node.get(part) is None:
                self._create(node, plain, parts, depth, value)
                return
            if not isinstance(node[part], (CommentedMap, CommentedSeq)):
                raise _not_container(parts, depth + 1, plain[part])
            node, plain = node[part], plain[part]
        last = parts[-1]
        if isinstance(node, CommentedSeq):
            index = _index(parts, len(parts) - 1, node)
            node[index] = styled(value, node[index])
            plain[index] = _plain(value)
        elif isinstance(node, CommentedMap):
            if last in node:
                if isinstance(plain.get(last), _SCALARS) and plain.get(last) != value:
                    _drop_stale_comment(node, last, plain.get(last))
                if isinstance(node[last], (CommentedMap, CommentedSeq)) and not isinstance(value, (dict, list, tuple)):
                    _keep_trailing_comments(node, last)
                node[last] = styled(value, node[last])
            else:
                insert(node, last, styled(value, None))
            plain[last] = _plain(value)
        else:
            raise _not_container(parts, len(parts) - 1, plain)

    def _create(self, node: CommentedMap, plain: dict[str, Any], parts: list[str], depth: int, value: Any) -> None:
        """Build the missing mappings from ``parts[depth]`` down and insert them as one block."""
        if any(part.isdigit() for part in parts[depth + 1:]):
            raise BadConfig(f"Patch path {'.'.join(parts)}: {'.'.join(parts[:depth + 1])} does not exist, "
                            "so no list index can be used below it", where=".".join(parts),
                            fix="patch the whole list at its own path instead")
        nested: Any = value
        for key in reversed(parts[depth + 1:]):
            nested = {key: nested}
        part = parts[depth]
        if part in node:  # present but null: replace in place, keeping its position and comments
            node[part] = styled(nested, None)
        else:
            insert(node, part, styled(nested, None))
        plain[part] = _plain(nested)

    def render(self) -> str:
        """The patched text: the original with only the patched lines changed (see module docstring)."""
        after = self._dump()
        spliced = _splice(self.text, self._before, after)
        for candidate in (spliced, after):
            try:
                if load_yaml(candidate) == self.view:
                    return candidate
            except yaml.YAMLError:
                continue
        raise BadConfig("Patching produced YAML that reads back differently from the patched values",
                        fix="simplify the template's layout around the patched keys (plain block mappings)")

    def _dump(self) -> str:
        stream = io.StringIO()
        self._yaml.dump(self.doc, stream)
        return stream.getvalue()


def _keep_trailing_comments(node: CommentedMap, key: str) -> None:
    """A block replaced by a scalar (``audio: {...}`` -> ``audio: null``) keeps the full-line comments
    after its last line: they head the next section (``# Optimization Configuration``). Comments inside
    the block speak of its keys and go with them."""
    inner: Any = node[key]
    token = None
    while isinstance(inner, (CommentedMap, CommentedSeq)) and len(inner):
        last = list(inner)[-1] if isinstance(inner, CommentedMap) else len(inner) - 1
        item = inner.ca.items.get(last)
        token = item[2] if item and len(item) > 2 and item[2] is not None else (item[0] if item else None)
        inner = inner[last]
    if token is None:
        return
    _, _, rest = token.value.partition("\n")  # the first line ends the block's last line
    if rest.strip():
        token.value, token.column = "\n" + rest, 0
        node.ca.items[key] = [None, None, token, None]


def _drop_stale_comment(node: CommentedMap, key: str, old: Any) -> None:
    """Drop ``key``'s end-of-line comment when it speaks of the value being replaced.

    ``quantization: "int8-quanto"  # int8 weights for the frozen base`` patched to null must not keep
    a comment that now contradicts it; a comment about the key (``steps: 2000  # optimizer steps``)
    stays. Full-line comments after the line belong to later keys and are kept.
    """
    item = node.ca.items.get(key)
    token = item[2] if item and len(item) > 2 else None
    if token is None or not token.value.lstrip().startswith("#"):
        return
    eol, _, rest = token.value.partition("\n")
    text = str(old).lower()
    words = {text, text.split("-")[0]} - {"", "true", "false", "none", "null"}
    if not any(len(w) >= 3 and w in eol.lower() for w in words):
        return
    if rest.strip():
        token.value, token.column = "\n" + rest, 0
    else:
        item[2] = None


def _guess_indent(doc: CommentedMap) -> tuple[int, int, int]:
    """(mapping indent, sequence indent, dash offset) as the template writes them; trainer layout by default."""
    mapping = next((value.lc.col for value in doc.values() if isinstance(value, CommentedMap) and value), 2)
    mapping = mapping if mapping > 0 else 2
    stack: list[Any] = [doc]
    while stack:
        node = stack.pop()
        for key, value in node.items():
            if isinstance(value, CommentedSeq) and value and not value.fa.flow_style():
                key_col = node.lc.key(key)[1]
                offset, sequence = value.lc.col - key_col, value.lc.item(0)[1] - key_col
                if 0 <= offset < sequence:
                    return mapping, sequence, offset
            if isinstance(value, CommentedMap):
                stack.append(value)
    return mapping, mapping + 2, mapping


def _index(parts: list[str], depth: int, seq: list[Any]) -> int:
    part = parts[depth]
    if not part.isdigit() or int(part) >= len(seq):
        where = ".".join(parts[:depth]) or "(top level)"
        raise BadConfig(f"Patch path {'.'.join(parts)}: {where} is a list of {len(seq)} item(s), "
                        f"{part!r} is not an index in it", where=".".join(parts),
                        fix=f"use an index from 0 to {len(seq) - 1}")
    return int(part)


def _not_container(parts: list[str], depth: int, found: Any) -> BadConfig:
    where = ".".join(parts[:depth]) or "(top level)"
    return BadConfig(f"Patch path {'.'.join(parts)}: {where} holds a {type(found).__name__}, "
                     "not a mapping or list", where=".".join(parts),
                     fix="patch the value itself, or patch its parent with a mapping")


def _check_value(value: Any, path: str) -> None:
    if isinstance(value, _SCALARS):
        return
    if isinstance(value, (list, tuple)):
        for item in value:
            _check_value(item, path)
        return
    if isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, str):
                raise BadConfig(f"Patch {path}: mapping key {key!r} is not a string", where=path,
                                fix="use string keys")
            _check_value(item, path)
        return
    raise BadConfig(f"Patch {path}: a {type(value).__name__} cannot be written to a trainer config",
                    where=path, fix="use None, bool, int, float, str, or lists and mappings of them")


def _plain(value: Any) -> Any:
    if isinstance(value, (list, tuple)):
        return [_plain(item) for item in value]
    if isinstance(value, dict):
        return {key: _plain(item) for key, item in value.items()}
    return value


def _splice(original: str, before: str, after: str) -> str:
    """Apply the ``before`` -> ``after`` line diff to ``original``, which ``before`` re-renders."""
    newline = "\r\n" if "\r\n" in original else "\n"
    source = original.splitlines()
    rendered, patched = before.splitlines(), after.splitlines()
    to_source: dict[int, int] = {}
    matcher = difflib.SequenceMatcher(None, source, rendered, autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal" or (tag == "replace" and i2 - i1 == j2 - j1):
            to_source.update({j1 + k: i1 + k for k in range(j2 - j1)})
    lines: list[str] = []
    matcher = difflib.SequenceMatcher(None, rendered, patched, autojunk=False)
    for tag, j1, j2, k1, k2 in matcher.get_opcodes():
        if tag == "equal":
            lines.extend(source[to_source[j]] if j in to_source else rendered[j] for j in range(j1, j2))
        else:
            lines.extend(patched[k1:k2])
    ending = newline if original.endswith(("\n", "\r")) else ""
    return newline.join(lines) + ending


class _Representer(RoundTripRepresenter):
    """Round-trip representer writing None as ``null`` (not an empty value) and floats PyYAML reads.

    A subclass, so ruamel's shared representer registry stays untouched for other users.
    """


def _represent_null(representer: Any, _data: None) -> Any:
    return representer.represent_scalar("tag:yaml.org,2002:null", "null")


def _represent_float(representer: Any, data: float) -> Any:
    return representer.represent_scalar("tag:yaml.org,2002:float", float_text(data))


_Representer.add_representer(type(None), _represent_null)
_Representer.add_representer(float, _represent_float)


def float_text(value: float) -> str:
    """A float as YAML text that PyYAML (YAML 1.1) also reads as a float: ``1.0e-05``, never ``1e-05``."""
    if math.isnan(value):
        return ".nan"
    if math.isinf(value):
        return ".inf" if value > 0 else "-.inf"
    text = repr(value)
    if "e" not in text:
        return text
    mantissa, exponent = text.split("e")
    if "." not in mantissa:
        mantissa += ".0"
    sign = "-" if exponent.startswith("-") else "+"
    return f"{mantissa}e{sign}{exponent.lstrip('+-')}"
