"""The exception hierarchy and the exit-code table.

Every error a user can act on is an ``LtxPipelineError`` carrying its exit code and a three-part
message: what went wrong, where (a path, field or option), and how to fix it. Only ``cli.main``
turns these into a printed line and an exit status; nothing else catches them to print.
This module imports nothing from the project (only the standard library) so every layer may use it.
"""

from __future__ import annotations

from collections.abc import Sequence

__all__ = [
    "EXIT_APPROVAL_GATE",
    "EXIT_BAD_INPUT",
    "EXIT_FAILED",
    "EXIT_NO_SPACE",
    "EXIT_OK",
    "EXIT_REFUSED",
    "ApprovalRefused",
    "BadConfig",
    "BadDataset",
    "BadInput",
    "BadInputs",
    "BadRequest",
    "DiskFull",
    "GateStopped",
    "LtxPipelineError",
    "PhaseFailed",
    "Refused",
    "split_line",
    "ResumeRefused",
    "RunFailed",
    "RunLocked",
    "UnsafePath",
]

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_BAD_INPUT = 2
EXIT_APPROVAL_GATE = 3
EXIT_REFUSED = 4
EXIT_NO_SPACE = 5


class LtxPipelineError(Exception):
    """Base class: a failure with a user-facing one-line message and an exit code."""

    exit_code: int = EXIT_FAILED

    def __init__(self, what: str, where: str | None = None, fix: str | None = None) -> None:
        self.what = what
        self.where = where
        self.fix = fix
        super().__init__(self.line())

    def line(self) -> str:
        """The one line printed to the user: what, where, how to fix."""
        parts = [self.what.rstrip(".")]
        if self.where:
            parts.append(f"({self.where})")
        text = " ".join(parts) + "."
        if self.fix:
            text += f" Fix: {self.fix.rstrip('.')}."
        return " ".join(text.split())


def split_line(line: str) -> tuple[str, str | None]:
    """A stored error line (``LtxPipelineError.line``) split back into (what and where, fix), each without its
    closing full stop; fix None when the line proposes none."""
    what, marker, fix = line.partition(" Fix: ")
    return what.strip().rstrip("."), (fix.strip().rstrip(".") or None) if marker else None


class BadInput(LtxPipelineError):
    """Bad options, run.yaml, names, data or paths: the user can fix the input."""

    exit_code = EXIT_BAD_INPUT


class BadRequest(BadInput):
    """A run request (CLI options or run.yaml) is invalid."""


class BadDataset(BadInput):
    """The dataset path, metadata or precomputed data is unusable."""


class BadConfig(BadInput):
    """A trainer config is invalid; ``errors`` lists every (dotted path, message) found."""

    def __init__(self, what: str, where: str | None = None, fix: str | None = None,
                 errors: list[tuple[str, str]] | None = None) -> None:
        self.errors = list(errors or [])
        super().__init__(what, where, fix)


class UnsafePath(BadInput):
    """A path or name would escape the workspace or is not allowed."""


class BadInputs(BadInput):
    """Several problems of one input found together (as the trainer's config validation reports
    them): ``problems`` holds each; the message is one line per problem, so a user fixes all at once."""

    def __init__(self, problems: Sequence[LtxPipelineError], where: str | None = None) -> None:
        self.problems = list(problems)
        lines = "\n- ".join(problem.line() for problem in self.problems)
        super().__init__(f"{len(self.problems)} problems in the request:\n- {lines}", where, None)

    def line(self) -> str:
        """A header, then each problem (what, where, fix) on its own line, never folded into one."""
        return self.what


class Refused(LtxPipelineError):
    """The command cannot proceed now, and says why."""

    exit_code = EXIT_REFUSED


class RunLocked(Refused):
    """Another driver process holds the run."""


class ApprovalRefused(Refused):
    """``approve`` cannot approve the current plan."""


class ResumeRefused(Refused):
    """``resume`` cannot continue the run as asked."""


class DiskFull(LtxPipelineError):
    """A write found no space (a full disk or quota, the store's database included): nothing committed is lost,
    since a store transaction rolls back whole and ``atomic_write`` never leaves a half-written file."""

    exit_code = EXIT_NO_SPACE


class GateStopped(LtxPipelineError):
    """The run was stopped by a hardware gate (e.g. below the minimum VRAM)."""

    exit_code = EXIT_FAILED


class RunFailed(LtxPipelineError):
    """Work the run depends on failed (a trial, a training launch), with the proposed fix."""

    exit_code = EXIT_FAILED


class PhaseFailed(LtxPipelineError):
    """A phase raised an unexpected error; the cause is chained and its traceback logged."""

    exit_code = EXIT_FAILED

    def __init__(self, phase: str, attempt: int, cause: str, log_path: str | None = None) -> None:
        self.phase = phase
        self.attempt = attempt
        super().__init__(
            f"Phase {phase} failed on attempt {attempt}: {cause}",
            where=log_path,
            fix="read the traceback in that log, correct the cause, then run `ltx-pipeline resume`",
        )
