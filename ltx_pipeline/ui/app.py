"""The dashboard's web app: two pages, the JSON they poll, the workspace's media files and the shipped assets.

Routes (every one behind ``access.TokenGate``):

- ``/``: the runs; ``/runs/<name>``: one run (404 for a name the workspace has no run of, or an unsafe one).
- ``/compare?run=A&run=B``: runs side by side (``compare``); fewer than two names: the run picker.
- ``/api/runs`` and ``/api/runs/<name>``: the JSON the pages poll every two seconds (``views``).
- ``/files/<path>``: a workspace file (``files.servable``), with HTTP Range support so a video seeks.
- ``/static/...``: the CSS and JavaScript shipped in the package (no CDN, no build step).

The handlers are plain functions, which Starlette runs on its thread pool: each opens its own read-only
store connection (``source.StoreSource``), so a slow read never blocks another request.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import FileResponse, JSONResponse, PlainTextResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.templating import Jinja2Templates

from ltx_pipeline.errors import LtxPipelineError, UnsafePath
from ltx_pipeline.reports.memory_figures import format_gb
from ltx_pipeline.ui.access import TokenGate
from ltx_pipeline.ui.compare import compare_view
from ltx_pipeline.ui.files import MEDIA_TYPES, servable
from ltx_pipeline.ui.source import StoreSource
from ltx_pipeline.ui.views import live_view, run_view, runs_view
from ltx_pipeline.workspace import Workspace, validate_run_name

__all__ = ["create_app"]

_HERE = Path(__file__).resolve().parent
POLL_MS = 2000


def create_app(workspace: Workspace, token: str | None = None) -> TokenGate:
    """The ASGI app serving ``workspace`` read-only; ``token`` None serves loopback clients only."""
    source = StoreSource(workspace)
    templates = Jinja2Templates(directory=str(_HERE / "templates"))
    templates.env.globals["poll_ms"] = POLL_MS
    templates.env.filters["gb"] = format_gb  # memory figures as everywhere else: MiB when small, never 0.0 GB

    def runs_page(request: Request) -> Response:
        data = _finite(runs_view(source))
        return templates.TemplateResponse(request, "runs.html", {"data": data})

    def run_page(request: Request) -> Response:
        data = run_view(source, _run_name(request))
        if data is None:
            raise HTTPException(404, "no such run in this workspace")
        return templates.TemplateResponse(request, "run.html", {"data": _finite(data)})

    def compare_page(request: Request) -> Response:
        data = compare_view(source, [_checked_name(n) for n in request.query_params.getlist("run")])
        if data is None:
            raise HTTPException(404, "no such run in this workspace")
        return templates.TemplateResponse(request, "compare.html", {"data": _finite(data)})

    def runs_json(request: Request) -> Response:
        return JSONResponse(_finite(runs_view(source)))

    def run_json(request: Request) -> Response:
        data = live_view(source, _run_name(request))
        if data is None:
            raise HTTPException(404, "no such run in this workspace")
        return JSONResponse(_finite(data))

    def workspace_file(request: Request) -> Response:
        found = servable(workspace.root, request.path_params["path"])
        if found is None:
            raise HTTPException(404, "not found")
        return FileResponse(found, media_type=MEDIA_TYPES[found.suffix.lower()])

    routes = [Route("/", runs_page), Route("/runs/{name}", run_page), Route("/compare", compare_page),
              Route("/api/runs", runs_json),
              Route("/api/runs/{name}", run_json), Route("/files/{path:path}", workspace_file),
              Mount("/static", StaticFiles(directory=str(_HERE / "static")), name="static")]
    app = Starlette(routes=routes, exception_handlers={LtxPipelineError: _store_error, HTTPException: _http_error})
    return TokenGate(app, token)


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
