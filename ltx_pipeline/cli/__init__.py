"""The console script: the one place errors and outcomes become exit codes.

Exit codes: 0 finished what was asked; 1 a phase failed or the minimum-VRAM gate stopped the run;
2 bad input or usage; 3 stopped at the approval gate; 4 refused (another driver holds the run,
or approve/resume/rm refused); 5 no space left (``DiskFull``, in whatever shape the full disk was
met). Errors print one line to stderr (a JSON object under ``--json``), never a traceback; an
unexpected exception writes its traceback to a file in the workspace and names that file.

Commands never pick an exit code: they raise the project's errors, or return how they ended, an
``Ending`` (a drive's ``engine.Outcome`` becomes one through ``ending_of``); ``Ending``'s values and
``_OUTCOMES`` are the one table. A plain int passes through as it is: click's own exits (``--help``,
``--version``) and ``node-launch``, whose exit code is its trainer's.
"""

from __future__ import annotations

import json
import sys
import time
import traceback
from enum import IntEnum
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from ltx_pipeline.errors import (
    EXIT_APPROVAL_GATE,
    EXIT_BAD_INPUT,
    EXIT_FAILED,
    EXIT_OK,
    EXIT_REFUSED,
    LtxPipelineError,
)
from ltx_pipeline.workspace import default_workspace

if TYPE_CHECKING:
    from ltx_pipeline.engine import Outcome

__all__ = ["Ending", "ending_of", "exit_code", "main"]


class Ending(IntEnum):
    """How a command ended without an error, named for what happened; its value is its exit code.

    With ``_OUTCOMES`` this is the one table of exit codes for outcomes (errors carry theirs, in
    ``errors.py``). An int enum, so a command called as a function still compares equal to its exit code.
    """

    DONE = EXIT_OK  # what was asked is done (a run finished, or goes on without this process)
    FAILED = EXIT_FAILED  # a check, smoke test or benchmark ran and reported a failure
    INVALID = EXIT_BAD_INPUT  # what was checked is invalid, every finding printed
    AT_GATE = EXIT_APPROVAL_GATE  # stopped at an approval gate; the approve command was printed
    DECLINED = EXIT_REFUSED  # the user said no; nothing was done


# How a drive ended (``engine.Outcome``, by its value: matched without loading the engine) -> how the command ended.
_OUTCOMES: dict[str, Ending] = {"finished": Ending.DONE, "detached": Ending.DONE,
                                "awaiting_approval": Ending.AT_GATE}


def ending_of(outcome: Outcome) -> Ending:
    """How a command that drove a run ended: finished or detached is done, at a gate is ``AT_GATE``."""
    return _OUTCOMES[outcome.value]


def exit_code(result: object) -> int:
    """The exit code of what a command returned: an ``Ending``, None (nothing returned: done), or a plain
    int (click's own exit, or the exit code of a trainer run in the foreground by ``node-launch``)."""
    if result is None:
        return EXIT_OK
    if isinstance(result, int):
        return int(result)
    raise TypeError(f"a command returned {result!r}, which has no exit code")


def main(argv: list[str] | None = None) -> int:
    """Run the CLI and return (and, as a script, exit with) the documented exit code."""
    args = list(sys.argv[1:] if argv is None else argv)
    as_json = "--json" in args
    try:
        from ltx_pipeline.cli.app import app

        result = app(args=args, standalone_mode=False, prog_name="ltx-pipeline")
        code = exit_code(result)
    except LtxPipelineError as exc:
        error = _disk_full(exc, args) or exc
        code = _fail(error.line(), error.exit_code, as_json, type(error).__name__)
    except typer.Abort:
        code = _fail("Interrupted.", 130, as_json, "Interrupted")
    except typer.TyperException as exc:  # typer's (vendored click) usage and parameter errors
        ctx = getattr(exc, "ctx", None)
        if type(exc).__name__ == "NoArgsIsHelpError" and ctx is not None:
            print(ctx.get_help(), file=sys.stderr)
            return _exit(EXIT_BAD_INPUT, argv)
        where = f" ({ctx.command_path})" if ctx is not None else ""
        help_of = ctx.command_path if ctx is not None else "ltx-pipeline"
        # click's messages end with their own full stop, or not: one stop, then where and the fix.
        code = _fail(f"{exc.format_message().rstrip('.')}{where}. Fix: see `{help_of} --help`.", EXIT_BAD_INPUT,
                     as_json, "UsageError")
    except KeyboardInterrupt:
        code = _fail("Interrupted; run `ltx-pipeline resume` to continue.", 130, as_json, "Interrupted")
    except Exception as exc:  # the last resort: one line naming the traceback file
        full = _disk_full(exc, args)
        if full is not None:  # no traceback to write (there is no room): the line says all
            return _exit(_fail(full.line(), full.exit_code, as_json, "DiskFull"), argv)
        log = _write_crash_log(args)
        where = f"Traceback written to {log}" if log else "Its traceback could not be written to the workspace"
        code = _fail(f"Unexpected error {type(exc).__name__}: {exc}. {where}.", EXIT_FAILED, as_json,
                     "InternalError")
    return _exit(code, argv)


def _disk_full(exc: BaseException, args: list[str]) -> LtxPipelineError | None:
    from ltx_pipeline.cli.disk_full import disk_full
    from ltx_pipeline.store.location import redact, store_target
    from ltx_pipeline.workspace import DB_FILENAME

    workspace = _workspace_arg(args)
    store = store_target(workspace / DB_FILENAME)
    return disk_full(exc, workspace, store if isinstance(store, Path) else redact(store))


def _exit(code: int, argv: list[str] | None) -> int:
    if argv is None:
        sys.exit(code)
    return code


def _fail(line: str, code: int, as_json: bool, kind: str) -> int:
    # Each line's whitespace is folded; a message of several problems keeps one line per problem.
    line = "\n".join(" ".join(part.split()) for part in line.splitlines() if part.strip())
    text = json.dumps({"error": kind, "message": line, "exit_code": code}) if as_json else f"error: {line}"
    print(text, file=sys.stderr)
    return code


def _workspace_arg(args: list[str]) -> Path:
    """The workspace named on the command line (or the default one), resolved."""
    workspace = default_workspace()
    for flag in ("--workspace", "-w"):
        if flag in args and args.index(flag) + 1 < len(args):
            workspace = Path(args[args.index(flag) + 1])
    return workspace.expanduser().resolve()


def _write_crash_log(args: list[str]) -> Path | None:
    """Write the traceback inside the workspace named on the command line (or the default one)."""
    path = _workspace_arg(args) / "logs" / f"crash-{time.strftime('%Y%m%d-%H%M%S')}.log"
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(traceback.format_exc(), encoding="utf-8")
    except OSError:
        return None
    return path
