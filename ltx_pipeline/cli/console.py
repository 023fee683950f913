"""The CLI's two consoles: results to stdout, narration of problems to stderr.

Soft wrap keeps long lines whole when piped; highlighting is off so paths and numbers print as given.
"""

from __future__ import annotations

from rich.console import Console

__all__ = ["err", "out"]

out = Console(highlight=False, soft_wrap=True)
err = Console(stderr=True, highlight=False, soft_wrap=True)
