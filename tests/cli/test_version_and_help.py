"""The CLI's manners (#43, point 9): ``--version``, and ``-h`` as well as ``--help`` on every command."""

from __future__ import annotations

import importlib.metadata

import pytest

from ltx_pipeline.cli import main


def test_version_prints_the_installed_version(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--version"]) == 0
    assert capsys.readouterr().out.strip() == f"ltx-pipeline {importlib.metadata.version('ltx-pipeline')}"


@pytest.mark.parametrize("command", [[], ["run"], ["status"], ["smoke"], ["bench", "autotune"]])
def test_h_is_help_on_every_command(command: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert main([*command, "-h"]) == 0
    short = capsys.readouterr().out
    assert main([*command, "--help"]) == 0
    assert short == capsys.readouterr().out and short.startswith("Usage: ltx-pipeline")
