"""Prerequisite probing: LTX checkpoints, Gemma text encoders, and the LTX-2 trainer checkout.

Owns where model files are looked for (``/models``, ``~/models``, ``$LTX_MODELS_DIR``), the local-only
rule for model paths (a URL is a ``BadInput``), and the checkout check (configs, scripts, ``uv
sync`` state, git commit read straight from ``.git``). Anything merely missing is reported as a
``Finding`` with a concrete next step, never raised: the plan lists it and the run still reaches
the approval gate. Model files are recognised by content (a safetensors header that parses, a
``config.json`` naming a Gemma ``model_type``), never loaded and never trusted by name alone.
"""

from __future__ import annotations

import json
import os
import re
import struct
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Literal

from ltx_pipeline.env_names import LTX2_ROOT_ENV, MODELS_DIR_ENV
from ltx_pipeline.errors import BadInput
from ltx_pipeline.probing import Finding, FindingStatus, plain_record

__all__ = [
    "LTX2_REPO",
    "ModelSearch",
    "PathCheck",
    "TrainerCheck",
    "check_model_path",
    "check_trainer_root",
    "default_model_dirs",
    "find_model_files",
    "gemma_model_type",
    "safetensors_header",
]

LTX2_REPO = "https://github.com/Lightricks/LTX-2"
_URL = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")
_SHA = re.compile(r"^[0-9a-f]{40}([0-9a-f]{24})?$")
_DOWNLOAD = ("download the files named in the LTX-2 README ({repo}) into $LTX_MODELS_DIR or ~/models "
             "with `huggingface-cli download`, or pass {option} PATH").format
_CLONE = f"clone {LTX2_REPO} and run `uv sync` at its root, then pass --trainer-root PATH or set LTX2_ROOT"
_HEADER_LIMIT = 100 * 2**20  # the safetensors format itself refuses headers over 100 MB
_CONFIG_LIMIT = 4 * 2**20
_NEEDS_GEMMA = "LTX-2 needs a Gemma text encoder (model_type gemma3)"
_WANTED = {"checkpoint": "LTX checkpoint (.safetensors with a valid header)",
           "text_encoder": "Gemma text encoder (a folder whose config.json has model_type gemma*)"}
ModelKind = Literal["checkpoint", "text_encoder"]


def default_model_dirs(env: Mapping[str, str] | None = None, home: Path | None = None) -> list[Path]:
    """Where model files are looked for: ``/models``, ``~/models``, ``$LTX_MODELS_DIR`` (deduplicated)."""
    env = os.environ if env is None else env
    dirs = [Path("/models"), (home or Path.home()) / "models"]
    if env.get(MODELS_DIR_ENV):
        dirs.append(Path(env[MODELS_DIR_ENV]).expanduser())
    return list(dict.fromkeys(dirs))


def safetensors_header(path: Path) -> tuple[dict[str, Any] | None, str | None]:
    """Read a safetensors header without loading any tensor: 8 bytes little-endian length N, N bytes of JSON.

    Returns:
        ``(header, None)`` when N is sane (2 bytes to 100 MB, inside the file), the header is a JSON
        object naming at least one tensor (``dtype``, ``shape``, ``data_offsets``; ``__metadata__``
        optional) and every tensor's data lies inside the file; else ``(None, why)``.
    """
    try:
        size = path.stat().st_size
        with path.open("rb") as handle:
            prefix = handle.read(8)
            if len(prefix) < 8:
                return None, f"it is {size} bytes, too short to hold a safetensors header"
            (length,) = struct.unpack("<Q", prefix)
            if not 2 <= length <= min(_HEADER_LIMIT, size - 8):
                return None, f"it is {size} bytes and its first 8 bytes give a header length of {length}"
            raw = handle.read(length)
    except OSError as exc:
        return None, f"it cannot be read ({exc.strerror or exc})"
    try:
        header = json.loads(raw.decode("utf-8"))
    except ValueError:  # UnicodeDecodeError and JSONDecodeError are both ValueErrors
        return None, "its header is not JSON"
    if not isinstance(header, dict):
        return None, "its header is not a JSON object"
    if not isinstance(header.get("__metadata__", {}), dict):
        return None, "its __metadata__ is not a JSON object"
    ends = [_tensor_end(info) for name, info in header.items() if name != "__metadata__"]
    if not ends:
        return None, "its header lists no tensors"
    if None in ends:
        return None, "its header has a tensor without a valid dtype, shape and data_offsets"
    data, needed = size - 8 - length, max(e for e in ends if e is not None)
    if needed > data:
        return None, f"its header describes {needed} bytes of tensor data but only {data} follow (a truncated file?)"
    return header, None


