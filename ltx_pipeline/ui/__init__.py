"""The local dashboard (``ltx-pipeline ui``): a read-only web view of a workspace, beside the CLI.

``app.create_app`` builds the Starlette app; ``serve`` binds and runs it; ``views`` builds each page's
data from the same report as ``status --json`` plus the run's stored outputs and files. The web stack
is imported only by the ``ui`` command, never on the CLI's start-up path. Nothing here writes the store
or starts or stops anything.
"""

__all__: list[str] = []
