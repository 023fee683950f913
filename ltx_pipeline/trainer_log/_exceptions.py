"""The exception a log ends with, read from Python's traceback layout, and the failure kind its type implies.

Phrase lists learn one trainer's wording at a time; what every Python program shares is the traceback's shape
(``Traceback (most recent call last):``, ``File ...`` frames, then ``module.Type: message``) and the exception
types of the standard library, torch, huggingface_hub, PIL, safetensors and the schema libraries. So the root
exception is found structurally (the last traceback's exception; a chained traceback's causes kept; a launcher's
re-raise such as ``CalledProcessError``, or a traceback cut before its exception line, gives way to the one before,
and so does a program's own re-raise as the bare ``Exception`` base class, which carries no type of its own, when
no message shape reads it) and its TYPE, with the standard message shapes of those libraries (``_library_errors``),
maps to a kind. Exception lines pasted alone (in prose, without a traceback) count too; front ends that drop the
type ("Error running job: <message>") leave the message, which the shapes still read; a paste cut right after the
last frame's ``raise Type("message")`` source line gives that type and message (Python prints no more than that).
Input lines have their launcher prefixes stripped already. Pure standard library.
"""

from __future__ import annotations

import re
from typing import NamedTuple

from ltx_pipeline.trainer_log._crash_causes import crash_advice
from ltx_pipeline.trainer_log._detect import _SMOKE, Finding
from ltx_pipeline.trainer_log._kinds import FixStep
from ltx_pipeline.trainer_log._library_errors import CONFIG_ADVICE, SHAPES, STALE_ADVICE, TYPES

__all__ = ["RaisedException", "exception_failure", "logged_error_failure", "missing_program_failure",
           "root_exception"]


class RaisedException(NamedTuple):
    type: str  # dotted as printed ("torch.OutOfMemoryError", "KeyError", "" when a front end dropped it)
    message: str
    line: str  # the exception line as printed
    # Raised while handling the exception before it: a chain marker ("During handling of the above exception",
    # "The above exception was the direct cause") since that one, or only blank lines and frames between them.
    chained: bool = False
    raised_in: str = ""  # the traceback's innermost ``File "...", line N, in func`` frame ("" when none was printed)
    source: str = ""  # that frame's source line, as Python prints it under the frame ("" when none was printed)


# "module.sub.TypeName: message" or a bare "TypeName": a capitalised name ending as exception classes do (a private
# one too: numpy's ``_ArrayMemoryError``), or
# a module's lower-case ``error`` class (cv2.error, socket.error).
_EXCEPTION_RE = re.compile(
    r"^(?P<type>(?:[A-Za-z_]\w*\.)*(?:(?:_?[A-Z]\w*)?(?:Error|Exception)|[A-Z]\w*(?:Invalid|Exit|Interrupt|Warning)|"
    r"StopIteration)"
    r"|(?:[A-Za-z_]\w*\.)+error)(?::\s?(?P<message>.*))?$")
# An HTTP error's own wording (requests' HTTPError, the Hub's errors) printed without its type by a front end.
_HTTP_ERROR_RE = re.compile(r"^(?P<message>[45]\d\d (?:Client|Server) Error\b.*)$")
# A front end's own line around an exception's message, with the type gone.
_FRONT_END_RE = re.compile(r"^(?:Error running job|Training failed|Exception|Error|Fatal error):\s(?P<message>\S.*)$")
_CHAIN_MARKERS = ("During handling of the above exception", "The above exception was the direct cause")
# Raised by launchers and wrappers about a child that failed: the child's own exception is the cause.
_WRAPPERS = {"CalledProcessError", "ChildFailedError", "SystemExit", "ProcessRaisedException", "ProcessExitedException"}
# A frame's source line that raises with a literal message: `raise ValueError("...")`, `raise X(f'...')`.
_RAISE_RE = re.compile(r"^raise (?P<type>(?:[A-Za-z_]\w*\.)*[A-Za-z_]\w*)\(\s*f?(?P<q>['\"])(?P<message>.*?)(?P=q)")


