"""Backend ``reference``: the built-in toy trainer, which really trains on the CPU or a GPU.

Same contract as the real trainer in shape (config schema, argv, log lines, files, exit codes), so
the whole workflow, the demo and the tests run with no GPU and no weights. It is not LTX-2. Its
templates are this project's own (``reference_configs/``), written in the trainer's schema; an
assumed GPU is passed to it as a device capacity through the environment (see
``ltx_pipeline.reference_trainer``).
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

from ltx_pipeline.backends.base import (
    MIRROR_VALIDATOR,
    Capabilities,
    Distributed,
    LaunchSpec,
    Nodes,
    PreprocessScript,
)
from ltx_pipeline.backends.launch import LOG_ENV, accelerate_args, check_processes
from ltx_pipeline.backends.preprocess_scripts import script_args
from ltx_pipeline.env_names import REFERENCE_CAPACITY_ENV as CAPACITY_ENV
from ltx_pipeline.env_names import REFERENCE_SCALE_ENV as SCALE_ENV
from ltx_pipeline.errors import BadInput
from ltx_pipeline.ltx.trainer_config import ConfigFinding, load_trainer_config_file, validate_trainer_config

__all__ = ["ReferenceBackend"]

TEMPLATES = Path(__file__).resolve().parent / "reference_configs"
#: The toy's module for each of the trainer's preprocessing scripts.
_TOY_SCRIPTS: dict[PreprocessScript, str] = {"dataset": "preprocess", "videos": "process_videos",
                                             "captions": "process_captions"}


class ReferenceBackend:
    """The toy trainer in ``ltx_pipeline.reference_trainer``.

    With an assumed GPU (``--assume-gpu``) its memory is the toy's device capacity, checked against
    the toy's measured bytes times ``memory_scale`` (``reference_memory_scale`` in run.yaml); without one the toy
    runs on what it has (the CPU: no limit).
    """

    name = "reference"
    capabilities = Capabilities(runs_real_trainer=False, needs_gpu=False, uses_real_files=True)
    checkout_root: Path | None = None
    description = "reference (the built-in toy trainer: real training at toy scale, not LTX-2)"
    heavy_prerequisites: tuple[str, ...] = ()

    def __init__(self, capacity_mib: int | None = None, memory_scale: float | None = None) -> None:
        self.capacity_mib = capacity_mib
        self.memory_scale = memory_scale

    def _env(self) -> dict[str, str]:
        env = dict(LOG_ENV)
        if self.capacity_mib is not None:
            env[CAPACITY_ENV] = str(self.capacity_mib)
        if self.memory_scale is not None:
            env[SCALE_ENV] = repr(self.memory_scale)
        return env

    def template(self, config_name: str) -> Path:
        path = TEMPLATES / config_name
        if not path.is_file():
            available = ", ".join(sorted(p.name for p in TEMPLATES.glob("*.yaml")))
            raise BadInput(f"The reference backend has no template {config_name}", where=str(TEMPLATES),
                           fix=f"use a mode it covers ({available}) or --backend ltx")
        return path

    def validator(self, *, relaxed_paths: bool = False) -> str:
        """Always the mirror: this backend has no trainer checkout of its own."""
        return MIRROR_VALIDATOR

    def validate(self, config_path: Path, *, relaxed_paths: bool = False) -> list[ConfigFinding]:
        return validate_trainer_config(load_trainer_config_file(config_path), relaxed_paths=relaxed_paths,
                                       cwd=config_path.resolve().parent)

    def train_command(self, config_path: Path, *, num_processes: int = 1, distributed: Distributed = "none",
                      nodes: Nodes | None = None) -> LaunchSpec:
        check_processes(num_processes, distributed, nodes)
        config = str(config_path.resolve())
        trainer = ["-m", "ltx_pipeline.reference_trainer", config, "--disable-progress-bars"]
        if distributed == "none":
            argv = [sys.executable, *trainer]
        elif distributed == "ddp":
            # Real DDP through accelerate's own launcher, as a module: over gloo when no GPU is visible,
            # NCCL otherwise. (`--cpu` would make accelerate start a single process.) With ``nodes``,
            # each machine's launcher joins the rendezvous at the rank-0 machine's address.
            argv = [sys.executable, "-m", "accelerate.commands.launch", "--multi_gpu",
                    *accelerate_args(num_processes, None, nodes=nodes)[1:], *trainer]
        else:
            raise BadInput(f"The reference backend runs single-process or DDP, not {distributed}",
                           where="--distributed", fix="use --distributed ddp (or none)")
        return LaunchSpec(tuple(argv), config_path.resolve().parent, self._env())

    def preprocess_command(self, dataset: Path, buckets: str, output_dir: Path, *, model_path: str,
                           text_encoder_path: str, trigger: str | None = None,
                           extra_flags: Sequence[str] = (), script: PreprocessScript = "dataset",
                           num_processes: int = 1) -> LaunchSpec:
        """The toy's ``preprocess`` (its ``process_dataset.py``), ``process_videos`` or ``process_captions``,
        with the real scripts' arguments, in one process: the toy's scripts do not shard their rows
        (``capabilities.shards_preprocessing`` is False, so the engine asks for one).

        Raises:
            BadInput: ``num_processes`` other than 1; as ``script_args``.
        """
        if num_processes != 1:
            raise BadInput(f"The reference backend preprocesses in one process, not {num_processes}",
                           where="preprocess_processes", fix="leave preprocess_processes out (or give 1)")
        argv = [sys.executable, "-m", f"ltx_pipeline.reference_trainer.{_TOY_SCRIPTS[script]}",
                *script_args(script, dataset, buckets, output_dir, model_path=model_path,
                             text_encoder_path=text_encoder_path, trigger=trigger, extra_flags=extra_flags)]
        return LaunchSpec(tuple(argv), dataset.resolve().parent, dict(LOG_ENV))

    def holdout_loss_command(self, job: Path) -> LaunchSpec:
        """The toy's ``holdout_loss`` module: the same job and protocol as the real trainer's script."""
        argv = (sys.executable, "-m", "ltx_pipeline.reference_trainer.holdout_loss", str(job.resolve()))
        return LaunchSpec(argv, job.resolve().parent, self._env())

    def base_weights(self, folder: Path, seed: int = 0) -> Path:
        """The toy's frozen base weights in ``folder``, created once from a seed (seconds, CPU)."""
        output = folder / "reference-base.safetensors"
        if not output.is_file():
            folder.mkdir(parents=True, exist_ok=True)
            spec = self.base_weights_command(output, seed)
            done = subprocess.run(list(spec.argv), cwd=spec.cwd, capture_output=True, text=True,  # noqa: S603
                                  timeout=600, check=False)
            if done.returncode != 0:
                tail = (done.stderr or done.stdout).strip().splitlines()[-1:] or ["no output"]
                raise BadInput(f"Could not create the reference base weights: {tail[0]}", where=str(output),
                               fix="check the disk and the torch installation")
        return output

    def base_weights_command(self, output: Path, seed: int = 0) -> LaunchSpec:
        """Create the frozen base weights file the toy model loads (``model.model_path``)."""
        argv = (sys.executable, "-m", "ltx_pipeline.reference_trainer.make_base", str(output.resolve()),
                "--seed", str(seed))
        return LaunchSpec(argv, output.resolve().parent, dict(LOG_ENV))

