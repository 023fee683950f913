"""The LTX-2 trainer checkout: where it is and which parts are present, read from files only.

Owns finding the checkout (``--trainer-root``, else ``$LTX2_ROOT``), checking its configs, scripts and
``uv sync`` state, and its git commit read straight from ``.git`` (worktrees, packed refs; no git binary:
the checkout may be read-only or git absent). A checkout that is missing or incomplete is a ``Finding``
with the next step, never raised.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ltx_pipeline.env_names import LTX2_ROOT_ENV
from ltx_pipeline.probing import Finding, plain_record
from ltx_pipeline.probing.model_files import folder_entries

__all__ = ["LTX2_REPO", "TrainerCheck", "check_trainer_root"]

LTX2_REPO = "https://github.com/Lightricks/LTX-2"
_SHA = re.compile(r"^[0-9a-f]{40}([0-9a-f]{24})?$")
_CLONE = f"clone {LTX2_REPO} and run `uv sync` at its root, then pass --trainer-root PATH or set LTX2_ROOT"


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
    configs = tuple(sorted(entry.name for entry in folder_entries(trainer / "configs")
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
