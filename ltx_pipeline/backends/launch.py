"""Argv builders shared by the backends: the trainer flags and the ``accelerate launch`` prefix.

The trainer's progress bars print nothing to a redirected stdout (facts §4.2), so training always
gets ``--disable-progress-bars``; Rich wraps log lines at 80 columns unless ``COLUMNS`` is set
(facts §4.1), so every launch sets a wide ``COLUMNS`` and ``PYTHONUNBUFFERED=1``. Sharded preprocessing
(``sharded_preprocess_args``) rendezvouses on a port free at the time its command is built, so two runs
preprocessing on one machine never meet on accelerate's default port.
"""

from __future__ import annotations

import socket
from collections.abc import Sequence
from pathlib import Path

from ltx_pipeline.backends.base import Distributed, Nodes
from ltx_pipeline.errors import BadInput

__all__ = ["LOG_ENV", "accelerate_args", "accelerate_config_name", "check_processes", "free_port",
           "preprocess_args", "refuse_overwrite", "sharded_preprocess_args"]

LOG_ENV = {"PYTHONUNBUFFERED": "1", "COLUMNS": "500"}
_CONFIG_FILES = {"ddp": "ddp.yaml", "ddp-compile": "ddp_compile.yaml", "fsdp": "fsdp.yaml",
                 "fsdp-compile": "fsdp_compile.yaml"}


def accelerate_config_name(distributed: Distributed) -> str | None:
    """The trainer's accelerate preset file for a distributed mode (None for a single process)."""
    return _CONFIG_FILES.get(distributed)


def check_processes(num_processes: int, distributed: Distributed, nodes: Nodes | None = None) -> None:
    """Refuse combinations that cannot launch: N > 1 (on one or all machines) without a distributed mode, or N < 1.

    Raises:
        BadInput: with the option to change.
    """
    if num_processes < 1:
        raise BadInput(f"--num-processes must be at least 1, got {num_processes}", where="--num-processes",
                       fix="pass 1 or more")
    total = num_processes * (nodes.count if nodes else 1)
    if total > 1 and distributed == "none":
        raise BadInput(f"{total} processes need a distributed mode", where="--distributed",
                       fix="pass --distributed ddp (LoRA) or fsdp (full fine-tune)")


def accelerate_args(num_processes: int, config_file: str | None, *, cpu: bool = False,
                    nodes: Nodes | None = None) -> list[str]:
    """``accelerate launch`` options: the process count overrides the preset's 4 (facts §2.3).

    Over several machines accelerate's ``--num_processes`` is the total of all of them (it starts
    ``num_processes // num_machines`` per machine), so it is ``num_processes`` (this machine's) x count;
    the machine flags override the presets' ``num_machines: 1``/``machine_rank: 0``.
    """
    total = num_processes * (nodes.count if nodes else 1)
    args = ["launch", "--num_processes", str(total)]
    if config_file:
        args += ["--config_file", config_file]
    if nodes is not None and nodes.count > 1:
        args += ["--num_machines", str(nodes.count), "--machine_rank", str(nodes.rank),
                 "--main_process_ip", nodes.main_ip, "--main_process_port", str(nodes.main_port)]
    if cpu:
        args.append("--cpu")
    return args


def sharded_preprocess_args(num_processes: int, config_file: str | None, main_port: int) -> list[str]:
    """``accelerate launch`` options for a preprocessing script over ``num_processes`` ranks on this machine.

    ``--multi_gpu`` as the trainer's presets say (``distributed_type: MULTI_GPU``; the preset, when given, keeps
    a user's default accelerate config out of it), one rank per GPU; the scripts shard themselves on
    ``PartialState`` (each rank takes rows rank, rank + N, ...). ``--tee 3`` makes the launcher prefix every
    line with its rank (``[default1]:``), so the log shows what each rank did (``trainer_log`` strips it).
    """
    args = ["launch", "--num_processes", str(num_processes)]
    if config_file:
        args += ["--config_file", config_file]
    return [*args, "--multi_gpu", "--main_process_port", str(main_port), "--tee", "3"]


def free_port() -> int:
    """A TCP port no process listens on now (the OS's choice), for a one-machine rendezvous."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def refuse_overwrite(extra_flags: Sequence[str]) -> None:
    """Refuse ``--overwrite``: existing data is never overwritten by the engine, whichever script preprocesses.

    Raises:
        BadInput: it was asked for.
    """
    if "--overwrite" in extra_flags:
        raise BadInput("The engine never passes --overwrite to preprocessing", where="preprocess",
                       fix="preprocess into a new folder instead")


def preprocess_args(dataset: Path, buckets: str, output_dir: Path, *, model_path: str, text_encoder_path: str,
                    trigger: str | None, extra_flags: Sequence[str]) -> list[str]:
    """The arguments of ``process_dataset.py`` (and the toy's preprocess), never with ``--overwrite``.

    Raises:
        BadInput: ``--overwrite`` was asked for; existing data is never overwritten by the engine.
    """
    refuse_overwrite(extra_flags)
    args = [str(dataset.resolve()), "--resolution-buckets", buckets, "--model-path", model_path,
            "--text-encoder-path", text_encoder_path, "--output-dir", str(output_dir.resolve())]
    if trigger:
        args += ["--lora-trigger", trigger]
    return args + list(extra_flags)
