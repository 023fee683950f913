"""Standalone config tools for any trainer config, in or out of a run: ``validate`` and ``command``.

``validate`` refuses a config naming a placeholder, missing or unreadable path (``ltx.config_paths``,
one line naming every key), then runs the schema check plus the rules the trainer only meets at
runtime, and names the validator in every result: the trainer's own, in the checkout's environment
(the one a launch uses), when a checkout is given and paths are strict; the built-in mirror of the
schema otherwise.
``command`` prints the launch command for a distributed mode and never runs it; it refuses a
checkout that is not there. They replace the skill's two helper scripts.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from ltx_pipeline.cli import Ending
from ltx_pipeline.cli.console import out
from ltx_pipeline.env_names import LTX2_ROOT_ENV
from ltx_pipeline.errors import BadInput

if TYPE_CHECKING:
    from ltx_pipeline.backends.ltx import LtxBackend

# The backend and the trainer-config models are imported when a command runs, not when the CLI starts.

__all__ = ["TrainerPythonOpt", "TrainerRootOpt", "command", "ltx_backend", "validate"]

TrainerRootOpt = Annotated[Path | None, typer.Option("--trainer-root", help="LTX-2 checkout (default $LTX2_ROOT); "
                                                     "its synced environment validates with the trainer itself.")]

TrainerPythonOpt = Annotated[Path | None, typer.Option("--trainer-python", help="Python of an environment where "
                                                       "ltx-trainer is installed (instead of the checkout's uv).")]


def ltx_backend(trainer_root: Path | None, trainer_python: Path | None = None) -> LtxBackend:
    from ltx_pipeline.backends.ltx import LtxBackend

    root = trainer_root or (Path(os.environ[LTX2_ROOT_ENV]) if os.environ.get(LTX2_ROOT_ENV) else None)
    return LtxBackend(root, python=trainer_python)


def validate(config: Annotated[Path, typer.Argument(help="A trainer config YAML.")],
             relaxed_paths: Annotated[bool, typer.Option("--relaxed-paths", help="Accept placeholder paths "
                                                         "(never accepted for a launch).")] = False,
             num_processes: Annotated[int, typer.Option(help="Processes the launch will use.")] = 1,
             trainer_root: TrainerRootOpt = None,
             trainer_python: TrainerPythonOpt = None,
             as_json: Annotated[bool, typer.Option("--json", help="Print JSON for scripts.")] = False) -> Ending:
    """Check a trainer config: exit 0 when it may launch, 2 with every finding and its fix when not.

    Paths come first: a template placeholder (/path/to/...) anywhere, or a model file, data folder or
    validation medium that is missing or unreadable, refuses the config at once, every such key named.
    """
    from ltx_pipeline.ltx.config_paths import path_checks, unusable_paths_error
    from ltx_pipeline.ltx.launch_checks import launch_checks
    from ltx_pipeline.ltx.trainer_config import format_findings, load_trainer_config_file
    from ltx_pipeline.training.validation import trainer_cwd

    data = load_trainer_config_file(config)
    backend = ltx_backend(trainer_root, trainer_python)
    cwd = trainer_cwd(backend, config)  # where the trainer runs, and so where relative paths resolve
    if not relaxed_paths and (unusable := path_checks(data, cwd=cwd)):
        raise unusable_paths_error(unusable, where=str(config))
    findings = backend.validate(config, relaxed_paths=relaxed_paths)
    validator = backend.validator(relaxed_paths=relaxed_paths)
    checks = [] if findings else launch_checks(data, num_processes=num_processes, cwd=cwd)
    errors = format_findings(findings) + [c.line() for c in checks if c.severity == "error"]
    warnings = [c.line() for c in checks if c.severity == "warning"]
    if relaxed_paths:
        warnings.append("paths were not checked (--relaxed-paths); validate strictly before a launch")
    report: dict[str, Any] = {"config": str(config.resolve()), "ok": not errors and not relaxed_paths,
                              "validator": validator, "errors": errors, "warnings": warnings}
    if as_json:
        out.print_json(json.dumps(report))
    else:
        for line in errors:
            out.print(f"error: {line}", markup=False, highlight=False)
        for line in warnings:
            out.print(f"warning: {line}", markup=False, highlight=False)
        if errors:
            out.print(f"validated by: {validator}", markup=False, highlight=False)
        else:
            allowed = "placeholders allowed; " if relaxed_paths else ""
            out.print(f"{config}: valid ({allowed}validated by {validator})", markup=False, highlight=False)
    return Ending.DONE if not errors else Ending.INVALID


def command(config: Annotated[Path, typer.Argument(help="A trainer config YAML.")],
            distributed: Annotated[str, typer.Option(help="none, ddp, ddp-compile, fsdp or fsdp-compile.")] = "none",
            num_processes: Annotated[int, typer.Option(help="Processes (GPUs) for accelerate.")] = 1,
            trainer_root: TrainerRootOpt = None,
            trainer_python: TrainerPythonOpt = None,
            as_json: Annotated[bool, typer.Option("--json", help="Print JSON for scripts.")] = False) -> Ending:
    """Print the launch command for a trainer config (argv and a copy-pasteable line); never run it."""
    import yaml

    from ltx_pipeline.backends.base import DISTRIBUTED_MODES, is_distributed
    from ltx_pipeline.ltx.trainer_config import load_trainer_config_file
    from ltx_pipeline.yaml_io import load_yaml

    if not is_distributed(distributed):
        raise BadInput(f"Unknown distributed mode {distributed!r}", where="--distributed",
                       fix="choose " + ", ".join(DISTRIBUTED_MODES))
    if not config.is_file():
        raise BadInput(f"Config file {config} does not exist", where=str(config), fix="pass an existing YAML file")
    try:
        load_yaml(config.read_text(encoding="utf-8"))
    except yaml.YAMLError:
        load_trainer_config_file(config)  # raises the one-line error with the line number
    # Refuses (BadInput, one line) a checkout that is missing or not an LTX-2 checkout: no command
    # is printed into a folder that is not there.
    spec = ltx_backend(trainer_root, trainer_python).train_command(config, num_processes=num_processes,
                                                                distributed=distributed)
    if as_json:
        out.print_json(json.dumps({**spec.to_record(), "executes_training": False}))
    else:
        out.print(spec.printable, markup=False, highlight=False)
    return Ending.DONE
