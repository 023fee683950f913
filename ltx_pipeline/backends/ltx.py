"""Backend ``ltx``: the official trainer in the user's LTX-2 checkout, driven through ``uv`` or a given python.

The checkout is read-only to the engine: templates are read from
``packages/ltx-trainer/configs/`` and run configs always live in the workspace. The trainer's scripts
start with ``uv run --directory <checkout>/packages/ltx-trainer`` (a ``uv sync``-ed checkout), or with
``--trainer-python`` (the interpreter of a venv or conda env where ltx-trainer is installed; then uv is
not needed). Strict validation runs the trainer's own ``LtxTrainerConfig`` in that same environment
(``trainer_side/validate_config.py``), so a config that validates is one whose trainer imports.
A checkout that is missing, not synced, or whose trainer does not import is a failed validation (a
``trainer checkout`` finding), never a silent fall-back to the mirror. The mirror validates only
relaxed checks (placeholder paths) and runs with no checkout at all; ``validator()`` says which.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
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
from ltx_pipeline.backends.launch import (
    LOG_ENV,
    accelerate_args,
    accelerate_config_name,
    check_processes,
    free_port,
    sharded_preprocess_args,
)
from ltx_pipeline.backends.preprocess_scripts import SCRIPT_FILES, script_args
from ltx_pipeline.errors import BadInput
from ltx_pipeline.ltx.trainer_config import ConfigFinding, load_trainer_config_file, validate_trainer_config
from ltx_pipeline.probing.gpus import cuda_present
from ltx_pipeline.probing.trainer_checkout import check_trainer_root
from ltx_pipeline.probing.trainer_python import TRAINER_SIDE, read_only_env

__all__ = ["LtxBackend"]

TRAINER_DIR = Path("packages") / "ltx-trainer"
_MARK = "LTX_PIPELINE_VALIDATION "
_TIMEOUT_S = 300
_CLONE = "https://github.com/Lightricks/LTX-2"
#: The ``path`` of findings about the checkout itself rather than a config field.
CHECKOUT_FINDING = "trainer checkout"
_IMPORT_ERROR = re.compile(r"^\s*(ModuleNotFoundError|ImportError)\b.*")


class LtxBackend:
    """The official ltx-trainer."""

    name = "ltx"
    capabilities = Capabilities(runs_real_trainer=True, needs_gpu=True, uses_real_files=True,
                                shards_preprocessing=True)
    heavy_prerequisites: tuple[str, ...] = ("uv", "LTX checkpoint", "Gemma text encoder", "LTX-2 trainer checkout",
                                            "Operating system", "Smoke test")

    def __init__(self, root: Path | None, uv: str | None = None, python: str | Path | None = None) -> None:
        self._root = root.expanduser().resolve() if root is not None else None
        self.uv = uv or shutil.which("uv") or "uv"
        # Never resolved: a venv's python is a symlink to the base interpreter, and only the link's
        # path makes Python pick up the venv.
        self.python = Path(python).expanduser().absolute() if python else None
        if self.python is not None:
            self.heavy_prerequisites = tuple(p for p in type(self).heavy_prerequisites if p != "uv") + (
                "Trainer python",)

    @property
    def checkout_root(self) -> Path | None:
        """The checkout given (``--trainer-root``), resolved; None when none was (a probe blocker)."""
        return self._root

    @property
    def description(self) -> str:
        """The official trainer, and the checkout it runs from when one was given."""
        return f"ltx (the official ltx-trainer{' at ' + str(self._root) if self._root else ''})"

    @property
    def root(self) -> Path:
        """The checkout's root, which must be an LTX-2 checkout.

        Raises:
            BadInput: none was given, the folder does not exist or it has no ``packages/ltx-trainer``.
        """
        if self._root is None:
            raise BadInput("No LTX-2 trainer checkout was given", where="--trainer-root",
                           fix=f"clone {_CLONE}, run `uv sync` at its root, then pass "
                               "--trainer-root PATH or set LTX2_ROOT")
        problem = self._checkout_problem()
        if problem is not None:
            raise BadInput(f"No LTX-2 trainer checkout at {self._root}: {problem}", where="--trainer-root or LTX2_ROOT",
                           fix=f"pass the root of an LTX-2 checkout ({_CLONE}, with `uv sync` run at its root)")
        return self._root

    def _checkout_problem(self) -> str | None:
        """Why the given root is not an LTX-2 checkout, or None when it is one."""
        if self._root is None or not self._root.is_dir():
            return "the folder does not exist"
        if not (self._root / TRAINER_DIR).is_dir():
            return f"it has no {TRAINER_DIR.as_posix()} folder"
        return None

    @property
    def trainer_dir(self) -> Path:
        return self.root / TRAINER_DIR

    @property
    def synced(self) -> bool:
        """The checkout is there, synced (``uv sync`` ran) and ``uv`` is on PATH: the trainer's validator can run."""
        return self._root is not None and self._environment_finding() is None

    def template(self, config_name: str) -> Path:
        path = self.trainer_dir / "configs" / config_name
        if not path.is_file():
            raise BadInput(f"The trainer checkout has no template {config_name}", where=str(path.parent),
                           fix="update the LTX-2 checkout (git pull) or point --trainer-root at a complete one")
        return path

    def accelerate_config(self, distributed: Distributed) -> Path | None:
        name = accelerate_config_name(distributed)
        return self.trainer_dir / "configs" / "accelerate" / name if name else None

    def uv_run(self, *args: str) -> list[str]:
        """`uv run --directory <trainer package>` then ``args``: how every trainer script is started (argv list)."""
        return [self.uv, "run", "--directory", str(self.trainer_dir), *args]

    def trainer_run(self, *args: str) -> list[str]:
        """How a trainer command starts: ``python ...`` or ``accelerate launch ...`` as written, through
        ``uv run`` in the checkout, or with ``--trainer-python`` (the working directory is the trainer package).
        """
        if self.python is None:
            return self.uv_run(*args)
        if args[0] == "python":
            return [str(self.python), *args[1:]]
        if args[:2] == ("accelerate", "launch"):  # the env's own accelerate, whatever its bin/ holds
            return [str(self.python), "-m", "accelerate.commands.launch", *args[2:]]
        raise ValueError(f"no way to start {args[0]!r} with --trainer-python")

    def train_command(self, config_path: Path, *, num_processes: int = 1, distributed: Distributed = "none",
                      nodes: Nodes | None = None) -> LaunchSpec:
        check_processes(num_processes, distributed, nodes)
        config = str(config_path.resolve())  # `uv run --directory` changes the working directory
        if distributed == "none":
            argv = self.trainer_run("python", "scripts/train.py", config, "--disable-progress-bars")
        else:
            # The trainer's preset (DDP for LoRA, FSDP for full) on every machine; the machine flags
            # on the command line override its single-machine values.
            preset = self.accelerate_config(distributed)
            argv = self.trainer_run("accelerate", *accelerate_args(num_processes, str(preset), nodes=nodes,
                                                                   cpu=not cuda_present()),
                                    "scripts/train.py", config, "--disable-progress-bars")
        return LaunchSpec(tuple(argv), self.trainer_dir, dict(LOG_ENV))

    def preprocess_command(self, dataset: Path, buckets: str, output_dir: Path, *, model_path: str,
                           text_encoder_path: str, trigger: str | None = None,
                           extra_flags: Sequence[str] = (), script: PreprocessScript = "dataset",
                           num_processes: int = 1, main_port: int | None = None) -> LaunchSpec:
        """``python scripts/<script> ...``; with ``num_processes`` > 1, ``accelerate launch --num_processes N
        --multi_gpu`` of the same script, whose ranks each take an interleaved share of the rows (the script's
        ``_build_sharded_dataloader``), rendezvousing on ``main_port`` (default: a port free now).

        Raises:
            BadInput: ``num_processes`` below 1; as ``script_args``.
        """
        if num_processes < 1:
            raise BadInput(f"Preprocessing needs at least 1 process, got {num_processes}",
                           where="preprocess_processes", fix="give 1 or more, or leave it out (one per GPU)")
        cuda = cuda_present()
        flags = list(extra_flags)
        if "--device" not in flags and not cuda:
            flags += ["--device", "cpu"]  # every script defaults to cuda (facts: CPU blocker 4)
        args = script_args(script, dataset, buckets, output_dir, model_path=model_path,
                           text_encoder_path=text_encoder_path, trigger=trigger, extra_flags=flags)
        script_path = f"scripts/{SCRIPT_FILES[script]}"
        if num_processes == 1:
            argv = self.trainer_run("python", script_path, *args)
        else:
            preset = self.accelerate_config("ddp")
            launch = sharded_preprocess_args(num_processes, str(preset) if preset and preset.is_file() else None,
                                             main_port or free_port())
            # No GPU: the script's bare PartialState() would see one process per rank (trainer_side/cpu_ranks.py).
            shim = [] if cuda else [str(TRAINER_SIDE / "cpu_ranks.py")]
            argv = self.trainer_run("accelerate", *launch, *shim, script_path, *args)
        return LaunchSpec(tuple(argv), self.trainer_dir, dict(LOG_ENV))

    def holdout_loss_command(self, job: Path) -> LaunchSpec:
        """``trainer_side/holdout_loss.py`` with the trainer's interpreter: the model loads there, once."""
        argv = self.trainer_run("python", str(TRAINER_SIDE / "holdout_loss.py"), str(job.resolve()))
        return LaunchSpec(tuple(argv), self.trainer_dir, dict(LOG_ENV))

    def validator(self, *, relaxed_paths: bool = False) -> str:
        """The trainer's own config class at the checkout, when one is given and paths are strict; else the mirror.

        The commit is read straight from the checkout's ``.git`` (``unknown`` when there is none). It
        names the trainer's own validator even when the checkout cannot run it: ``validate`` then
        gives the ``trainer checkout`` finding that says why, and never asks the mirror instead.
        """
        if relaxed_paths or self._root is None:
            return MIRROR_VALIDATOR
        commit = check_trainer_root(self._root).git_commit
        return f"the trainer's own LtxTrainerConfig at {self._root} (commit {commit[:12] if commit else 'unknown'})"

    def validate(self, config_path: Path, *, relaxed_paths: bool = False) -> list[ConfigFinding]:
        """Strict with a checkout: the trainer's own validator in the checkout's environment; else the mirror.

        Relaxed validation (placeholders) always uses the mirror: the trainer checks paths exist. A
        checkout that cannot run the trainer's validator (missing, not synced, no ``uv``, the trainer
        does not import) gives one ``trainer checkout`` finding, because it could not launch either.
        """
        data = load_trainer_config_file(config_path)
        if relaxed_paths or self._root is None:
            return validate_trainer_config(data, relaxed_paths=relaxed_paths, cwd=config_path.resolve().parent)
        unusable = self._environment_finding()
        if unusable is not None:
            return [unusable]
        argv = self.trainer_run("python", str(TRAINER_SIDE / "validate_config.py"), str(config_path.resolve()))
        try:
            done = subprocess.run(argv, capture_output=True, text=True, timeout=_TIMEOUT_S,  # noqa: S603
                                  cwd=self.trainer_dir, check=False, env=read_only_env())
        except subprocess.TimeoutExpired:
            return [self._finding(f"the trainer's config validator did not finish within {_TIMEOUT_S} s in "
                                  f"{self.trainer_dir}; {self._repair} and try again", "trainer_validator_failed")]
        except OSError as exc:
            if self.python is not None:
                return [self._finding(f"--trainer-python {self.python} could not be run ({exc.strerror or exc}); "
                                      "pass the python of the environment where ltx-trainer is installed",
                                      "trainer_python_failed")]
            return [self._finding(f"{self.uv} could not be run ({exc.strerror or exc}); install uv "
                                  "(https://docs.astral.sh/uv/) and put it on PATH", "uv_not_found")]
        line = next((ln for ln in done.stdout.splitlines() if ln.startswith(_MARK)), None)
        if line is not None:
            return [ConfigFinding(path=e["loc"], message=e["msg"], code=e["type"])
                    for e in json.loads(line[len(_MARK):])]
        output = (done.stderr + "\n" + done.stdout).strip().splitlines()
        imports = [m.group(0).strip() for ln in output if (m := _IMPORT_ERROR.match(ln))]
        if imports:
            return [self._finding(f"the trainer does not import in its environment ({self.environment_words}), "
                                  f"so it would not launch either: {imports[-1]}; {self._repair}",
                                  "trainer_import_failed")]
        tail = output[-1:] or ["no output"]
        return [self._finding(f"the trainer's config validator did not run (exit {done.returncode}): {tail[0]}; "
                              f"{self._repair}", "trainer_validator_failed")]

    @property
    def environment_words(self) -> str:
        """The trainer's environment, as a report names it."""
        if self.python is not None:
            return f"--trainer-python {self.python}"
        return f"`uv run --directory {self.trainer_dir}`"

    @property
    def _repair(self) -> str:
        if self.python is not None:
            return (f"install ltx-trainer into that environment ({self.python} -m pip install -e "
                    f"{self._root}/packages/ltx-core -e {self._root}/{TRAINER_DIR.as_posix()})")
        return f"run `uv sync` at {self._root} (a complete checkout has {TRAINER_DIR.as_posix()}/src/ltx_trainer)"

    def environment_problem(self) -> ConfigFinding | None:
        """Why this checkout and environment cannot run the trainer at all (files only), or None."""
        return self._environment_finding()

    def _environment_finding(self) -> ConfigFinding | None:
        """Why the checkout cannot run the trainer's validator (nor a launch), or None when it can."""
        problem = self._checkout_problem()
        if problem is not None:
            return self._finding(f"no LTX-2 trainer checkout at {self._root}: {problem}; pass the root of a "
                                 f"synced LTX-2 checkout ({_CLONE}) as --trainer-root or LTX2_ROOT",
                                 "trainer_checkout_missing")
        if self.python is not None:
            if not (self.python.is_file() and os.access(self.python, os.X_OK)):
                return self._finding(f"--trainer-python {self.python} is not an executable file; pass the python of "
                                     "the venv or conda env where ltx-trainer is installed (e.g. ENV/bin/python)",
                                     "trainer_python_missing")
            return None
        lacking = [name for name, present in (("uv.lock", (self.root / "uv.lock").is_file()),
                                              (".venv", (self.root / ".venv").is_dir())) if not present]
        if lacking:
            return self._finding(f"the environment of {self.root} is not synced (no {' and no '.join(lacking)}), so "
                                 f"the trainer can neither validate this config nor launch; run `uv sync` at "
                                 f"{self.root}", "trainer_not_synced")
        if shutil.which(self.uv) is None:
            return self._finding(f"uv ({self.uv}) is not on PATH, so the environment of {self.root} cannot run; "
                                 "install uv (https://docs.astral.sh/uv/)", "uv_not_found")
        return None

    @staticmethod
    def _finding(message: str, code: str) -> ConfigFinding:
        return ConfigFinding(path=CHECKOUT_FINDING, message=message, code=code)
