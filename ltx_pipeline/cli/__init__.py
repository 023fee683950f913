"""The console script: the one place errors and outcomes become exit codes.

Exit codes: 0 finished what was asked; 1 a phase failed or the minimum-VRAM gate stopped the run;
2 bad input or usage; 3 stopped at the approval gate; 4 refused (another driver holds the run,
or approve/resume refused). Errors print one line to stderr (a JSON object under ``--json``),
never a traceback; an unexpected exception writes its traceback to a file in the workspace and
names that file.
"""

from __future__ import annotations

import json
import sys
import time
import traceback
from pathlib import Path

import typer

from ltx_pipeline.errors import EXIT_BAD_INPUT, EXIT_FAILED, LtxPipelineError
from ltx_pipeline.workspace import default_workspace

__all__ = ["main"]


def main(argv: list[str] | None = None) -> int:
    """Run the CLI and return (and, as a script, exit with) the documented exit code."""
    args = list(sys.argv[1:] if argv is None else argv)
    as_json = "--json" in args
    try:
        from ltx_pipeline.cli.app import app

        result = app(args=args, standalone_mode=False, prog_name="ltx-pipeline")
        code = result if isinstance(result, int) else 0
    except LtxPipelineError as exc:
        code = _fail(exc.line(), exc.exit_code, as_json, type(exc).__name__)
    except typer.Abort:
        code = _fail("Interrupted.", 130, as_json, "Interrupted")
    except typer.TyperException as exc:  # typer's (vendored click) usage and parameter errors
        ctx = getattr(exc, "ctx", None)
        if type(exc).__name__ == "NoArgsIsHelpError" and ctx is not None:
            print(ctx.get_help(), file=sys.stderr)
            return _exit(EXIT_BAD_INPUT, argv)
        where = f" ({ctx.command_path})" if ctx is not None else ""
        code = _fail(f"{exc.format_message()}{where}. Fix: see `ltx-pipeline --help`.", EXIT_BAD_INPUT, as_json,
                     "UsageError")
    except KeyboardInterrupt:
        code = _fail("Interrupted; run `ltx-pipeline resume` to continue.", 130, as_json, "Interrupted")
    except Exception as exc:  # the last resort: one line naming the traceback file
        log = _write_crash_log(args)
        code = _fail(f"Unexpected error {type(exc).__name__}: {exc}. Traceback written to {log}.", EXIT_FAILED,
                     as_json, "InternalError")
    return _exit(code, argv)


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


def _write_crash_log(args: list[str]) -> Path:
    """Write the traceback inside the workspace named on the command line (or the default one)."""
    workspace = default_workspace()
    for flag in ("--workspace", "-w"):
        if flag in args and args.index(flag) + 1 < len(args):
            workspace = Path(args[args.index(flag) + 1])
    path = workspace.expanduser().resolve() / "logs" / f"crash-{time.strftime('%Y%m%d-%H%M%S')}.log"
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(traceback.format_exc(), encoding="utf-8")
    except OSError:
        return Path("(could not be written)")
    return path
