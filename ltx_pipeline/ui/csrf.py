"""The studio's write guard: a CSRF token per browser session (double-submit), and the request's Origin.

The first HTML page a browser gets sets the cookie ``ltx_pipeline_csrf``: a random nonce and its HMAC under
a secret made when the server started, so any request can be checked without server state, and a token
minted by another server (or forged) is refused. The cookie is readable by the page's own script (not
HttpOnly: the page sends it back as the ``X-CSRF-Token`` header, which another site cannot do) and
``SameSite=Strict``. A write passes only with that header equal to the cookie and validly signed, and
with an ``Origin`` header naming this server as the request reached it (scheme and Host), even on loopback.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets

from starlette.requests import Request

__all__ = ["COOKIE", "HEADER", "CsrfKeys", "write_refusal"]

COOKIE = "ltx_pipeline_csrf"
HEADER = "x-csrf-token"
CROSS_ORIGIN = "cross-origin request refused"
BAD_TOKEN = "missing or invalid CSRF token"


class CsrfKeys:
    """Mints and checks CSRF tokens under one server's secret (a new one per server start by default)."""

    def __init__(self, secret: bytes | None = None) -> None:
        self._secret = secret or secrets.token_bytes(32)

    def issue(self) -> str:
        """A fresh token: ``<nonce>.<signature>``."""
        nonce = secrets.token_urlsafe(18)
        return f"{nonce}.{self._sign(nonce)}"

    def valid(self, token: str) -> bool:
        nonce, dot, signature = token.partition(".")
        return bool(nonce and dot) and hmac.compare_digest(signature.encode(), self._sign(nonce).encode())

    def for_page(self, request: Request) -> tuple[str, bool]:
        """The token a page carries: the browser's own when valid, else a new one (True: set the cookie)."""
        given = request.cookies.get(COOKIE, "")
        return (given, False) if self.valid(given) else (self.issue(), True)

    def _sign(self, nonce: str) -> str:
        return hmac.new(self._secret, nonce.encode(), hashlib.sha256).hexdigest()


def write_refusal(request: Request, keys: CsrfKeys) -> str | None:
    """Why a state-changing request is refused (one line), or None when its Origin and CSRF token pass."""
    origin = request.headers.get("origin")
    if origin is None or origin != f"{request.url.scheme}://{request.headers.get('host', '')}":
        return CROSS_ORIGIN
    header = request.headers.get(HEADER, "")
    cookie = request.cookies.get(COOKIE, "")
    if not header or not hmac.compare_digest(header.encode(), cookie.encode()) or not keys.valid(header):
        return BAD_TOKEN
    return None
