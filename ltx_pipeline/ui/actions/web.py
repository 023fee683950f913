"""The studio's HTTP door: the write routes (POST only) and the picker's reads, each checked before it runs.

A write passes the Origin and CSRF checks (``ui.csrf``) or is refused with 403 and changes nothing; its
body must be a JSON object; then the action runs on the server's thread pool, its audit row is written
(accepted or not) and the answer is JSON: ``{"ok": true, "command", "message", "run", ...}``, or
``{"ok": false, "error": <the CLI's one line>}`` with 400 (bad input), 403 (outside the data roots) or
409 (refused now: a stale gate, a run at work). The handlers hold no engine logic: each is one action.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import FileResponse, JSONResponse, Response
from starlette.routing import Route

from ltx_pipeline.errors import BadInput, LtxPipelineError, Refused
from ltx_pipeline.ui.actions import audit
from ltx_pipeline.ui.actions.captions import edit_caption
from ltx_pipeline.ui.actions.control import continue_run, remove_run, resume_run, stop_run
from ltx_pipeline.ui.actions.create import create_run
from ltx_pipeline.ui.actions.gates import approve_gate
from ltx_pipeline.ui.actions.roots import VIDEOS, OutsideRoots, browse, inside_roots
from ltx_pipeline.ui.actions.studio import Attempt, Done, Studio
from ltx_pipeline.ui.csrf import CsrfKeys, write_refusal
from ltx_pipeline.ui.files import MEDIA_TYPES
from ltx_pipeline.workspace import validate_run_name

__all__ = ["read_routes", "write_routes"]

RunAction = Callable[[Studio, Attempt, str, dict[str, Any]], Done]

_RUN_ACTIONS: dict[str, RunAction] = {"approve": approve_gate, "captions": edit_caption, "resume": resume_run,
                                      "stop": stop_run, "continue": continue_run, "remove": remove_run}


def write_routes(studio: Studio, keys: CsrfKeys) -> list[Route]:
    """Every route that changes state: POST only, all under ``/api/studio/``."""

    async def create(request: Request) -> Response:
        return await _write(request, studio, keys, Attempt("create"),
                            lambda attempt, body: create_run(studio, attempt, body))

    routes = [Route("/api/studio/runs", create, methods=["POST"])]
    for verb, action in _RUN_ACTIONS.items():
        routes.append(Route(f"/api/studio/runs/{{name}}/{verb}", _run_endpoint(studio, keys, verb, action),
                            methods=["POST"]))
    return routes


def read_routes(studio: Studio) -> list[Route]:
    """The folder picker's listing and the clips it may play (GET only, inside the data roots)."""

    def listing(request: Request) -> Response:
        try:
            return JSONResponse(browse(studio.data_roots, request.query_params.get("path")))
        except OutsideRoots as exc:
            return _failure(exc)

    def media(request: Request) -> Response:
        try:
            found = inside_roots(studio.data_roots, request.query_params.get("path"), "path")
        except OutsideRoots as exc:
            return _failure(exc)
        if not found.is_file() or found.suffix.lower() not in VIDEOS:
            return JSONResponse({"ok": False, "error": "not a video under a data root"}, 404)
        return FileResponse(found, media_type=MEDIA_TYPES.get(found.suffix.lower(), "video/mp4"))

    return [Route("/api/studio/browse", listing), Route("/api/studio/media", media)]


def _run_endpoint(studio: Studio, keys: CsrfKeys, verb: str, action: RunAction) -> Callable[[Request], Any]:
    async def endpoint(request: Request) -> Response:
        name = request.path_params["name"]

        def perform(attempt: Attempt, body: dict[str, Any]) -> Done:
            attempt.run = validate_run_name(name)  # an unsafe name: 400, audited without it
            return action(studio, attempt, attempt.run, body)

        return await _write(request, studio, keys, Attempt(verb), perform)

    return endpoint


async def _write(request: Request, studio: Studio, keys: CsrfKeys, attempt: Attempt,
                 perform: Callable[[Attempt, dict[str, Any]], Done]) -> Response:
    refusal = write_refusal(request, keys)
    if refusal is not None:
        return JSONResponse({"ok": False, "error": refusal}, 403)
    try:
        body = json.loads(await request.body() or b"{}")
    except ValueError:
        body = None
    if not isinstance(body, dict):
        return JSONResponse({"ok": False, "error": "the request body must be a JSON object"}, 400)
    return await run_in_threadpool(_perform, studio, attempt, perform, body)


def _perform(studio: Studio, attempt: Attempt, perform: Callable[[Attempt, dict[str, Any]], Done],
             body: dict[str, Any]) -> Response:
    try:
        done = perform(attempt, body)
    except LtxPipelineError as exc:
        audit.record(studio, attempt, exc.line())
        return _failure(exc)
    except Exception as exc:
        audit.record(studio, attempt, f"internal error: {type(exc).__name__}")
        raise
    audit.record(studio, attempt, "ok")
    return JSONResponse({**done.extra, "ok": True, "command": done.command, "message": done.message,
                         "run": done.run})


def _failure(exc: LtxPipelineError) -> Response:
    status = 403 if isinstance(exc, OutsideRoots) else 409 if isinstance(exc, Refused) else (
        400 if isinstance(exc, BadInput) else 500)
    return JSONResponse({"ok": False, "error": exc.line()}, status)
