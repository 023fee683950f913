"""The dashboard's web app: two pages, the JSON they poll, the workspace's media files and the shipped assets.

Routes (every one behind ``access.TokenGate``):

- ``/``: the runs; ``/runs/<name>``: one run (404 for a name the workspace has no run of, or an unsafe one).
- ``/compare?run=A&run=B``: runs side by side (``compare``); fewer than two names: the run picker.
- ``/api/runs`` and ``/api/runs/<name>``: the JSON the pages poll every two seconds (``views``).
- ``/files/<path>``: a workspace file (``files.servable``), with HTTP Range support so a video seeks.
- ``/static/...``: the CSS and JavaScript shipped in the package (no CDN, no build step).

The handlers are plain functions, which Starlette runs on its thread pool: each opens its own read-only
store connection (``source.StoreSource``), so a slow read never blocks another request.

The studio (``actions``), unless ``read_only``: ``/new`` (the New-run page), the POST routes under
``/api/studio/`` (the only routes that accept anything but GET: Starlette answers 405 elsewhere), and the
folder picker's reads. Every HTML page sets the CSRF cookie (``csrf``) and hands its token to the template.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import FileResponse, JSONResponse, PlainTextResponse, Response
from starlette.routing import BaseRoute, Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.templating import Jinja2Templates

from ltx_pipeline.errors import LtxPipelineError, UnsafePath
from ltx_pipeline.reports.memory_figures import format_gb
from ltx_pipeline.ui.access import TokenGate
from ltx_pipeline.ui.actions import Studio, read_routes, who_for, write_routes
from ltx_pipeline.ui.compare import compare_view
from ltx_pipeline.ui.csrf import COOKIE as CSRF_COOKIE
from ltx_pipeline.ui.csrf import CsrfKeys
from ltx_pipeline.ui.files import MEDIA_TYPES, servable
from ltx_pipeline.ui.new_run import new_run_context
from ltx_pipeline.ui.source import StoreSource
from ltx_pipeline.ui.views import live_view, run_view, runs_view
from ltx_pipeline.workspace import Workspace, validate_run_name

__all__ = ["create_app"]

_HERE = Path(__file__).resolve().parent
POLL_MS = 2000


def create_app(workspace: Workspace, token: str | None = None, *, data_roots: Sequence[Path] = (),
               read_only: bool = False, token_name: str | None = None) -> TokenGate:
    """The ASGI app serving ``workspace``; ``token`` None serves loopback clients only.

    Args:
        data_roots: the folders the studio may list and read datasets from (resolved here).
        read_only: today's dashboard: no write route is registered, no write control drawn.
        token_name: the audit's name for whoever holds the token (default "token", or "loopback").
    """
    source = StoreSource(workspace)
    roots = tuple(Path(r).expanduser().resolve() for r in data_roots)
    keys = CsrfKeys()
    studio = Studio(workspace, roots, who_for(token, token_name))
    routes: list[BaseRoute] = [
        *_pages(source, _templates(read_only), keys, roots, read_only), *read_routes(studio),
        *([] if read_only else write_routes(studio, keys)),
        Mount("/static", StaticFiles(directory=str(_HERE / "static")), name="static")]
    app = Starlette(routes=routes, exception_handlers={LtxPipelineError: _store_error, HTTPException: _http_error})
    app.state.studio = studio  # tests wait on the commands it started
    return TokenGate(app, token)


def _templates(read_only: bool) -> Jinja2Templates:
    templates = Jinja2Templates(directory=str(_HERE / "templates"))
    templates.env.globals["poll_ms"] = POLL_MS
    templates.env.globals["read_only"] = read_only
    templates.env.filters["gb"] = format_gb  # memory figures as everywhere else: MiB when small, never 0.0 GB
    return templates


def _pages(source: StoreSource, templates: Jinja2Templates, keys: CsrfKeys, roots: tuple[Path, ...],
           read_only: bool) -> list[BaseRoute]:
    """The pages, the JSON they poll and the workspace's files (GET only)."""
    workspace = source.workspace

    def page(request: Request, template: str, context: dict[str, Any]) -> Response:
        """A page, with the browser's CSRF token (a new one, set as its cookie, when it has none that is valid)."""
        csrf, fresh = keys.for_page(request)
        response = templates.TemplateResponse(request, template, {**context, "csrf_token": csrf})
        if fresh:
            response.set_cookie(CSRF_COOKIE, csrf, httponly=False, samesite="strict", path="/")
        return response

    def runs_page(request: Request) -> Response:
        return page(request, "runs.html", {"data": _finite(runs_view(source))})

    def run_page(request: Request) -> Response:
        data = run_view(source, _run_name(request), roots)
        if data is None:
            raise HTTPException(404, "no such run in this workspace")
        return page(request, "run.html", {"data": _finite(data)})

    def compare_page(request: Request) -> Response:
        data = compare_view(source, [_checked_name(n) for n in request.query_params.getlist("run")])
        if data is None:
            raise HTTPException(404, "no such run in this workspace")
        return page(request, "compare.html", {"data": _finite(data)})

    def new_page(request: Request) -> Response:
        return page(request, "new.html", new_run_context(roots, read_only))

    def runs_json(request: Request) -> Response:
        return JSONResponse(_finite(runs_view(source)))

    def run_json(request: Request) -> Response:
        data = live_view(source, _run_name(request), roots)
        if data is None:
            raise HTTPException(404, "no such run in this workspace")
        return JSONResponse(_finite(data))

    def workspace_file(request: Request) -> Response:
        found = servable(workspace.root, request.path_params["path"])
        if found is None:
            raise HTTPException(404, "not found")
        return FileResponse(found, media_type=MEDIA_TYPES[found.suffix.lower()])

    return [Route("/", runs_page), Route("/runs/{name}", run_page), Route("/compare", compare_page),
            Route("/new", new_page), Route("/api/runs", runs_json), Route("/api/runs/{name}", run_json),
            Route("/files/{path:path}", workspace_file)]


def _run_name(request: Request) -> str:
    return _checked_name(request.path_params["name"])


def _checked_name(name: str) -> str:
    try:
        return validate_run_name(name)
    except UnsafePath:
        raise HTTPException(404, "no such run in this workspace") from None


def _finite(value: Any) -> Any:
    """``value`` with NaN and infinities as None: JSON has no such numbers, and a diverged loss can be one."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    return value


async def _store_error(request: Request, exc: Exception) -> Response:
    """A store the dashboard cannot read as it is (another schema, a server down): the one-line error and its fix."""
    line = exc.line() if isinstance(exc, LtxPipelineError) else str(exc)
    return PlainTextResponse(f"{line}\n", 503)


async def _http_error(request: Request, exc: Exception) -> Response:
    status = exc.status_code if isinstance(exc, HTTPException) else 500
    detail = exc.detail if isinstance(exc, HTTPException) else "error"
    return PlainTextResponse(f"{status}: {detail}\n", status)
