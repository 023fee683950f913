"""``ltx-pipeline queue``: the runs waiting for GPUs, in order, what each waits for and who holds it.

Read-only, like ``status``: the light ``StoreReader`` at the newest schema (the full store otherwise), the
board built by ``ltx_pipeline.gpus.gpu_board``, printed as tables or ``--json``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from ltx_pipeline.cli import Ending
from ltx_pipeline.cli.options import WorkspaceOpt

__all__ = ["queue"]


def queue(workspace: WorkspaceOpt = None,
          as_json: Annotated[bool, typer.Option("--json", help="Print JSON for scripts.")] = False) -> Ending:
    """List the runs waiting for GPUs (position, GPUs each waits for, who holds them) and the GPUs held."""
    from ltx_pipeline.cli.console import out
    from ltx_pipeline.cli.render import print_json, render_gpu_board
    from ltx_pipeline.gpus.board import gpu_board
    from ltx_pipeline.store.reader import StoreReader
    from ltx_pipeline.workspace import Workspace

    ws = Workspace.at(workspace)
    target = ws.store
    store: Any = StoreReader.open(target) if isinstance(target, Path) else None
    if store is None and ws.has_store():
        from ltx_pipeline.store import Store

        store = Store.open(ws.store)
    board = gpu_board(store) if store is not None else {"holders": [], "queue": []}
    print_json(out, {"workspace": str(ws.root), **board}) if as_json else render_gpu_board(out, board)
    return Ending.DONE
