"""Typer option types shared by several commands, so each spells its flags and help the same way."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

__all__ = ["QueueOpt", "RequestFileOpt", "RunOpt", "WorkspaceOpt"]

WorkspaceOpt = Annotated[Path | None, typer.Option("--workspace", "-w", help="Workspace folder "
                         "(default: $LTX_PIPELINE_WORKSPACE, else ./workspaces).")]
RunOpt = Annotated[str | None, typer.Option("--run", "-r", help="Run name (letters, digits, . _ -).")]
RequestFileOpt = Annotated[Path | None, typer.Option("--request", help="Start from a run-request YAML file "
                           "(options given on the command line override its fields).")]
QueueOpt = Annotated[bool, typer.Option("--queue", help="Once approved, wait for the run's GPUs in the queue (first "
                     "come, first served; `ltx-pipeline queue` lists it) instead of stopping on a busy GPU.")]