def root_exception(lines: list[str]) -> RaisedException | None:
    """The exception that ended the program: the last traceback's, unless that one only reports a child."""
    candidates = _exceptions(lines)
    for found in reversed(candidates):
        if found.type.rsplit(".", 1)[-1] not in _WRAPPERS:
            return found
    return None


def _exceptions(lines: list[str]) -> list[RaisedException]:
    """Each exception line in order: those ending a traceback, and those printed on their own."""
    found: list[RaisedException] = []
    in_traceback = False
    last_source = ""  # the newest frame's source line, for a traceback the paste cut before its exception line
    last_frame = frame_source = ""  # the newest ``File "..."`` frame since the last exception, and its source line
    linked = False  # nothing but frames, blank lines and chain markers since the last exception found
    for raw in lines:
        line = raw.rstrip()
        if line.startswith("Traceback (most recent call last)"):
            in_traceback, last_source, last_frame, frame_source = True, "", "", ""
            continue
        if line.lstrip().startswith('File "'):  # a paste may start at its first frame, without the header
            last_frame, frame_source = line.strip(), ""
        elif last_frame and not frame_source and line.startswith((" ", "\t")) and line.strip() and \
                not line.lstrip().startswith(("^", "~")):
            frame_source = line.strip()
        if not line.strip() or line.startswith((" ", "\t")) or line.lstrip().startswith(('File "', "^", "~")):
            if in_traceback and line.strip() and not line.lstrip().startswith(('File "', "^", "~")):
                last_source = line.strip()
            continue  # frames, source lines, carets: inside a traceback or an indented quote
        if line.startswith(_CHAIN_MARKERS):
            linked = bool(found)
            continue
        if match := _EXCEPTION_RE.match(line):
            found.append(RaisedException(match.group("type"), (match.group("message") or "").strip(), line, linked,
                                         last_frame, frame_source))
            in_traceback, linked, last_frame, frame_source = False, True, "", ""
        elif (match := _FRONT_END_RE.match(line) or _HTTP_ERROR_RE.match(line)) and not in_traceback:
            found.append(RaisedException("", match.group("message").strip(), line, linked))
            linked = True
        else:
            linked = False
    if in_traceback and (match := _RAISE_RE.match(last_source)):  # cut after the raising frame: it names the error
        found.append(RaisedException(match.group("type"), match.group("message"), last_source))
    return found


# A KeyError on a cached tensor's key (latents, embeddings, text-encoder outputs): the cache lacks it.
_CACHED_KEY_RE = re.compile(
    r"(?i)^['\"][\w.]*(?:latent|embed|text_encoder|encoder_hidden|cache|\bte_|_te\b)[\w.]*['\"]$")


def exception_failure(lines: list[str]) -> Finding | None:
    """The kind the root exception's type or message shape implies, with its advice; None when neither maps."""
    candidates = _exceptions(lines)
    index = next((i for i in range(len(candidates) - 1, -1, -1)
                  if candidates[i].type.rsplit(".", 1)[-1] not in _WRAPPERS), None)
    while index is not None:
        found = candidates[index]
        mapped = _mapped(found)
        if mapped == "crash":
            return None  # a known crash mechanism (a full disk, a kernel fault): its type does not name the kind
        if isinstance(mapped, tuple):
            return _finding(*mapped, found.line)
        # A program's re-raise as the bare base class names no kind of its own: the exception it handled does.
        index = index - 1 if found.type == "Exception" and found.chained and index > 0 else None
    return None


def logged_error_failure(lines: list[str], messages: list[str]) -> Finding | None:
    """The last logged ERROR record of a log that shows no exception: the message shapes read its text as they read
    an exception's (front ends such as kohya's GUI log their refusals at ERROR level and print no traceback)."""
    if not messages or _exceptions(lines):
        return None
    mapped = _mapped(RaisedException("", messages[-1].strip(), messages[-1].strip()))
    return _finding(*mapped, messages[-1]) if isinstance(mapped, tuple) else None


