"""Prerequisite probing: LTX checkpoints, Gemma text encoders, and the LTX-2 trainer checkout.

Owns where model files are looked for (``/models``, ``~/models``, ``$LTX_MODELS_DIR``), the local-only
rule for model paths (a URL is a ``BadInput``), and the checkout check (configs, scripts, ``uv
sync`` state, git commit read straight from ``.git``). Anything merely missing is reported as a
``Finding`` with a concrete next step, never raised: the plan lists it and the run still reaches
the approval gate.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from ltx_pipeline.errors import BadInput
from ltx_pipeline.probing import Finding, FindingStatus, to_plain

__all__ = [
    "LTX2_REPO",
    "ModelSearch",
    "PathCheck",
    "TrainerCheck",
    "check_model_path",
    "check_trainer_root",
    "default_model_dirs",
    "find_model_files",
]

LTX2_REPO = "https://github.com/Lightricks/LTX-2"
_URL = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")
_SHA = re.compile(r"^[0-9a-f]{40}([0-9a-f]{24})?$")
_DOWNLOAD = ("download the files named in the LTX-2 README ({repo}) into $LTX_MODELS_DIR or ~/models "
             "with `huggingface-cli download`, or pass {option} PATH").format
_CLONE = f"clone {LTX2_REPO} and run `uv sync` at its root, then pass --trainer-root PATH or set LTX2_ROOT"
ModelKind = Literal["checkpoint", "text_encoder"]


def default_model_dirs(env: Mapping[str, str] | None = None, home: Path | None = None) -> list[Path]:
    """Where model files are looked for: ``/models``, ``~/models``, ``$LTX_MODELS_DIR`` (deduplicated)."""
    env = os.environ if env is None else env
    dirs = [Path("/models"), (home or Path.home()) / "models"]
    if env.get("LTX_MODELS_DIR"):
        dirs.append(Path(env["LTX_MODELS_DIR"]).expanduser())
    return list(dict.fromkeys(dirs))


@dataclass(frozen=True)
class ModelSearch:
    """LTX checkpoints and Gemma text encoders found in the model folders."""

    searched: tuple[str, ...]
    checkpoints: tuple[str, ...]
    text_encoders: tuple[str, ...]

    def to_dict(self) -> dict:
        """Plain JSON data."""
        return to_plain(self)

    def to_findings(self) -> list[Finding]:
        """One row for the checkpoint and one for the text encoder."""
        where = ", ".join(self.searched)
        return [
            _search_finding("LTX checkpoint", self.checkpoints, where, "--model-path"),
            _search_finding("Gemma text encoder", self.text_encoders, where, "--text-encoder-path"),
        ]


def _search_finding(item: str, found: tuple[str, ...], where: str, option: str) -> Finding:
    if not found:
        return Finding(item, "missing", f"none found in {where}", _DOWNLOAD(repo=LTX2_REPO, option=option))
    if len(found) > 1:
        return Finding(item, "warning", f"{len(found)} candidates: {', '.join(found)}",
                       f"pass {option} to choose the one to train with")
    return Finding(item, "ok", found[0])


def _children(folder: Path) -> list[os.DirEntry]:
    try:
        with os.scandir(folder) as entries:
            return sorted(entries, key=lambda entry: entry.name)
    except OSError:
        return []


def _is_gemma_dir(entry: os.DirEntry) -> bool:
    return any(child.name == "config.json" or child.name.endswith(".safetensors")
               for child in _children(Path(entry.path)))


def find_model_files(dirs: Iterable[Path]) -> ModelSearch:
    """Look up to two levels deep for LTX ``.safetensors`` files and Gemma text encoders.

    A checkpoint is a ``.safetensors`` file whose name contains "ltx" (any case). A text encoder
    is a folder whose name contains "gemma" holding a ``config.json`` or ``.safetensors`` files, or
    a ``.safetensors`` file whose name contains "gemma" (a split pack's packed encoder).
    """
    searched, checkpoints, encoders = [], [], []
    for top in dirs:
        searched.append(str(top))
        level = [top]
        for _depth in (1, 2):
            next_level = []
            for folder in level:
                for entry in _children(folder):
                    name = entry.name.lower()
                    if entry.is_dir():
                        if "gemma" in name and _is_gemma_dir(entry):
                            encoders.append(entry.path)
                        else:
                            next_level.append(Path(entry.path))
                    elif name.endswith(".safetensors") and entry.is_file():
                        if "gemma" in name:
                            encoders.append(entry.path)
                        elif "ltx" in name:
                            checkpoints.append(entry.path)
            level = next_level
    return ModelSearch(tuple(searched), tuple(dict.fromkeys(checkpoints)), tuple(dict.fromkeys(encoders)))


@dataclass(frozen=True)
class PathCheck:
    """A model path given by the user (or not), checked without loading it."""

    kind: ModelKind
    value: str | None
    path: str | None
    status: FindingStatus
    detail: str
    next_step: str | None = None

    def to_dict(self) -> dict:
        """Plain JSON data."""
        return to_plain(self)

    def to_finding(self) -> Finding:
        """The row for this path."""
        item = "LTX checkpoint" if self.kind == "checkpoint" else "Gemma text encoder"
        return Finding(item, self.status, self.detail, self.next_step)


def check_model_path(value: str | None, kind: ModelKind) -> PathCheck:
    """Check ``--model-path`` (kind "checkpoint") or ``--text-encoder-path`` (kind "text_encoder").

    Returns:
        "ok" for an existing ``.safetensors`` checkpoint, or an existing text-encoder folder or
        packed ``.safetensors`` file; "missing" with a next step when unset or absent.

    Raises:
        BadInput: a URL, or an existing path of the wrong type (a folder or non-safetensors file
            as the checkpoint; a non-safetensors file as the text encoder).
    """
    option = "--model-path" if kind == "checkpoint" else "--text-encoder-path"
    if value is None or not value.strip():
        return PathCheck(kind, value, None, "missing", f"{option} not given",
                         f"pass {option} PATH, or {_DOWNLOAD(repo=LTX2_REPO, option=option)}")
    if _URL.match(value.strip()):
        raise BadInput("Model paths must be local, not URLs", where=f"{option} {value}",
                       fix=f"download the file first (see {LTX2_REPO}) and pass its local path")
    path = Path(value.strip()).expanduser().absolute()
    wanted = "a .safetensors file" if kind == "checkpoint" else "a Gemma folder or a packed .safetensors file"
    if not path.exists():
        return PathCheck(kind, value, str(path), "missing", f"{path} does not exist",
                         f"fix {option}, or {_DOWNLOAD(repo=LTX2_REPO, option=option)}")
    is_safetensors = path.is_file() and path.suffix.lower() == ".safetensors"
    if kind == "checkpoint" and not is_safetensors:
        raise BadInput(f"The LTX checkpoint must be {wanted}", where=f"{option} {path}",
                       fix="pass the checkpoint's .safetensors file")
    if kind == "text_encoder" and not (path.is_dir() or is_safetensors):
        raise BadInput(f"The text encoder must be {wanted}", where=f"{option} {path}",
                       fix="pass the Gemma folder (the one holding config.json)")
    if kind == "text_encoder" and path.is_dir() and not (path / "config.json").is_file():
        return PathCheck(kind, value, str(path), "warning", f"{path} has no config.json",
                         "check that this is the Gemma model folder itself, not its parent")
    return PathCheck(kind, value, str(path), "ok", str(path))


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

    def to_dict(self) -> dict:
        """Plain JSON data, including ``synced`` and ``usable``."""
        return {**to_plain(self), "synced": self.synced, "usable": self.usable}

    def to_finding(self) -> Finding:
        """One row for the checkout, naming the first thing to fix."""
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
        if not self.synced:
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
    source = "--trainer-root" if root is not None else ("LTX2_ROOT" if env.get("LTX2_ROOT") else None)
    if root is None and env.get("LTX2_ROOT"):
        root = Path(env["LTX2_ROOT"])
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
