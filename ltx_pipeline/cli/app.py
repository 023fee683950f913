"""The typer app: every command module's functions registered under their command names.

Command modules are leaves (they import ``cli.console``, ``cli.options``, ``cli.watch`` and
``ltx_pipeline.driving``, never this module); this one only assembles them. Outcomes become exit codes
in ``cli.main`` alone.
"""

from __future__ import annotations

import os
from typing import Annotated

import typer

from ltx_pipeline.cli import (
    autotune_worker,
    compare,
    config_tools,
    demo,
    diagnose,
    export,
    nodes,
    queue,
    remove,
    smoke,
    training,
    ui,
    workflow,
)
from ltx_pipeline.cli.bench import bench_app
from ltx_pipeline.cli.cache import cache_app
from ltx_pipeline.cli.help_panels import PanelCommand
from ltx_pipeline.store.location import STORE_ENV

__all__ = ["app"]

# rich_markup_mode=None: plain help text. Typer's Rich help formatter imports rich.markdown and
# markdown-it, a quarter of `--help`'s time (#16).
# -h beside --help on every command: click contexts inherit help_option_names from the group's.
app = typer.Typer(name="ltx-pipeline", add_completion=False, pretty_exceptions_enable=False, rich_markup_mode=None,
                  no_args_is_help=True, help="Plan, tune, train and monitor LTX-2 LoRAs with ltx-trainer.",
                  context_settings={"help_option_names": ["-h", "--help"]})


def _print_version(value: bool) -> None:
    if value:
        from importlib.metadata import version

        print(f"ltx-pipeline {version('ltx-pipeline')}")
        raise typer.Exit(0)


@app.callback()
def _options(store: Annotated[str | None, typer.Option(
        "--store", envvar=STORE_ENV, show_envvar=True,
        help="The store: a SQLAlchemy URL such as postgresql+psycopg://user@host/db, shared by several hosts "
             "(default: the workspace's own SQLite file).")] = None,
             _version: Annotated[bool, typer.Option("--version", callback=_print_version, is_eager=True,
                                                    help="Print ltx-pipeline's version and exit.")] = False) -> None:
    """Plan, tune, train and monitor LTX-2 LoRAs with ltx-trainer."""
    if store:
        os.environ[STORE_ENV] = store  # every command (and the processes it starts) opens this store


app.command("run", cls=PanelCommand)(workflow.run)
app.command("init")(workflow.init)
app.command("resume")(workflow.resume)
app.command("approve")(workflow.approve)
app.command("status")(workflow.status)
app.command("queue")(queue.queue)
app.command("stop")(training.stop)
app.command("rm")(remove.rm)
app.command("demo")(demo.demo)
app.command("validate")(config_tools.validate)
app.command("command")(config_tools.command)
app.command("node-launch")(nodes.node_launch)
app.command("autotune-worker")(autotune_worker.autotune_worker)
app.command("smoke")(smoke.smoke)
app.command("diagnose")(diagnose.diagnose)
app.command("ui")(ui.ui)
app.command("export")(export.export)
app.command("compare")(compare.compare)
app.add_typer(bench_app, name="bench")
app.add_typer(cache_app, name="cache")
