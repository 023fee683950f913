"""Can a captioner run here, now? One answer per captioner, with the exact command that would make it run.

``offline`` always can. ``qwen_omni`` and ``gemini_flash`` need the user's LTX-2 checkout with
``packages/ltx-trainer/scripts/caption_videos.py`` and a synced environment (``uv.lock`` and ``.venv`` at the root,
the probe's test for ``uv sync``). ``qwen_omni`` also needs the vLLM server to answer ``GET <url>/models`` within
``_TIMEOUT_S``; a loopback URL is asked directly, never through an ``http_proxy`` from the environment.
``gemini_flash`` needs ``GEMINI_API_KEY`` or ``GOOGLE_API_KEY``; only the variable's name is ever reported.
Only reads files and, for qwen_omni, makes that one HTTP request.
"""

from __future__ import annotations

import ipaddress
import json
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from ltx_pipeline.captioning.trainer_script import (
    API_KEY_VARS,
    CAPTION_SCRIPT,
    DEFAULT_VLLM_URL,
    SERVE_COMMAND,
    TRAINER_CAPTIONERS,
)
from ltx_pipeline.probing import check_trainer_root

__all__ = ["Availability", "captioner_availability"]

_TIMEOUT_S = 2.0
_CLONE = "git clone https://github.com/Lightricks/LTX-2 && cd LTX-2 && uv sync"
_TRAINER = Path("packages") / "ltx-trainer"


@dataclass(frozen=True)
class Availability:
    """``ok``: the captioner can run now; ``detail``: what was found; ``fix``: the command or step, when not ok."""

    ok: bool
    detail: str
    fix: str | None = None


def captioner_availability(name: str, *, trainer_root: Path | None, vllm_url: str = DEFAULT_VLLM_URL,
                           env: Mapping[str, str], trainer_python: str | None = None) -> Availability:
    """Whether captioner ``name`` can run; ``trainer_root`` falls back to ``env["LTX2_ROOT"]`` as the probe does."""
    if name == "offline":
        return Availability(True, "offline: measured facts of each clip (PyAV), no model or network needed")
    if name not in TRAINER_CAPTIONERS:
        return Availability(False, f"{name!r} is not a captioner",
                            f"choose one of offline, {', '.join(TRAINER_CAPTIONERS)}")
    checkout = _checkout(trainer_root, env, synced_needed=trainer_python is None)
    if isinstance(checkout, Availability):
        return checkout
    if name == "qwen_omni":
        return _vllm_server(vllm_url, checkout)
    present = [var for var in API_KEY_VARS if env.get(var)]
    if not present:
        return Availability(False, f"gemini_flash: neither {' nor '.join(API_KEY_VARS)} is set",
                            "export GEMINI_API_KEY=... (a Gemini API key, from https://aistudio.google.com/apikey)")
    return Availability(True, f"gemini_flash through {checkout / CAPTION_SCRIPT}, key from {present[0]}")


def _checkout(trainer_root: Path | None, env: Mapping[str, str], *, synced_needed: bool = True) -> Path | Availability:
    """The trainer folder of a checkout holding the caption script, or why not; synced (uv) unless the script
    runs with --trainer-python, whose environment the probe checks apart."""
    found = check_trainer_root(trainer_root, env)
    if found.root is None:
        return Availability(False, "no LTX-2 trainer checkout given (no --trainer-root, LTX2_ROOT unset)",
                            f"`{_CLONE}`, then pass --trainer-root PATH or set LTX2_ROOT")
    root = Path(found.root)
    if not found.exists:
        return Availability(False, f"no LTX-2 checkout at {root}", f"`{_CLONE}` and pass its path as --trainer-root")
    trainer = root / _TRAINER
    if not (trainer / CAPTION_SCRIPT).is_file():
        return Availability(False, f"{trainer / CAPTION_SCRIPT} is missing",
                            f"update the checkout: `git -C {root} pull`, then `uv sync` there")
    if synced_needed and not found.synced:
        lacking = "uv.lock" if not found.has_uv_lock else ".venv"
        return Availability(False, f"the checkout at {root} is not synced (no {lacking})", f"`cd {root} && uv sync`")
    return trainer


def _vllm_server(url: str, trainer: Path) -> Availability:
    """Ask ``GET <url>/models``; the fix names the command that starts the trainer's captioner server."""
    start = f"start the captioner server in another terminal: `cd {trainer} && {SERVE_COMMAND}`"
    if url.rstrip("/") != DEFAULT_VLLM_URL:
        start += f" (it serves {DEFAULT_VLLM_URL}; pass that URL, or keep {url} if your server listens there)"
    else:
        start += " (it listens on port 8001)"
    parts = urllib.parse.urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return Availability(False, f"qwen_omni: {url!r} is not an http(s) URL", f"pass --vllm-url {DEFAULT_VLLM_URL}")
    models = url.rstrip("/") + "/models"
    handlers = [urllib.request.ProxyHandler({})] if _loopback(parts.hostname) else []
    opener = urllib.request.build_opener(*handlers)
    try:
        with opener.open(urllib.request.Request(models, method="GET"), timeout=_TIMEOUT_S) as response:
            body = response.read(65536)
    except urllib.error.HTTPError as exc:
        return Availability(False, f"qwen_omni: the server at {models} answered HTTP {exc.code}", start)
    except (urllib.error.URLError, OSError, ValueError) as exc:
        reason = getattr(exc, "reason", exc)
        return Availability(False, f"qwen_omni: no captioner server answers at {models} ({reason})", start)
    served = _model_ids(body)
    return Availability(True, f"qwen_omni: vLLM server at {url}" + (f" serving {', '.join(served)}" if served else ""))


def _loopback(host: str) -> bool:
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _model_ids(body: bytes) -> list[str]:
    """The model ids of an OpenAI-style ``/models`` answer (none when it is not one)."""
    try:
        data = json.loads(body).get("data", [])
        return [str(model["id"]) for model in data if isinstance(model, dict) and "id" in model][:3]
    except (ValueError, AttributeError, TypeError):
        return []
