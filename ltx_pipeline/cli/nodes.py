"""The ``node-launch`` command: one node's share of a multi-node training (``run --nodes N``).

The engine launches rank 0 on its own machine; every other node (or, under SLURM, every node through
``srun``) runs this command, which starts that node's trainer in the foreground and exits with its
exit code. ``--prepare`` (on the batch node, before the nodes start) resumes from the newest
checkpoint instead. What it does lives in ``training.nodes``, imported when the command runs; this command
opens the store and hands it the run's phase rows and journal (steps never open the store).
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Annotated

import typer

from ltx_pipeline.cli import Ending
from ltx_pipeline.cli.options import RunOpt, WorkspaceOpt

if TYPE_CHECKING:
    from pathlib import Path

    from ltx_pipeline.training.nodes import NodeRun

__all__ = ["node_launch"]


def node_launch(
    workspace: WorkspaceOpt = None,
    run_name: RunOpt = None,
    machine_rank: Annotated[int | None, typer.Option(
        "--machine-rank", help="This node's rank, 0 to nodes-1 (default: $SLURM_NODEID).")] = None,
    main_ip: Annotated[str | None, typer.Option(
        "--main-ip", help="Address of the rank-0 node (default: the run's --main-ip).")] = None,
    main_port: Annotated[int | None, typer.Option(
        "--main-port", help="Rendezvous port on the rank-0 node (default: the run's, else 29500).")] = None,
    stage: Annotated[int | None, typer.Option(
        "--stage", help="Training stage (default: the first one not trained yet).")] = None,
    prepare: Annotated[bool, typer.Option(
        "--prepare", help="Only resume the stage from its newest checkpoint pair (patch its config), then "
        "exit; run once before the nodes start.")] = False,
    stdout_only: Annotated[bool, typer.Option(
        "--stdout-only", help="Write the trainer's output to stdout only, no log file of its own (under srun, "
        "whose --output is the node's log).")] = False,
) -> int:
    """Start this node's trainer of a validated multi-node run, in the foreground (exit code: the trainer's)."""
    from ltx_pipeline.cli.console import out
    from ltx_pipeline.errors import BadInput
    from ltx_pipeline.training.nodes import RANK_ENV, node_log, run_foreground

    if not run_name:
        raise BadInput("node-launch needs the run", where="--run", fix="pass --run NAME (the same on every node)")
    if main_port is not None and not 0 < main_port < 65536:
        raise BadInput(f"Port {main_port} is not a TCP port", where="--main-port", fix="give a port from 1 to 65535")
    node = _open_node_run(workspace, run_name)
    index = node.stage_index(stage)
    if prepare:
        for line in node.prepare(index):
            out.print(line, markup=False, highlight=False)
        return Ending.DONE
    rank = machine_rank if machine_rank is not None else _rank_from_env(RANK_ENV)
    spec = node.launch(index, rank, main_ip, main_port)  # refuses a rank outside the launch
    validated = node.validated(index)
    node.refuse_other_config(index, rank, validated)
    log = None if stdout_only else node_log(node.logs, index, len(node.validate.stages), rank)
    out.print(f"Node {rank} of {node.nodes}, stage {index} of run {run_name}: log {log or 'stdout'}", markup=False,
              highlight=False)
    out.print(spec.printable, markup=False, highlight=False)
    return run_foreground(spec, log, validated, header=f"rank {rank}, stage {index}: ")


def _open_node_run(workspace: Path | None, name: str) -> NodeRun:
    """The run as this node sees it: its phase rows and train journal from the store, opened here.

    Raises:
        BadInput: no workspace database, no such run, or (``open_node_run``) a run not validated for these nodes.
    """
    from ltx_pipeline.engine.journal import RunJournal
    from ltx_pipeline.errors import BadInput
    from ltx_pipeline.store import Store, saved_id
    from ltx_pipeline.training.nodes import open_node_run
    from ltx_pipeline.workspace import Workspace

    ws = Workspace.at(workspace)
    if not ws.has_store():
        raise BadInput(f"No workspace database in {ws.root}", where="--workspace",
                       fix="pass the run's workspace (the same path on every node)")
    store = Store.open(ws.store)
    run = store.get_run(name)
    if run is None:
        raise BadInput(f"No run named {name!r} in {ws.root}", where="--run", fix="see `ltx-pipeline status`")
    run_id = saved_id(run)
    return open_node_run(ws, name, store.latest_phase_runs(run_id), RunJournal(store, run_id, "train"))


def _rank_from_env(name: str) -> int:
    from ltx_pipeline.errors import BadInput

    value = os.environ.get(name, "").strip()
    if not value:
        raise BadInput("No machine rank for this node", where="--machine-rank",
                       fix=f"pass --machine-rank R (0 for the node of --main-ip), or run it under SLURM ({name})")
    if not value.isdigit():
        raise BadInput(f"{name}={value!r} is not a machine rank", where=name, fix="pass --machine-rank R")
    return int(value)