def _finding(kind: str, advice: str, line: str) -> Finding:
    """``kind`` with its advice, the line that shows it quoted in both."""
    evidence = line.strip()
    return Finding(kind, evidence, [FixStep(None, None, advice.format(evidence=evidence))])


def _mapped(found: RaisedException) -> tuple[str, str] | str | None:
    """(kind, advice) for one exception; "crash" for a known crash mechanism; None when nothing reads it."""
    short = found.type.rsplit(".", 1)[-1]
    mapped = next(((kind, advice) for pattern, kind, advice in SHAPES if pattern.search(found.message)), None)
    if mapped is None and crash_advice(found.message):
        return "crash"
    if mapped is None and short in TYPES:
        mapped = TYPES[short]
    if mapped is None and short == "KeyError" and _CACHED_KEY_RE.match(found.message):
        mapped = ("stale_embeddings", STALE_ADVICE)
    if mapped is None and short in ("ValidationError",) and found.type != short:
        mapped = ("config_error", CONFIG_ADVICE)  # pydantic's, jsonschema's, omegaconf's: a schema refused data
    if mapped is None and short == "TypeError" and _library_call_mismatch(found):
        mapped = ("dependency_error", _SIGNATURE_ADVICE)
    return mapped


# CPython's refusals to bind a call's arguments (Python/ceval.c, getargs): the callee's signature is not the one the
# caller was written for.
_BINDING_RE = re.compile(r"\w\(\) (?:takes (?:from \d+ to )?\d+ positional arguments? but \d+ (?:were|was) given|"
                         r"missing \d+ required (?:positional|keyword-only) arguments?|"
                         r"got multiple values for argument)")
# An installed package's own frame (pip's site-packages, Debian's dist-packages).
_PACKAGE_FRAME_RE = re.compile(r"""File "[^"]*[/\\](?:site|dist)-packages[/\\]""")
_SIGNATURE_ADVICE = ("An installed package calls a function with arguments its other side no longer takes "
                     "({evidence}): the trainer's code overrides or hands the package a method written for another "
                     "version of it (a Trainer subclass's training_step, a callback); install the package version the "
                     "trainer pins (`<trainer python> -m pip install -r requirements.txt`), " + _SMOKE + ".")


def _library_call_mismatch(found: RaisedException) -> bool:
    """A TypeError binding a call's arguments, raised at a call an installed package makes with arguments of its
    own: the package and the code it calls are of different versions. A call that forwards ``*args``/``**kwargs``
    (torch's Module.__call__, a decorator) only passes on its caller's mistake, so it does not count."""
    return bool(_BINDING_RE.search(found.message) and _PACKAGE_FRAME_RE.search(found.raised_in)
                and found.source and not re.search(r"[(,]\s*\*", found.source))


# subprocess's Popen (``_execute_child``: CreateProcess on Windows, the child's exec on POSIX) and ``os.exec*p``
# raise FileNotFoundError when the program to run is not there: a program, not a data file, is missing.
_LAUNCH_FRAME_RE = re.compile(r"""[/\\](?:subprocess|os)\.py", line \d+, in (?:_execute_child|_execvpe)$""")
_PROGRAM_ADVICE = ("The trainer starts a program that is not installed or not on PATH ({evidence}); the traceback's "
                   "frame above subprocess names what it launched (TensorBoard, git, ffmpeg, a launcher): install it "
                   "in the trainer's environment, or turn off the option that starts it, and check that the "
                   "environment finds it (`which <program>`; on Windows `where <program>`), then launch again.")


def missing_program_failure(lines: list[str]) -> Finding | None:
    """A FileNotFoundError raised while starting a child process: the program to run is missing, not a file the
    trainer reads (``dependency_error``)."""
    root = root_exception(lines)
    if root is None or root.type.rsplit(".", 1)[-1] != "FileNotFoundError" or not _LAUNCH_FRAME_RE.search(
            root.raised_in):
        return None
    return _finding("dependency_error", _PROGRAM_ADVICE, root.line)
