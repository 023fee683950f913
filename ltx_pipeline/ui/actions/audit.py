"""The audit line of each studio action: who asked, what, when, the command, and how it ended.

Written once the request has passed the token, Origin and CSRF checks (a request refused there changes
nothing, not even the audit), whether the action was then accepted or refused. ``who`` is the server's
name for its token (``--token-name``, else "token"), or "loopback"; the token itself is never written.
"""

from __future__ import annotations

from ltx_pipeline.store import Store
from ltx_pipeline.ui.actions.studio import Attempt, Studio

__all__ = ["record", "who_for"]


def who_for(token: str | None, token_name: str | None) -> str:
    """The audit's "who" for a server with ``token`` (None: loopback only) and an optional name for it."""
    if token_name:
        return token_name
    return "loopback" if token is None else "token"


def record(studio: Studio, attempt: Attempt, outcome: str) -> None:
    """Append ``attempt``'s audit row (``outcome``: "ok" or the one-line error)."""
    store = Store.open(studio.workspace.store)
    try:
        store.record_audit(run=attempt.run, who=studio.who, action=attempt.action, command=attempt.command,
                           outcome=outcome)
    finally:
        store.close()
