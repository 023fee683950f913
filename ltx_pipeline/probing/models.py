"""Model prerequisites: where LTX checkpoints and Gemma text encoders are looked for, and the user's paths checked.

Owns where model files are looked for (``/models``, ``~/models``, ``$LTX_MODELS_DIR``) and the local-only
rule for model paths (a URL is a ``BadInput``). Anything merely missing is reported as a ``Finding`` with a
concrete next step, never raised: the plan lists it and the run still reaches the approval gate. Files are
recognised by content (``probing/model_files.py``: a safetensors header that parses, a ``config.json`` naming
a Gemma ``model_type``), never loaded and never trusted by name alone. The trainer checkout's check is
``probing/trainer_checkout.py``; both are re-exported here, the door the probe phase and the backends use.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Literal

from ltx_pipeline.env_names import MODELS_DIR_ENV
from ltx_pipeline.errors import BadInput
from ltx_pipeline.probing import Finding, FindingStatus, plain_record
from ltx_pipeline.probing.model_files import (
    ModelKind,
    file_kind,
    folder_entries,
    gemma_model_type,
    metadata_config,
    safetensors_header,
)
from ltx_pipeline.probing.trainer_checkout import LTX2_REPO, TrainerCheck, check_trainer_root

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

_URL = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")
_DOWNLOAD = ("download the files named in the LTX-2 README ({repo}) into $LTX_MODELS_DIR or ~/models "
             "with `huggingface-cli download`, or pass {option} PATH").format
_WANTED = {"checkpoint": "LTX checkpoint (.safetensors with a valid header)",
           "text_encoder": "Gemma text encoder (a folder whose config.json has model_type gemma*)"}


def default_model_dirs(env: Mapping[str, str] | None = None, home: Path | None = None) -> list[Path]:
    """Where model files are looked for: ``/models``, ``~/models``, ``$LTX_MODELS_DIR`` (deduplicated)."""
    env = os.environ if env is None else env
    dirs = [Path("/models"), (home or Path.home()) / "models"]
    if env.get(MODELS_DIR_ENV):
        dirs.append(Path(env[MODELS_DIR_ENV]).expanduser())
    return list(dict.fromkeys(dirs))


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
                for entry in folder_entries(folder):
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
                        kind, why = file_kind(path)
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
            child = next((e.path for e in folder_entries(path) if e.is_dir() and gemma_model_type(Path(e.path))[0]),
                         None)
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
    config = metadata_config(header)
    if kind == "checkpoint" and config is not None and "transformer" not in config:
        sections = ", ".join(map(str, config)) or "no sections"
        return PathCheck(kind, value, str(path), "warning", f"{path} has metadata config {sections}, no transformer",
                         f"check that {option} is the LTX checkpoint, not a VAE or another model", "option")
    return PathCheck(kind, value, str(path), "ok", str(path), None, "option")
