"""What a phase asks of a trainer backend, and the launch spec every command is built as.

A backend knows where the template configs are, how to validate a config, and how to build the
argv/env/cwd to preprocess a dataset and to train (single process, or ``accelerate launch`` with N
processes and a DDP/FSDP config). It returns commands and reads files; it never writes to the
store and never builds a shell string. Every launch carries a copy-pasteable printable form with
secrets redacted, which is what the store and logs keep.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, TypeGuard, get_args, runtime_checkable

from ltx_pipeline.errors import BadInput
from ltx_pipeline.ltx.launch_plan import Distributed
from ltx_pipeline.ltx.precomputed_layout import PreprocessScript

if TYPE_CHECKING:
    from ltx_pipeline.ltx.trainer_config import ConfigFinding

__all__ = ["Capabilities", "DEFAULT_MAIN_PORT", "DISTRIBUTED_MODES", "MIRRORED_TRAINER_VERSION", "MIRROR_VALIDATOR",
           "Distributed", "LaunchSpec", "MakesBaseWeights", "MeasuresHoldoutLoss", "Nodes", "PreprocessScript",
           "TrainerBackend", "is_distributed", "is_secret_name", "redact_env"]

DISTRIBUTED_MODES: tuple[str, ...] = get_args(Distributed)
#: The ltx-trainer release whose config schema ``ltx_pipeline.ltx.trainer_config`` mirrors.
MIRRORED_TRAINER_VERSION = "1.2.0"
#: Who validated, when it was the project's mirror of the trainer's schema (``TrainerBackend.validator``).
MIRROR_VALIDATOR = f"the built-in schema mirror (ltx-trainer {MIRRORED_TRAINER_VERSION})"
#: accelerate's own default rendezvous port (``--main_process_port``).
DEFAULT_MAIN_PORT = 29500
_SECRET_NAME = re.compile(r"(TOKEN|KEY|SECRET|PASSWORD|PASSWD|CREDENTIAL|AUTH)", re.IGNORECASE)


def is_distributed(mode: str) -> TypeGuard[Distributed]:
    """Whether ``mode`` is one of ``DISTRIBUTED_MODES`` (and so a ``Distributed`` value)."""
    return mode in DISTRIBUTED_MODES


def is_secret_name(name: str) -> bool:
    """Whether an environment variable name looks like it holds a token, key or password."""
    return bool(_SECRET_NAME.search(name))


def redact_env(env: Mapping[str, str]) -> dict[str, str]:
    """A copy safe to store or print: values of secret-looking variables replaced by ``***``."""
    return {k: ("***" if is_secret_name(k) else v) for k, v in env.items()}


@dataclass(frozen=True)
class LaunchSpec:
    """A command to run: argv (never a shell string), environment overrides and working directory.

    ``env`` holds only what the engine sets on top of the inherited environment; secrets the user
    exported (HF or W&B tokens) reach the child by inheritance and are never recorded.
    """

    argv: tuple[str, ...]
    cwd: Path
    env: dict[str, str] = field(default_factory=dict)

    @property
    def printable(self) -> str:
        """A copy-pasteable, shlex-quoted form: ``cd DIR && VAR=value argv...`` with secrets redacted.

        The ``cd`` is left out when the command itself names ``cwd`` as its ``--directory``.
        """
        assignments = " ".join(f"{k}={shlex.quote(v)}" for k, v in sorted(redact_env(self.env).items()))
        command = shlex.join(self.argv)
        line = f"{assignments} {command}" if assignments else command
        if self._sets_own_directory():
            return line  # e.g. `uv run --directory DIR`: a `cd DIR &&` before it would say it twice
        return f"cd {shlex.quote(str(self.cwd))} && {line}"

    def _sets_own_directory(self) -> bool:
        argv = list(self.argv)
        return any(flag == "--directory" and index + 1 < len(argv) and Path(argv[index + 1]) == self.cwd
                   for index, flag in enumerate(argv))

    def to_record(self) -> dict[str, Any]:
        """What may be stored: argv, cwd, redacted env overrides and the printable command."""
        return {"argv": list(self.argv), "cwd": str(self.cwd), "env": redact_env(self.env),
                "printable": self.printable}


@dataclass(frozen=True)
class Nodes:
    """One machine's place in a multi-machine launch: ``accelerate launch --num_machines count
    --machine_rank rank --main_process_ip main_ip --main_process_port main_port``.

    Every machine runs the same command but for its rank; the one of rank 0 hosts the rendezvous at
    ``main_ip:main_port``, which the others must reach.
    """

    count: int
    rank: int
    main_ip: str
    main_port: int = DEFAULT_MAIN_PORT

    def __post_init__(self) -> None:
        if self.count < 1 or not 0 <= self.rank < self.count:
            raise BadInput(f"Machine rank {self.rank} does not exist in a launch over {self.count} node(s)",
                           where="--machine-rank", fix=f"give a rank from 0 to {self.count - 1}")
        if not 0 < self.main_port < 65536:
            raise BadInput(f"Port {self.main_port} is not a TCP port", where="--main-port",
                           fix="give a free port from 1 to 65535 (default 29500)")
        if not self.main_ip.strip():
            raise BadInput("No address for the rank-0 machine", where="--main-ip",
                           fix="give the IP address or host name of the rank-0 node, reachable from the others")


@dataclass(frozen=True)
class Capabilities:
    """What a backend can do, asked by phases instead of its name (llm's ``can_stream``, ``supports_schema``).

    Attributes:
        runs_real_trainer: it drives the official LTX-2 trainer, so it needs that checkout, the model's files
            and the smoke test (``ltx``); the toy and simulated trainers bring their own.
        needs_gpu: its training needs a CUDA GPU on the machine that runs it (the toy trainer runs on a CPU).
        uses_real_files: its commands read and write the files a config names, so paths must exist,
            preprocessing really runs and validation writes sample files (the simulated trainer only pretends).
        simulated_gpu: the GPU a cost surface stands in for, as an ``--assume-gpu`` spec
            (``NAME,MEMORY_MIB,COUNT``): the probe plans for it instead of probing, and the surface file decides
            what autotune's trials measure (``simulated``); None where training meets real hardware.
        shards_preprocessing: its preprocessing scripts split their rows over ranks when started under
            ``accelerate launch`` (``preprocess_command(num_processes=N)``, ``ltx``); the toy's run one process.
    """

    runs_real_trainer: bool
    needs_gpu: bool
    uses_real_files: bool
    simulated_gpu: str | None = None
    shards_preprocessing: bool = False


class TrainerBackend(Protocol):
    """A trainer the engine can drive.

    Its attributes are read-only members: phases only read them, so a class attribute, an instance
    attribute set in ``__init__`` (``LtxBackend.heavy_prerequisites``) or a property all satisfy them.
    """

    @property
    def name(self) -> str:
        """``ltx``, ``reference`` or ``simulated`` (``BACKEND_NAMES``)."""
        ...

    @property
    def capabilities(self) -> Capabilities:
        """What this backend can do (``Capabilities``): phases ask this, never ``name``."""
        ...

    @property
    def checkout_root(self) -> Path | None:
        """The trainer checkout the backend drives, when it drives one (``ltx`` with ``--trainer-root``)."""
        ...

    @property
    def description(self) -> str:
        """What this trainer is, in words for the plan: ``<name> (<what it does>)``."""
        ...

    @property
    def heavy_prerequisites(self) -> tuple[str, ...]:
        """Probe finding items a heavy phase cannot run without (e.g. the trainer checkout)."""
        ...

    def template(self, config_name: str) -> Path:
        """The read-only template config file of that name (e.g. ``t2v_lora.yaml``)."""
        ...

    def validate(self, config_path: Path, *, relaxed_paths: bool = False) -> list[ConfigFinding]:
        """Validation findings for a trainer config; empty when it may launch."""
        ...

    def validator(self, *, relaxed_paths: bool = False) -> str:
        """Who ``validate`` with the same ``relaxed_paths`` asks, in words for a report or a log.

        Either ``MIRROR_VALIDATOR`` or, for ``ltx`` with a checkout and strict paths, ``the trainer's
        own LtxTrainerConfig at <root> (commit <sha12>)``.
        """
        ...

    def preprocess_command(self, dataset: Path, buckets: str, output_dir: Path, *, model_path: str,
                           text_encoder_path: str, trigger: str | None = None,
                           extra_flags: Sequence[str] = (), script: PreprocessScript = "dataset",
                           num_processes: int = 1) -> LaunchSpec:
        """The command that preprocesses ``dataset`` into the ``.precomputed`` root ``output_dir`` (never with
        --overwrite): the whole of it (``dataset``), or only its video latents and their sound (``videos``) or
        only its text conditions (``captions``), the trainer's own split scripts. ``extra_flags`` are given as
        ``process_dataset.py`` takes them, whichever script runs (``preprocess_scripts``). ``num_processes``
        above 1 shards the rows over that many ranks, only where ``capabilities.shards_preprocessing``."""
        ...

    def train_command(self, config_path: Path, *, num_processes: int = 1, distributed: Distributed = "none",
                      nodes: Nodes | None = None) -> LaunchSpec:
        """The command that trains with ``config_path``: ``num_processes`` on this machine; with ``nodes``,
        this machine's share of a launch over ``nodes.count`` machines (``num_processes`` x count in all)."""
        ...


@runtime_checkable
class MakesBaseWeights(Protocol):
    """A backend whose toy trainer brings its own base weights (``reference``, ``simulated``): a run
    without ``--model-path`` trains on them. ``ltx`` has none: its checkpoint is the probe's."""

    def base_weights(self, folder: Path) -> Path:
        """The base weights file in ``folder`` (made there first if the trainer needs a real one)."""
        ...


@runtime_checkable
class MeasuresHoldoutLoss(Protocol):
    """A backend whose trainer can score checkpoints with its own loss on fixed noise (``ltx``, ``reference``).
    ``simulated`` cannot: its trainer trains nothing, so there is no loss to measure."""

    def holdout_loss_command(self, job: Path) -> LaunchSpec:
        """The command that measures the holdout loss a job file (``ltx_pipeline.holdout.protocol``) describes."""
        ...