def _tensor_end(info: Any) -> int | None:
    """The end offset of one tensor's data, or None when its entry is malformed."""
    if not isinstance(info, dict) or not isinstance(info.get("dtype"), str):
        return None
    shape, offsets = info.get("shape"), info.get("data_offsets")
    if not isinstance(shape, list) or not all(isinstance(d, int) and d >= 0 for d in shape):
        return None
    if not (isinstance(offsets, list) and len(offsets) == 2 and all(isinstance(o, int) for o in offsets)):
        return None
    return offsets[1] if 0 <= offsets[0] <= offsets[1] else None


def _metadata_config(header: Mapping[str, Any]) -> dict[str, Any] | None:
    """The JSON object in the header's ``__metadata__["config"]`` (LTX checkpoints carry one), or None."""
    raw = (header.get("__metadata__") or {}).get("config")
    try:
        config = json.loads(raw) if isinstance(raw, str) else None
    except ValueError:
        return None
    return config if isinstance(config, dict) else None


def gemma_model_type(folder: Path) -> tuple[str | None, str | None]:
    """Whether ``folder`` is a Gemma text encoder, from its ``config.json`` alone.

    Returns:
        ``(model_type, None)`` when ``model_type`` (or ``text_config.model_type``) starts with "gemma"
        (gemma3, gemma3_text, gemma2, ...); else ``(None, why)``: "/m/x/config.json says model_type 'llama'; ...".
    """
    config = folder / "config.json"
    if not config.is_file():
        return None, f"{folder} has no config.json, so it is not a model folder; {_NEEDS_GEMMA}"
    try:
        if config.stat().st_size > _CONFIG_LIMIT:
            return None, f"{config} is over 4 MB, not a model config; {_NEEDS_GEMMA}"
        data = json.loads(config.read_text(encoding="utf-8"))
    except OSError as exc:
        return None, f"{config} cannot be read ({exc.strerror or exc})"
    except ValueError:
        return None, f"{config} is not valid JSON; {_NEEDS_GEMMA}"
    if not isinstance(data, dict):
        return None, f"{config} is not a JSON object; {_NEEDS_GEMMA}"
    text_config = data.get("text_config")
    types = [data.get("model_type"), text_config.get("model_type") if isinstance(text_config, dict) else None]
    named = [t for t in types if isinstance(t, str) and t]
    gemma = next((t for t in named if t.lower().startswith("gemma")), None)
    if gemma:
        return gemma, None
    said = f"says model_type {named[0]!r}" if named else "has no model_type"
    return None, f"{config} {said}; {_NEEDS_GEMMA}"


def _file_kind(path: Path) -> tuple[ModelKind | None, str | None]:
    """What a ``.safetensors`` file found in a model folder is, by content first, then by name.

    Returns ``(kind, None)``, ``(None, why)`` for a file named like a model ("ltx", "gemma") whose
    header does not parse, or ``(None, None)`` for anything else (a LoRA, a VAE, another model).
    """
    name = path.name.lower()
    header, why = safetensors_header(path)
    if header is None:
        return None, f"{path} is not a valid safetensors file: {why}" if "ltx" in name or "gemma" in name else None
    config = _metadata_config(header)
    if config is not None and "transformer" in config:  # the LTX checkpoint's own description
        return "checkpoint", None
    if "gemma" in name:  # a split pack's packed text encoder
        return "text_encoder", None
    return ("checkpoint", None) if config is None and "ltx" in name else (None, None)


