"""The ``qwen_omni`` and ``gemini_flash`` captioners: the trainer's own ``scripts/caption_videos.py``, run as is.

Contract of the real script (packages/ltx-trainer/scripts/caption_videos.py): positional ``INPUT_PATH`` (a media
file or a folder, searched non-recursively for ``--extensions``), ``--output`` (format from its suffix; ``.json``
is a list of ``{"caption", "media_path"}`` rows relative to the output's folder), ``--captioner-type``, and
``--vllm-url`` for qwen_omni. Without ``--override`` it loads the existing output and skips captioned media; it
saves every 5 captions and at the end, and a failing clip is only printed ("Error captioning ...") with exit 0.

So this module:

- launches it like every trainer script, ``uv run --directory <checkout>/packages/ltx-trainer python
  scripts/caption_videos.py ...`` (or ``<--trainer-python> scripts/caption_videos.py ...`` in the trainer folder)
  as an argv (never a shell), once per folder when the folder holds no other
  uncaptioned media of those suffixes, else once per clip, so nothing but the given clips is captioned;
- points ``--output`` at a scratch copy beside the captions file (same folder, so the same relative paths): the
  script writes non-atomically, and on a kill mid-write its loader would read a torn file as "no captions" and
  overwrite it. The scratch is polled and every new caption is merged, trigger stripped, into the real file with
  ``atomic_write``, which is also what ``on_progress`` reports;
- passes the Gemini key only through the child's environment (and drops it for qwen_omni): never in argv, in
  ``settings()``, in a message; output quoted in an error has the key values and Google-key shapes redacted;
- raises ``RunFailed`` on a non-zero exit, and also when the script exits 0 but left a clip without a caption;
- stops the script with this process: an exception or interrupt ends its process group, and on Linux the kernel
  sends it SIGTERM if this process is killed outright, so no orphan goes on captioning after a SIGKILL.
"""

from __future__ import annotations

import ctypes
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import IO, Any
from urllib.parse import urlsplit, urlunsplit

from ltx_pipeline.backends.launch import LOG_ENV
from ltx_pipeline.backends.ltx import LtxBackend
from ltx_pipeline.captioning._captions_file import CaptionBook, read_items, strip_trigger
from ltx_pipeline.errors import BadDataset, BadInput, RunFailed
from ltx_pipeline.ltx.preparation import DEFAULT_VLLM_URL
from ltx_pipeline.probing import check_trainer_root

__all__ = ["API_KEY_VARS", "CAPTION_SCRIPT", "DEFAULT_VLLM_URL", "SERVE_COMMAND", "TRAINER_CAPTIONERS",
           "TrainerScriptCaptioner", "redact"]

CAPTION_SCRIPT = "scripts/caption_videos.py"
#: The server the qwen_omni backend talks to, as the trainer's docs say to start it (in packages/ltx-trainer).
SERVE_COMMAND = "uv run python scripts/serve_captioner.py"
TRAINER_CAPTIONERS = ("qwen_omni", "gemini_flash")
#: Where the real script's ``--api-key`` option reads the Gemini key from (typer ``envvar``).
API_KEY_VARS = ("GEMINI_API_KEY", "GOOGLE_API_KEY")
_GOOGLE_KEY = re.compile(r"AIza[0-9A-Za-z_\-]{20,}")
_TAIL_LINES = 8
_STOP_GRACE_S = 10.0
_PR_SET_PDEATHSIG = 1  # linux/prctl.h


