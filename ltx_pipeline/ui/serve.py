"""Listening and serving: the bind rules, the socket, and uvicorn.

The socket is bound here, before uvicorn starts, so a port already taken or a host that is not this
machine's is one ``BadInput`` line from the CLI (uvicorn would log and exit), and ``--port 0`` takes a
free port whose number the printed URL then shows. Any bind but loopback needs a token.
"""

from __future__ import annotations

import ipaddress
import secrets
import socket
from typing import TYPE_CHECKING

from ltx_pipeline.errors import BadInput

if TYPE_CHECKING:
    from starlette.types import ASGIApp

__all__ = ["is_loopback", "listen", "new_token", "run"]


def is_loopback(host: str) -> bool:
    """Whether ``host`` names this machine's loopback interface only (127.0.0.0/8, ::1, localhost)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def new_token() -> str:
    """A fresh random token (32 URL-safe characters) for a non-loopback bind given none."""
    return secrets.token_urlsafe(24)


def listen(host: str, port: int) -> socket.socket:
    """A listening TCP socket on ``host:port``.

    Raises:
        BadInput: the port is out of range, the host is unknown here, or the address is taken.
    """
    if not 0 <= port <= 65535:
        raise BadInput(f"Port {port} is not a TCP port", where="--port", fix="use a port from 1 to 65535, e.g. 8188")
    try:
        family, kind, proto, _, address = socket.getaddrinfo(host.strip("[]"), port, type=socket.SOCK_STREAM)[0]
    except socket.gaierror as exc:
        raise BadInput(f"Cannot listen on {host!r}: {exc.strerror}", where="--host",
                       fix="use 127.0.0.1 (the default), or an address of this machine") from exc
    sock = socket.socket(family, kind, proto)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind(address)
        sock.listen(128)
    except OSError as exc:
        sock.close()
        raise BadInput(f"Cannot listen on {host}:{port}: {exc.strerror or exc}", where="--port",
                       fix="choose another --port (or stop what listens there)") from exc
    return sock


def run(app: ASGIApp, sock: socket.socket) -> None:
    """Serve ``app`` on ``sock`` until Ctrl-C (uvicorn, one process, no access log: the pages poll every 2 s)."""
    import uvicorn

    config = uvicorn.Config(app, log_level="warning", access_log=False, lifespan="off")
    uvicorn.Server(config).run(sockets=[sock])