@dataclass(frozen=True)
class ModelSearch:
    """LTX checkpoints and Gemma text encoders found in the model folders (``searched``).

    ``labels`` are the folders as messages show them (``$LTX_MODELS_DIR=/x``); ``rejected_*`` hold one
    sentence per file or folder named like a model that failed the content checks.
    """

    searched: tuple[str, ...]
    labels: tuple[str, ...]
    checkpoints: tuple[str, ...]
    text_encoders: tuple[str, ...]
    rejected_checkpoints: tuple[str, ...] = ()
    rejected_text_encoders: tuple[str, ...] = ()

    @property
    def where(self) -> str:
        """The searched folders, for a message."""
        return ", ".join(self.labels) or "no folder"

    def found(self, kind: ModelKind) -> tuple[str, ...]:
        """The accepted candidates of one kind."""
        return self.checkpoints if kind == "checkpoint" else self.text_encoders

    def rejected(self, kind: ModelKind) -> tuple[str, ...]:
        """Why each look-alike of one kind was refused."""
        return self.rejected_checkpoints if kind == "checkpoint" else self.rejected_text_encoders

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON data."""
        return plain_record(self)

    def to_findings(self) -> list[Finding]:
        """One row for the checkpoint and one for the text encoder, as if neither path was given."""
        return [check_model_path(None, kind, self).to_finding() for kind in ("checkpoint", "text_encoder")]


def _children(folder: Path) -> list[os.DirEntry[str]]:
    try:
        with os.scandir(folder) as entries:
            return sorted(entries, key=lambda entry: entry.name)
    except OSError:
        return []


def find_model_files(dirs: Iterable[Path], env: Mapping[str, str] | None = None) -> ModelSearch:
    """Look up to two levels deep for LTX checkpoints and Gemma text encoders, by content.

    A folder holding a ``config.json`` is a model folder (not searched further): a text encoder when
    ``gemma_model_type`` accepts it. A ``.safetensors`` file goes by ``_file_kind``. Look-alikes by name
    that fail the checks are kept, with the reason, in ``rejected_*``. ``env`` only labels folders.
    """
    env = os.environ if env is None else env
    env_dir = Path(env[MODELS_DIR_ENV]).expanduser() if env.get(MODELS_DIR_ENV) else None
    searched, labels = [], []
    found: dict[ModelKind, list[str]] = {"checkpoint": [], "text_encoder": []}
    rejected: dict[ModelKind, list[str]] = {"checkpoint": [], "text_encoder": []}
    for top in dirs:
        searched.append(str(top))
        labels.append(f"$LTX_MODELS_DIR={top}" if top == env_dir else str(top))
        level = [top]
        for _depth in (1, 2):
            next_level = []
            for folder in level:
                for entry in _children(folder):
                    path = Path(entry.path)
                    if entry.is_dir():
                        model_type, why = gemma_model_type(path)
                        if model_type:
                            found["text_encoder"].append(entry.path)
                        elif "gemma" in entry.name.lower() and why:
                            rejected["text_encoder"].append(why)
                        if not (path / "config.json").is_file():
                            next_level.append(path)
                    elif entry.name.lower().endswith(".safetensors") and entry.is_file():
                        kind, why = _file_kind(path)
                        if kind:
                            found[kind].append(entry.path)
                        elif why:
                            rejected["text_encoder" if "gemma" in entry.name.lower() else "checkpoint"].append(why)
            level = next_level
    unique = {kind: tuple(dict.fromkeys(paths)) for kind, paths in found.items()}
    return ModelSearch(tuple(searched), tuple(labels), unique["checkpoint"], unique["text_encoder"],
                       tuple(dict.fromkeys(rejected["checkpoint"])), tuple(dict.fromkeys(rejected["text_encoder"])))


@dataclass(frozen=True)
class PathCheck:
    """A model path given by the user (or not), checked by content without loading it.

    ``value`` is the path checked as given (or as found), ``path`` it made absolute; ``source`` is
    "option" (``--model-path``/``--text-encoder-path``), "search" (the only candidate found), or None.
    """

    kind: ModelKind
    value: str | None
    path: str | None
    status: FindingStatus
    detail: str
    next_step: str | None = None
    source: Literal["option", "search"] | None = None

    @property
    def usable(self) -> bool:
        """The path passed its checks (perhaps with a warning): the file to train with."""
        return self.path is not None and self.status != "missing"

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON data."""
        return plain_record(self)

    def to_finding(self) -> Finding:
        """The row for this path."""
        item = "LTX checkpoint" if self.kind == "checkpoint" else "Gemma text encoder"
        return Finding(item, self.status, self.detail, self.next_step)


