"""``compare``'s fast parts: the holdout file read as written, config fields found by dotted path, bad input refused.

The holdout file's format is the evaluate phase's (issue #45): a list of checkpoint entries with ``holdout`` and
``train`` parts. The lowest holdout figure is the smallest ``holdout.total`` there, with its step and parts as written.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ltx_pipeline.cli import main
from ltx_pipeline.compare.config import config_value
from ltx_pipeline.compare.holdout import holdout_curve, lowest_holdout

ENTRIES = [
    {"step": 0, "checkpoint": None, "holdout": {"video": 0.61, "audio": 0.9, "total": 1.51},
     "train": {"video": 0.6, "audio": 0.88, "total": 1.48}},
    {"step": 20, "checkpoint": "/ws/r1/outputs/checkpoints/w20.safetensors",
     "holdout": {"video": 0.52, "audio": 0.8, "total": 1.32}, "train": {"video": 0.4, "audio": 0.7, "total": 1.1}},
    {"step": 10, "checkpoint": "/ws/r1/outputs/checkpoints/w10.safetensors",
     "holdout": {"video": 0.55, "audio": None, "total": 1.40}, "train": {"total": 1.3}},
]


def test_the_lowest_holdout_total_is_read_with_its_step_and_parts(tmp_path: Path) -> None:
    (tmp_path / "holdout-loss.json").write_text(json.dumps(ENTRIES))
    figure = lowest_holdout(tmp_path)
    assert (figure.value, figure.step, figure.why) == (1.32, 20, None)
    assert figure.detail == {"video": 0.52, "audio": 0.8, "checkpoint": "/ws/r1/outputs/checkpoints/w20.safetensors"}
    curve, why = holdout_curve(tmp_path)
    assert why is None
    assert [(p.step, p.holdout, p.train) for p in curve] == [(0, 1.51, 1.48), (10, 1.40, 1.3), (20, 1.32, 1.1)]


@pytest.mark.parametrize(("text", "why"), [
    (None, "no holdout-loss.json: the holdout loss was not measured for this run"),
    ("{not json", "cannot be read"),
    ('{"step": 0}', "is not a list of checkpoint rows"),
    ('[{"step": 3, "holdout": {"video": 1.0}}]', "holds a row that is not a checkpoint's figures"),
])
def test_a_run_without_a_usable_holdout_file_has_no_figure_and_says_why(tmp_path: Path, text: str | None,
                                                                          why: str) -> None:
    if text is not None:
        (tmp_path / "holdout-loss.json").write_text(text)
    figure = lowest_holdout(tmp_path)
    assert figure.value is None and figure.why is not None and why in figure.why, figure


def test_config_fields_are_found_by_their_dotted_path_list_items_by_index() -> None:
    config = {"optimization": {"learning_rate": 1e-4}, "validation": {"samples": [{"prompt": "a"}, {"prompt": "b"}]}}
    assert config_value(config, "optimization.learning_rate") == (True, 1e-4)
    assert config_value(config, "validation.samples.1.prompt") == (True, "b")
    assert config_value(config, "validation.samples.2.prompt") == (False, None)
    assert config_value(config, "optimization.steps") == (False, None)


@pytest.mark.parametrize(("runs", "line"), [
    (["r1"], "error: compare needs two runs or more; got 1 (r1) (compare RUN RUN). Fix: name two or more runs; "
             "`ltx-pipeline status` lists them."),
    (["r1", "r1"], "error: run 'r1' is named twice (compare RUN RUN). Fix: name each run once."),
    (["r1", "r2"], "error: No run named 'r1' in {ws} (compare RUN). Fix: `ltx-pipeline status --workspace {ws}` "
                   "lists its runs."),
])
def test_bad_input_is_one_line_and_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str], runs: list[str],
                                           line: str) -> None:
    workspace = tmp_path / "ws"
    assert main(["compare", *runs, "--workspace", str(workspace)]) == 2
    err = capsys.readouterr().err
    assert err == line.format(ws=workspace.resolve()) + "\n"
