"""The CLI's two consoles: results to stdout, narration of problems to stderr.

Soft wrap keeps long lines whole when piped; highlighting is off so paths and numbers print as given.
Output that is not a terminal (a pipe, a file, a CI log) gets a wide layout instead of Rich's 80-column
default, so status tables are not wrapped cell by cell; ``$COLUMNS`` still wins when set.
"""

from __future__ import annotations

import os
import sys
from typing import TextIO

from rich.console import Console

__all__ = ["PIPE_WIDTH", "err", "out"]

PIPE_WIDTH = 200


def _width(stream: TextIO) -> int | None:
    if os.environ.get("COLUMNS", "").isdigit():
        return int(os.environ["COLUMNS"])
    try:
        return None if stream.isatty() else PIPE_WIDTH
    except (AttributeError, ValueError):
        return PIPE_WIDTH


out = Console(highlight=False, soft_wrap=True, width=_width(sys.stdout))
err = Console(stderr=True, highlight=False, soft_wrap=True, width=_width(sys.stderr))