class TrainerScriptCaptioner:
    """Captions through the user's LTX-2 checkout; see the module docstring for the contract it relies on."""

    name: str

    def __init__(self, name: str, *, trainer_root: Path | None, trigger: str | None = None,
                 vllm_url: str = DEFAULT_VLLM_URL, uv: str | None = None, python: str | Path | None = None,
                 poll_s: float = 0.5) -> None:
        """Raises ``BadInput`` for an unknown name or a missing checkout (it names the fix)."""
        if name not in TRAINER_CAPTIONERS:
            raise BadInput(f"{name!r} is not a captioner of the trainer's caption_videos.py", where="captioner",
                           fix=f"choose one of {', '.join(TRAINER_CAPTIONERS)}")
        # --trainer-python: the script starts with that interpreter, as train.py does; uv is not needed then.
        backend = LtxBackend(trainer_root, uv, python=python)
        self.name = name
        self._backend = backend
        self.trainer_dir = backend.trainer_dir
        self.uv = backend.uv
        self.trigger = trigger.strip() if trigger and trigger.strip() else None
        self.vllm_url = vllm_url
        self.poll_s = poll_s
        self._commit = check_trainer_root(backend.root, {}).git_commit

    def settings(self) -> dict[str, Any]:
        """What identifies its captions: backend, script, checkout commit, server URL (no credentials), trigger."""
        found: dict[str, Any] = {"captioner": self.name, "script": CAPTION_SCRIPT, "trainer_commit": self._commit,
                                 "trigger": self.trigger}
        if self.name == "qwen_omni":
            found["vllm_url"] = _without_credentials(self.vllm_url)
        return found

    def command(self, target: Path, output: Path, extensions: Sequence[str]) -> list[str]:
        """The argv captioning ``target`` (a clip or a folder) into ``output``; only options the real script has."""
        argv = self._backend.trainer_run("python", CAPTION_SCRIPT, str(target), "--output", str(output),
                                    "--captioner-type", self.name, "--extensions", ",".join(extensions))
        if self.name == "qwen_omni":
            argv += ["--vllm-url", self.vllm_url]
        return argv

    def caption(self, clips: list[Path], captions_file: Path, *, workspace: Path,
                on_progress: Callable[[int, int], None] | None = None) -> dict[str, str]:
        """Caption the clips without a caption in ``captions_file`` with the real script; see the module docstring.

        Raises:
            BadInput: the captions file is not ``.json``, or a clip lies outside its folder.
            BadDataset: a clip does not exist, or the captions file is not JSON.
            RunFailed: the script failed or left clips without a caption (captions made so far are kept).
        """
        if captions_file.suffix.lower() != ".json":
            raise BadInput("The captions file must be a .json file", where=str(captions_file),
                           fix="name it e.g. dataset.json: the real script picks its format from the suffix")
        book = CaptionBook.load(captions_file)
        keys = {clip: book.key(clip) for clip in clips}
        for clip in clips:
            if not clip.is_file():
                raise BadDataset(f"The clip {clip} does not exist", where=str(clip), fix="restore it or drop it")
        if book.strip_trigger(clips, self.trigger):
            book.save(workspace)
        pending = list({str(clip.resolve()): clip for clip in clips if book.get(clip) is None}.values())
        if pending:
            scratch = captions_file.with_name(f".{captions_file.stem}.caption-videos.json")
            book.save(workspace, scratch)
            merger = _Merger(book, scratch, workspace, pending, self.trigger, on_progress)
            try:
                for target, extensions in _batches(pending, book):
                    self._run(self.command(target, scratch.resolve(), extensions), merger)
            finally:
                scratch.unlink(missing_ok=True)
            missing = [clip for clip in pending if book.get(clip) is None]
            if missing:
                raise RunFailed(f"The trainer's caption_videos.py ({self.name}) left {len(missing)} of {len(pending)} "
                                f"clips without a caption, first {keys[missing[0]]}: {merger.said()}",
                                where=str(self.trainer_dir / CAPTION_SCRIPT), fix=self._fix())
        return {keys[clip]: book.get(clip) or "" for clip in clips}

    def _run(self, argv: list[str], merger: _Merger) -> None:
        """Run one invocation, merging its captions while it runs; a failure or an interrupt stops the child."""
        try:
            process = subprocess.Popen(  # noqa: S603 - an argv list built by command(), never a shell
                argv, cwd=self.trainer_dir, env=self._child_env(), stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, encoding="utf-8", errors="replace",
                start_new_session=True, preexec_fn=_die_with_parent())
        except OSError as exc:
            if self._backend.python is not None:
                raise RunFailed(f"--trainer-python {self._backend.python} could not be run ({exc.strerror or exc})",
                                where=str(self.trainer_dir), fix="pass the python of the environment where "
                                "ltx-trainer is installed (ENV/bin/python)") from None
            raise RunFailed(f"{self.uv} could not be run ({exc.strerror or exc})", where=str(self.trainer_dir),
                            fix="install uv (https://docs.astral.sh/uv/) and put it on PATH") from None
        reader = threading.Thread(target=merger.read_output, args=(process.stdout,), daemon=True)
        reader.start()
        try:
            while True:
                status = process.poll()
                merger.pull()
                if status is not None:
                    break
                time.sleep(self.poll_s)
        except BaseException:
            _stop(process)
            raise
        reader.join(timeout=5)
        if status != 0:
            raise RunFailed(f"The trainer's caption_videos.py ({self.name}) exited with status {status}: "
                            f"{merger.said()}", where=str(self.trainer_dir / CAPTION_SCRIPT), fix=self._fix())

    def _child_env(self) -> dict[str, str]:
        env = {**os.environ, **LOG_ENV}
        if self.name != "gemini_flash":
            for var in API_KEY_VARS:
                env.pop(var, None)
        return env

    def _fix(self) -> str:
        again = "then run again: the captions made so far are kept"
        if self.name == "qwen_omni":
            return (f"check that the captioner server answers at {_without_credentials(self.vllm_url)} (start it in "
                    f"another terminal: `cd {self.trainer_dir} && {SERVE_COMMAND}`), {again}")
        return f"check GEMINI_API_KEY (or GOOGLE_API_KEY) and the network, {again}"


