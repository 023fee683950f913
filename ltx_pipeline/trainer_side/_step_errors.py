"""How a failure becomes the script's one stderr line: ``BuildError`` and the ``step`` that names it.

A bare library error rarely says which part it came from, so each step of the build is wrapped in ``step``,
which rephrases any exception as ``<what was being done>: <type>: <message>`` on one line.

Part of ``build_tiny_model.py``, a standalone script run with the *trainer's* interpreter: like it, this module
imports nothing from ltx_pipeline, only the standard library here and the trainer's own packages (torch,
ltx-core, transformers) lazily inside functions. The script's folder is ``sys.path[0]``, so it imports this
module as a sibling; the folder is deliberately not a package.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator


class BuildError(RuntimeError):
    """A failure already phrased for the one stderr line: which step failed, and why."""


@contextlib.contextmanager
def step(what: str) -> Iterator[None]:
    """Name the step in the failure message: a bare library error rarely says which part it came from."""
    try:
        yield
    except BuildError:
        raise
    except Exception as error:
        raise BuildError(f"{what}: {type(error).__name__}: {' '.join(str(error).split())}") from error

