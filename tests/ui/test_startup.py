"""``ltx-pipeline ui --help`` starts as light as every other command: the web stack is the command's alone.

``status`` and ``--help`` are checked by tests/cli/test_startup_imports.py, whose list of heavy modules holds
the dashboard's (starlette, uvicorn, jinja2, ltx_pipeline.ui); this checks the ui command's own help.
"""

from __future__ import annotations

from tests.cli.test_startup_imports import heavy_ones, imported


def test_ui_help_imports_none_of_the_heavy_rooms_nor_the_web_stack() -> None:
    chains = imported(["ui", "--help"])
    assert "ltx_pipeline.cli.ui" in chains  # the command was really reached
    assert heavy_ones(chains) == []