class _Merger:
    """Moves new captions from the script's scratch output into the captions file and reports progress."""

    def __init__(self, book: CaptionBook, scratch: Path, workspace: Path, pending: list[Path], trigger: str | None,
                 on_progress: Callable[[int, int], None] | None) -> None:
        self.book, self.scratch, self.workspace, self.pending = book, scratch, workspace, pending
        self.trigger, self.on_progress = trigger, on_progress
        self.reported = 0
        self.tail: deque[str] = deque(maxlen=_TAIL_LINES)
        self.errors: deque[str] = deque(maxlen=3)

    def pull(self) -> None:
        """Merge what the script has saved so far (a torn write is skipped: the next poll sees it whole)."""
        try:
            items = read_items(self.scratch)
        except BadDataset:
            return
        added = False
        for item in items:
            if not isinstance(item, dict) or not isinstance(item.get("caption"), str):
                continue
            media_path = item.get("media_path")
            if isinstance(media_path, str) and self.book.get(self.book.base / media_path) is None:
                caption = strip_trigger(item["caption"], self.trigger)
                self.book.set(self.book.base / media_path, caption, media_path)
                added = True
        if added:
            self.book.save(self.workspace)
        done = sum(1 for clip in self.pending if self.book.get(clip) is not None)
        if done > self.reported:
            self.reported = done
            if self.on_progress is not None:
                self.on_progress(done, len(self.pending))

    def read_output(self, stream: IO[str] | None) -> None:
        """Keep the last lines of the child's output, and its per-clip errors, for a failure message."""
        for line in stream or ():
            text = line.rstrip()
            if text:
                self.tail.append(text)
            if "Error captioning" in text:
                self.errors.append(text)

    def said(self) -> str:
        """What the script said last (its per-clip errors first), with keys redacted, on one line."""
        lines = [*self.errors, *(line for line in self.tail if line not in self.errors)]
        return redact(" | ".join(lines) or "no output", os.environ)


def _batches(pending: list[Path], book: CaptionBook) -> Iterator[tuple[Path, list[str]]]:
    """``(input, extensions)`` per invocation: a whole folder when the script would find no other uncaptioned
    media in it (it searches a folder non-recursively by suffix), else each clip on its own."""
    folders: dict[Path, list[Path]] = {}
    for clip in pending:
        folders.setdefault(clip.parent.resolve(), []).append(clip)
    wanted = {str(clip.resolve()) for clip in pending}
    for folder, group in folders.items():
        extensions = sorted({clip.suffix.lower().lstrip(".") for clip in group})
        if len(group) > 1 and not _others(folder, extensions, wanted, book):
            yield folder, extensions
            continue
        for clip in group:
            yield folder / clip.name, [clip.suffix.lower().lstrip(".")]


def _others(folder: Path, extensions: Iterable[str], wanted: set[str], book: CaptionBook) -> bool:
    suffixes = set(extensions)
    return any(entry.is_file() and entry.suffix.lower().lstrip(".") in suffixes and str(entry.resolve()) not in wanted
               and book.get(entry) is None for entry in folder.iterdir())


def redact(text: str, env: Mapping[str, str]) -> str:
    """``text`` with the values of the Gemini key variables in ``env`` and any Google API key shape as ``***``."""
    for var in API_KEY_VARS:
        secret = env.get(var)
        if secret and len(secret) >= 4:
            text = text.replace(secret, "***")
    return _GOOGLE_KEY.sub("***", text)


def _without_credentials(url: str) -> str:
    parts = urlsplit(url)
    if parts.username is None and parts.password is None:
        return url
    host = parts.hostname or ""
    netloc = f"{host}:{parts.port}" if parts.port else host
    return urlunsplit(parts._replace(netloc=netloc))


def _die_with_parent() -> Callable[[], None] | None:
    """On Linux, a hook making the kernel send SIGTERM to the child (uv, which passes it on to the script) when
    this process dies, even by SIGKILL: an orphaned script would go on captioning (and billing) unseen.
    libc is loaded here, before the fork, so the child only makes one system call."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None

    def hook() -> None:
        prctl(_PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)

    return hook


def _stop(process: subprocess.Popen[str]) -> None:
    """End the child's process group (uv and the script under it): TERM, then KILL after a grace period."""
    if process.poll() is not None:
        return
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(process.pid, sig)
        except (ProcessLookupError, PermissionError):
            return
        try:
            process.wait(timeout=_STOP_GRACE_S)
            return
        except subprocess.TimeoutExpired:
            continue