def check_model_path(value: str | None, kind: ModelKind, search: ModelSearch | None = None) -> PathCheck:
    """Check ``--model-path`` (kind "checkpoint") or ``--text-encoder-path`` (kind "text_encoder").

    Args:
        value: the option's value; None or blank when not given.
        search: the model-folder search, used when ``value`` is not given: its only candidate is
            checked, and otherwise the message lists the folders searched (and any look-alikes).

    Returns:
        "ok" for a checkpoint whose safetensors header parses, or a Gemma folder or packed
        ``.safetensors`` text encoder; "warning" for a checkpoint whose metadata names no transformer;
        "missing" with a next step when unset, absent, or failing the content check (a llama config).

    Raises:
        BadInput: a URL, or an existing path of the wrong type (a folder or non-safetensors file
            as the checkpoint; a non-safetensors file as the text encoder).
    """
    option = "--model-path" if kind == "checkpoint" else "--text-encoder-path"
    if value is not None and value.strip():
        return _check_given(value, kind, option)
    download = _DOWNLOAD(repo=LTX2_REPO, option=option)
    if search is None:
        return PathCheck(kind, value, None, "missing", f"{option} not given", f"pass {option} PATH, or {download}")
    found, rejected = search.found(kind), search.rejected(kind)
    if len(found) == 1:
        check = _check_given(found[0], kind, option)
        return replace(check, source="search", detail=f"{check.detail}, found in {search.where}")
    if found:
        return PathCheck(kind, value, None, "missing",
                         f"{len(found)} candidates in {search.where}: {', '.join(found)}; {option} not given",
                         f"pass {option} to choose the one to train with")
    refused = f"; refused: {'; '.join(rejected)}" if rejected else ""
    return PathCheck(kind, value, None, "missing",
                     f"no {_WANTED[kind]} in {search.where}; {option} not given{refused}", download)


def _check_given(value: str, kind: ModelKind, option: str) -> PathCheck:
    if _URL.match(value.strip()):
        raise BadInput("Model paths must be local, not URLs", where=f"{option} {value}",
                       fix=f"download the file first (see {LTX2_REPO}) and pass its local path")
    path = Path(value.strip()).expanduser().absolute()
    if not path.exists():
        return PathCheck(kind, value, str(path), "missing", f"{path} does not exist",
                         f"fix {option}, or {_DOWNLOAD(repo=LTX2_REPO, option=option)}", "option")
    is_safetensors = path.is_file() and path.suffix.lower() == ".safetensors"
    if kind == "checkpoint" and not is_safetensors:
        raise BadInput("The LTX checkpoint must be a .safetensors file", where=f"{option} {path}",
                       fix="pass the checkpoint's .safetensors file")
    if kind == "text_encoder" and not (path.is_dir() or is_safetensors):
        raise BadInput("The text encoder must be a Gemma folder or a packed .safetensors file",
                       where=f"{option} {path}", fix="pass the Gemma folder (the one holding config.json)")
    if path.is_dir():
        model_type, why = gemma_model_type(path)
        if model_type is None:
            child = next((e.path for e in _children(path) if e.is_dir() and gemma_model_type(Path(e.path))[0]), None)
            step = (f"pass {option} {child} (the Gemma folder inside it)" if child else
                    f"pass {option} the Gemma folder (google/gemma-3-12b-it for LTX-2), or "
                    f"{_DOWNLOAD(repo=LTX2_REPO, option=option)}")
            return PathCheck(kind, value, str(path), "missing", str(why), step, "option")
        return PathCheck(kind, value, str(path), "ok", f"{path} (model_type {model_type})", None, "option")
    header, why = safetensors_header(path)
    if header is None:
        return PathCheck(kind, value, str(path), "missing", f"{path} is not a valid safetensors file: {why}",
                         f"download it again (an interrupted download leaves a truncated file), or fix {option}",
                         "option")
    config = _metadata_config(header)
    if kind == "checkpoint" and config is not None and "transformer" not in config:
        sections = ", ".join(map(str, config)) or "no sections"
        return PathCheck(kind, value, str(path), "warning", f"{path} has metadata config {sections}, no transformer",
                         f"check that {option} is the LTX checkpoint, not a VAE or another model", "option")
    return PathCheck(kind, value, str(path), "ok", str(path), None, "option")


