"""Who may read the dashboard: every request checked, before any route runs.

With a token (required for any bind but loopback), a request passes with ``Authorization: Bearer <token>``
or the cookie set when the token came once as ``?token=`` (that request is redirected to the same URL
without it, so the token leaves the address bar and the history); anything else gets 401. Tokens are
compared in constant time. With no token (a loopback bind) the ``Host`` header must name the loopback,
so a web page that rebinds its own DNS name to 127.0.0.1 cannot read the dashboard from a browser.
Every response carries headers that keep pages from being framed, sniffed or leaking the URL.
"""

from __future__ import annotations

import secrets
from urllib.parse import parse_qsl, urlencode

from starlette.datastructures import MutableHeaders
from starlette.requests import Request
from starlette.responses import PlainTextResponse, RedirectResponse, Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

__all__ = ["COOKIE", "TokenGate"]

COOKIE = "ltx_pipeline_ui"
_LOOPBACK_NAMES = {"127.0.0.1", "localhost", "[::1]", "::1"}
_HEADERS = {
    "content-security-policy": "default-src 'self'; object-src 'none'; frame-ancestors 'none'; base-uri 'none'",
    "x-content-type-options": "nosniff",
    "referrer-policy": "no-referrer",
    "x-frame-options": "DENY",
    "cache-control": "no-store",
}


class TokenGate:
    """ASGI middleware: the token check (or the loopback Host check) and the safety headers."""

    def __init__(self, app: ASGIApp, token: str | None) -> None:
        self.app = app
        self.token = token

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        refusal = self._refusal(Request(scope))
        if refusal is not None:
            await refusal(scope, receive, _with_headers(send))
            return
        await self.app(scope, receive, _with_headers(send))

    def _refusal(self, request: Request) -> Response | None:
        if self.token is None:
            if _host_name(request.headers.get("host", "")) not in _LOOPBACK_NAMES:
                return PlainTextResponse("403: this dashboard answers only to 127.0.0.1 or localhost\n", 403)
            return None
        given = request.query_params.get("token")
        if given is not None and self._matches(given):
            rest = [(k, v) for k, v in parse_qsl(request.url.query, keep_blank_values=True) if k != "token"]
            target = request.url.path + (f"?{urlencode(rest)}" if rest else "")
            response = RedirectResponse(target, status_code=303)
            response.set_cookie(COOKIE, given, httponly=True, samesite="strict", path="/")
            return response
        bearer = request.headers.get("authorization", "")
        if bearer.startswith("Bearer ") and self._matches(bearer[len("Bearer "):].strip()):
            return None
        if self._matches(request.cookies.get(COOKIE, "")):
            return None
        return PlainTextResponse("401: this dashboard needs its token (open the URL printed by `ltx-pipeline ui`, "
                                 "or send Authorization: Bearer <token>)\n", 401,
                                 headers={"www-authenticate": "Bearer"})

    def _matches(self, given: str) -> bool:
        assert self.token is not None
        return secrets.compare_digest(given.encode(), self.token.encode())


def _host_name(header: str) -> str:
    """The host of a ``Host`` header, its port dropped (``[::1]:8188`` -> ``[::1]``)."""
    if header.startswith("["):
        return header.split("]", 1)[0] + "]"
    return header.rsplit(":", 1)[0] if header.count(":") == 1 else header


def _with_headers(send: Send) -> Send:
    async def sending(message: Message) -> None:
        if message["type"] == "http.response.start":
            headers = MutableHeaders(scope=message)
            for name, value in _HEADERS.items():
                headers.setdefault(name, value)
        await send(message)

    return sending
