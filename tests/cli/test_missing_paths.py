"""A path option naming nothing: one line whose fix says what that option names, exit 2, nothing written."""

from __future__ import annotations

from pathlib import Path

import pytest

from ltx_pipeline.cli import main


@pytest.mark.parametrize(("option", "names"), [
    ("--request", "a run-request YAML file (a run's run.yaml, or one of workspaces/examples/)"),
    ("--surface", "a cost surface YAML file (format in the README)"),
    ("--holdout-file", "your own holdout rows (a .json or .jsonl file)"),
])
def test_a_missing_path_is_one_line_whose_fix_names_what_the_option_takes(workspace, clips_dataset, tmp_path, capsys,
                                                                          option, names) -> None:
    missing = tmp_path / "nowhere" / "missing.yaml"
    code = main(["run", "--workspace", str(workspace), "--dataset", str(clips_dataset), option, str(missing)])
    err = capsys.readouterr().err
    assert code == 2
    assert err == f"error: {missing} does not exist ({option}). Fix: give the path of {names}.\n"
    assert not (Path(workspace) / "ltx-pipeline.db").exists()  # refused before anything was recorded
