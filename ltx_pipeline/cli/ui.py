"""``ltx-pipeline ui``: the web dashboard over a workspace, and its studio (write actions) unless ``--read-only``.

The web stack (Starlette, uvicorn, Jinja2) is imported inside the command only, so ``--help`` and every
other command start as light as before (tests/cli/test_startup_imports.py). The command checks its
input (the workspace exists, the store is readable without changes, the port is free), binds, prints
the URL once (with the token, for a non-loopback bind) and serves until Ctrl-C.
"""

from __future__ import annotations

import signal
from pathlib import Path
from typing import Annotated

import typer

from ltx_pipeline.cli import Ending
from ltx_pipeline.cli.options import WorkspaceOpt
from ltx_pipeline.env_names import UI_TOKEN_ENV

__all__ = ["ui"]


def ui(workspace: WorkspaceOpt = None,
       port: Annotated[int, typer.Option("--port", help="TCP port (0: any free one).")] = 8188,
       host: Annotated[str, typer.Option("--host", help="Address to listen on. Anything but loopback needs a "
                                                        "token: --token, else a new one is printed.")] = "127.0.0.1",
       token: Annotated[str | None, typer.Option("--token", envvar=UI_TOKEN_ENV, show_envvar=True,
                                                 help="Token every request must carry (Authorization: Bearer, or "
                                                      "?token= once); from the environment it stays out of `ps`.")
                        ] = None,
       data_root: Annotated[list[Path] | None, typer.Option(
           "--data-root", help="A folder the New-run page may pick datasets from (repeat for more); nothing "
                               "outside these folders is listed or read.")] = None,
       read_only: Annotated[bool, typer.Option("--read-only", help="Only show: no page can create, approve, "
                                                                   "stop, resume or remove a run.")] = False,
       token_name: Annotated[str | None, typer.Option("--token-name", help="Who holds the token, as the audit "
                                                                           "of each action names them.")] = None,
       ) -> Ending:
    """Serve the dashboard of every run (phases, live curves, samples, eval renders, trials) and its studio: create,
    approve, stop, resume, continue and remove runs from the browser, each the CLI's own command."""
    from ltx_pipeline.cli.console import out
    from ltx_pipeline.errors import BadInput
    from ltx_pipeline.ui.serve import is_loopback, listen, new_token, run
    from ltx_pipeline.workspace import Workspace

    ws = Workspace.at(workspace)
    if not ws.root.is_dir():
        raise BadInput(f"No workspace at {ws.root}", where="--workspace",
                       fix=f"point --workspace at an existing one, or make one: ltx-pipeline demo -w {ws.root}")
    if token is not None and len(token) < 16:
        raise BadInput("The token is shorter than 16 characters", where="--token",
                       fix="use a long random token, or omit --token to have one generated")
    if token is None and not is_loopback(host):
        token = new_token()
    from ltx_pipeline.ui.app import create_app
    from ltx_pipeline.ui.source import StoreSource

    roots = _data_roots(data_root or [])
    StoreSource(ws).check()
    app = create_app(ws, token, data_roots=roots, read_only=read_only, token_name=token_name)
    sock = listen(host, port)
    # Ctrl-C (SIGINT) is how a dashboard stops. A shell that started this in the background leaves SIGINT ignored,
    # and uvicorn takes SIGINT over once it serves anyway (then hands it back to the handler it found): take it
    # from here on, so a SIGINT at any moment stops the server cleanly, never lost before uvicorn starts.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        _announce(ws.root, host, sock.getsockname()[1], token, roots if not read_only else None)
        run(app, sock)
    except KeyboardInterrupt:  # Ctrl-C is how a dashboard stops (uvicorn shuts down cleanly, then re-raises it)
        out.print("Stopped.", markup=False)
    return Ending.DONE


def _data_roots(given: list[Path]) -> list[Path]:
    """The --data-root folders, resolved; one that is not a folder is one line."""
    from ltx_pipeline.errors import BadInput

    roots = []
    for folder in given:
        resolved = folder.expanduser().resolve()
        if not resolved.is_dir():
            raise BadInput(f"{folder} is not a folder", where="--data-root",
                           fix="give an existing folder holding your datasets")
        roots.append(resolved)
    return roots


def _announce(root: Path, host: str, port: int, token: str | None, roots: list[Path] | None) -> None:
    """The URL, printed once (with the token, which is never shown again), and how to reach a loopback bind.

    ``roots`` None: served read-only. A wildcard bind (0.0.0.0, ::) is no address to open: its URLs name this
    machine as others may reach it (hostname, full name, each interface's address), the first on the "Serving"
    line, the others below it.
    """
    import socket

    from ltx_pipeline.cli.console import out
    from ltx_pipeline.ui.serve import reachable_hosts

    urls = [f"http://{f'[{name}]' if ':' in name else name}:{port}/" + (f"?token={token}" if token else "")
            for name in reachable_hosts(host)]
    out.print(f"Serving {root} {'read-only ' if roots is None else ''}at {urls[0]}  (Ctrl-C stops)", markup=False)
    for url in urls[1:]:
        out.print(f"  also at {url}", markup=False)
    if roots is not None:
        shown = ", ".join(str(r) for r in roots) or "none (give --data-root DIR to create runs from the page)"
        out.print(f"Studio on (--read-only turns it off); datasets from: {shown}", markup=False)
    if token:
        out.print("Every request needs this token: open the URL above once, or send 'Authorization: Bearer "
                  "<token>'. It is shown only now.", markup=False)
    else:
        out.print(f"From another machine: ssh -L {port}:127.0.0.1:{port} {socket.gethostname()}, then open "
                  f"http://127.0.0.1:{port}/", markup=False)
