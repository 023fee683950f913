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

__all__ = ["is_loopback", "listen", "new_token", "reachable_hosts", "run"]

_WILDCARDS = ("0.0.0.0", "::", "")


def is_loopback(host: str) -> bool:
    """Whether ``host`` names this machine's loopback interface only (127.0.0.0/8, ::1, localhost)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def reachable_hosts(host: str) -> list[str]:
    """The names other machines may open a bind on ``host`` by: ``host`` itself, unless it is a wildcard.

    0.0.0.0 (every IPv4 interface) and :: (every interface) are no address a browser can open: for them,
    this machine's hostname, its fully qualified name and each non-loopback, non-link-local address of its
    interfaces (IPv4 for 0.0.0.0, both families for ::), in that order and without repeats. Which of them
    another machine reaches depends on its network, so the caller prints them all.
    """
    if host.strip("[]") not in _WILDCARDS:
        return [host]
    import psutil  # already the engine's (process liveness); standard sockets cannot list interface addresses

    families = (socket.AF_INET,) if host == "0.0.0.0" else (socket.AF_INET, socket.AF_INET6)
    names = [socket.gethostname(), socket.getfqdn()]
    for addresses in psutil.net_if_addrs().values():
        for address in addresses:
            if address.family in families:
                ip = ipaddress.ip_address(address.address.split("%", 1)[0])
                if not (ip.is_loopback or ip.is_link_local or ip.is_unspecified):
                    names.append(str(ip))
    found = [name for name in dict.fromkeys(names) if name and name != "localhost"]
    return found or [host]


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
