"""``RequestOptions``: the request fields a command was given, assembled into one dict in one place.

``run`` and ``init`` hand their options here by name; ``given()`` turns them into the request
fields the user actually gave (None means "not given", so run.yaml's value stands): local paths
made absolute, so run.yaml means the same from any directory, and nothing else changed. Every
option travels under the request field of the same name (``--captioner`` as ``captioner``,
``--effective-batch`` as ``effective_batch``); ``request/`` validates them and resolves defaults.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ltx_pipeline.errors import BadRequest

__all__ = ["RequestOptions", "existing_path", "with_request_file"]

# What each path option names, in the fix of a path that does not exist.
_WHAT_IT_NAMES = {
    "--dataset": "your dataset (a metadata .csv/.json/.jsonl, a folder of clips, or a .precomputed folder)",
    "--request": "a run-request YAML file (a run's run.yaml, or one of workspaces/examples/)",
    "--surface": "a cost surface YAML file (format in the README)",
    "--holdout-file": "your own holdout rows (a .json or .jsonl file)",
}

def existing_path(path: Path, option: str) -> Path:
    """The absolute path of a file the user named with ``option``, or one line saying it does not exist.

    Raises:
        BadRequest: nothing is at ``path``; the fix says what ``option`` names.
    """
    resolved = path.expanduser().resolve()
    if not resolved.exists():
        raise BadRequest(f"{path} does not exist", where=option,
                         fix=f"give the path of {_WHAT_IT_NAMES.get(option, 'an existing file')}")
    return resolved


def with_request_file(request_file: Path | None, options: dict[str, Any]) -> dict[str, Any]:
    """The fields of the ``--request`` file, with the options given on the command line over them."""
    if request_file is None:
        return options
    from ltx_pipeline.request import read_request_file

    return {**read_request_file(existing_path(request_file, "--request")), **options}


# Given as they are (None: not given). Paths, lists and the evaluation options are handled in ``given``.
_PLAIN = ("mode", "training_mode", "strategy", "buckets", "rank", "steps", "learning_rate", "effective_batch",
          "trigger", "model_path", "text_encoder_path", "backend", "assume_gpu", "nvidia_smi", "accept_risk",
          "fresh_preprocess", "headroom", "processes", "checkpoint_interval", "validation_interval",
          "preprocess_processes")
_LATER = ("captioner", "vllm_url", "holdout", "nodes", "main_ip", "main_port", "autotune", "audio",
          "validation_media", "holdout_loss", "eval_checkpoints", "push_to_hub", "autotune_parallel")


@dataclass(frozen=True, kw_only=True)
class RequestOptions:
    """The request options of ``run`` (``init`` gives a few), each None when not given."""

    dataset: Path | None = None
    mode: str | None = None
    training_mode: str | None = None
    strategy: str | None = None
    buckets: str | None = None
    rank: int | None = None
    steps: int | None = None
    learning_rate: float | None = None
    effective_batch: int | None = None  # samples per optimizer step over all processes
    trigger: str | None = None
    trainer_root: Path | None = None
    trainer_python: Path | None = None
    model_path: str | None = None
    text_encoder_path: str | None = None
    backend: str | None = None
    surface: Path | None = None
    assume_gpu: str | None = None
    nvidia_smi: str | None = None
    accept_risk: bool | None = None
    fresh_preprocess: bool | None = None
    preprocess_processes: int | None = None
    headroom: float | None = None
    autotune: str | None = None
    audio: str | None = None
    validation_media: str | None = None
    processes: int | None = None
    nodes: int | None = None
    main_ip: str | None = None
    main_port: int | None = None
    checkpoint_interval: int | None = None
    validation_interval: int | None = None
    captioner: str | None = None
    vllm_url: str | None = None
    holdout: int | None = None
    holdout_file: Path | None = None
    eval_prompts: list[str] | None = None
    skip_eval: bool | None = None
    holdout_loss: str | None = None
    eval_checkpoints: str | None = None
    push_to_hub: str | None = None
    autotune_parallel: str | None = None
    slurm: bool | None = None
    slurm_args: list[str] | None = None
    config_set: list[str] | None = None  # --set KEY=VALUE, each read as YAML (ltx.user_settings)

    def given(self) -> dict[str, Any]:
        """The request fields the user actually gave, ready for ``check_request``.

        Raises:
            BadRequest: ``--dataset``, ``--surface`` or ``--holdout-file`` names a path that does not exist.
            BadInput: a ``--set`` that is not KEY=VALUE with a YAML value.
        """
        given: dict[str, Any] = {key: getattr(self, key) for key in _PLAIN}
        if self.dataset is not None:
            given["dataset"] = str(existing_path(self.dataset, "--dataset"))
        for key in ("model_path", "text_encoder_path", "nvidia_smi"):
            value = given.get(key)
            # Local paths are stored absolute so run.yaml means the same from any directory; URLs and
            # bare command names (nvidia-smi on PATH) are kept as given for the request to judge.
            if value and "://" not in value and (os.sep in value or key != "nvidia_smi"):
                given[key] = str(Path(value).expanduser().resolve())
        if self.trainer_root is not None:
            given["trainer_root"] = str(self.trainer_root.expanduser().resolve())
        if self.surface is not None:
            given["surface"] = str(existing_path(self.surface, "--surface"))
        given.update({key: getattr(self, key) for key in _LATER})
        if self.trainer_python is not None:
            given["trainer_python"] = str(self.trainer_python.expanduser().absolute())
        if self.holdout_file is not None:
            given["holdout_file"] = str(existing_path(self.holdout_file, "--holdout-file"))
        if self.eval_prompts:
            given["eval_prompts"] = list(self.eval_prompts)
        given["skip_eval"] = self.skip_eval
        given["slurm"] = self.slurm
        if self.slurm_args:
            given["slurm_args"] = list(self.slurm_args)
        if self.config_set:
            from ltx_pipeline.ltx.user_settings import parse_assignments

            given["config_set"] = parse_assignments(self.config_set)
        return {key: value for key, value in given.items() if value is not None}
