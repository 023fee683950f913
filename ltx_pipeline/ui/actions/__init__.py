"""The studio: the dashboard's write actions, each the CLI's own command or the code it calls.

One module per concern: ``create`` (a new run, ``ltx-pipeline run``), ``gates`` (approve, ``approve`` +
``resume --detach``), ``captions`` (edit a caption at the captions gate), ``control`` (resume, stop,
continue, remove), ``roots`` (the ``--data-root`` folders and the folder picker), ``detached`` (starting a
CLI command that outlives the server), ``audit`` (the store's line per action) and ``web`` (the routes: the
Origin and CSRF checks, JSON in and out). The web layer adds checks and the audit; no decision about a
run's state is taken here that ``ltx_pipeline.driving`` or the CLI would not take.
"""

from ltx_pipeline.ui.actions.audit import who_for
from ltx_pipeline.ui.actions.studio import Studio
from ltx_pipeline.ui.actions.web import read_routes, write_routes

__all__ = ["Studio", "read_routes", "who_for", "write_routes"]