@dataclass(frozen=True)
class TrainerCheck:
    """The LTX-2 trainer checkout: where it is and which parts are present."""

    root: str | None
    source: str | None
    exists: bool
    configs: tuple[str, ...]
    has_train_script: bool
    has_process_dataset_script: bool
    has_uv_lock: bool
    has_venv: bool
    writable: bool
    git_commit: str | None

    @property
    def synced(self) -> bool:
        """``uv sync`` has run: a lock file and a ``.venv`` at the root."""
        return self.has_uv_lock and self.has_venv

    @property
    def usable(self) -> bool:
        """Everything a heavy phase needs from the checkout is present."""
        scripts = self.has_train_script and self.has_process_dataset_script
        return bool(self.configs) and scripts and self.synced

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON data, including ``synced`` and ``usable``."""
        return {**plain_record(self), "synced": self.synced, "usable": self.usable}

    def to_finding(self, *, needs_sync: bool = True) -> Finding:
        """One row for the checkout, naming the first thing to fix.

        ``needs_sync`` is False when the trainer runs with ``--trainer-python``: the checkout then only
        provides the scripts and configs, and its own ``uv`` environment is not used.
        """
        item = "LTX-2 trainer checkout"
        if self.root is None:
            return Finding(item, "missing", "no --trainer-root given and LTX2_ROOT is not set", _CLONE)
        if not self.exists:
            return Finding(item, "missing", f"{self.root} does not exist", _CLONE)
        trainer = f"{self.root}/packages/ltx-trainer"
        if not self.configs:
            return Finding(item, "missing", f"{trainer}/configs/ has no YAML configs",
                           f"point --trainer-root at the root of an LTX-2 checkout ({LTX2_REPO})")
        scripts = (("scripts/train.py", self.has_train_script),
                   ("scripts/process_dataset.py", self.has_process_dataset_script))
        absent = [name for name, present in scripts if not present]
        if absent:
            return Finding(item, "missing", f"{trainer} lacks {' and '.join(absent)}",
                           f"update the checkout with `git -C {self.root} pull`")
        commit = f" at {self.git_commit[:12]}" if self.git_commit else ""
        if needs_sync and not self.synced:
            lacking = "uv.lock" if not self.has_uv_lock else ".venv"
            step = (f"run `uv sync` at {self.root}" if self.writable
                    else f"{self.root} is read-only: make it writable or clone a copy, then run "
                    "`uv sync` there")
            return Finding(item, "missing", f"{self.root}{commit} is not synced (no {lacking})", step)
        return Finding(item, "ok", f"{self.root}{commit}, {len(self.configs)} configs")


def _read_first_line(path: Path) -> str | None:
    try:
        return path.read_text(errors="replace").strip().splitlines()[0].strip()
    except (OSError, IndexError):
        return None


def _git_dir(root: Path) -> Path | None:
    dot_git = root / ".git"
    if dot_git.is_dir():
        return dot_git
    pointer = _read_first_line(dot_git)  # a worktree or submodule: "gitdir: PATH"
    if pointer and pointer.startswith("gitdir:"):
        target = Path(pointer.split(":", 1)[1].strip())
        return target if target.is_absolute() else root / target
    return None


def _git_commit(root: Path) -> str | None:
    git_dir = _git_dir(root)
    if git_dir is None:
        return None
    head = _read_first_line(git_dir / "HEAD")
    if head is None:
        return None
    if _SHA.match(head):
        return head
    if not head.startswith("ref:"):
        return None
    ref = head.split(":", 1)[1].strip()
    common = _read_first_line(git_dir / "commondir")
    places = [git_dir] + ([(git_dir / common)] if common else [])
    for place in places:
        loose = _read_first_line(place / ref)
        if loose and _SHA.match(loose):
            return loose
        try:
            packed = (place / "packed-refs").read_text(errors="replace").splitlines()
        except OSError:
            continue
        for line in packed:
            parts = line.split()
            if len(parts) == 2 and parts[1] == ref and _SHA.match(parts[0]):
                return parts[0]
    return None


def check_trainer_root(root: Path | None, env: Mapping[str, str] | None = None) -> TrainerCheck:
    """Find and check the LTX-2 trainer checkout, reading files only (it may be read-only).

    Args:
        root: ``--trainer-root``; else ``$LTX2_ROOT`` is used.
        env: environment to read ``LTX2_ROOT`` from; defaults to ``os.environ``.
    """
    env = os.environ if env is None else env
    source = "--trainer-root" if root is not None else (LTX2_ROOT_ENV if env.get(LTX2_ROOT_ENV) else None)
    if root is None and env.get(LTX2_ROOT_ENV):
        root = Path(env[LTX2_ROOT_ENV])
    if root is None:
        return TrainerCheck(None, None, False, (), False, False, False, False, False, None)
    root = root.expanduser().absolute()
    if not root.is_dir():
        return TrainerCheck(str(root), source, False, (), False, False, False, False, False, None)
    trainer = root / "packages" / "ltx-trainer"
    configs = tuple(sorted(entry.name for entry in _children(trainer / "configs")
                           if entry.name.endswith((".yaml", ".yml")) and entry.is_file()))
    return TrainerCheck(
        root=str(root),
        source=source,
        exists=True,
        configs=configs,
        has_train_script=(trainer / "scripts" / "train.py").is_file(),
        has_process_dataset_script=(trainer / "scripts" / "process_dataset.py").is_file(),
        has_uv_lock=(root / "uv.lock").is_file(),
        has_venv=(root / ".venv").is_dir(),
        writable=os.access(root, os.W_OK),
        git_commit=_git_commit(root),
    )
