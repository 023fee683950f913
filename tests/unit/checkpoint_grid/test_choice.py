"""``--eval-checkpoints``: which checkpoints the evaluation renders, from the kept ones and the holdout figures."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ltx_pipeline.errors import BadRequest
from ltx_pipeline.evaluation.checkpoints_choice import choose_checkpoints, read_holdout_totals
from ltx_pipeline.request import check_request

KEPT = [(step, Path(f"/ck/lora_weights_step_{step:05d}.safetensors")) for step in (50, 100, 150, 200, 250)]
FIGURES = {0: 1.30, 50: 1.10, 100: 0.90, 150: 0.95, 200: 1.00, 250: 1.05}


def _steps(choice: str | None, holdout: dict[int, float] | None = FIGURES) -> list[int]:
    return [c.step for c in choose_checkpoints(choice, KEPT, holdout).checkpoints]


def test_the_default_is_the_last_and_the_lowest_holdout_checkpoint() -> None:
    chosen = choose_checkpoints(None, list(reversed(KEPT)), FIGURES)
    assert [(c.step, c.holdout, c.why) for c in chosen.checkpoints] == [(100, 0.90, "lowest holdout"),
                                                                         (250, 1.05, "last")]
    assert chosen.note is None
    assert _steps(None, {**FIGURES, 250: 0.5}) == [250]  # the last is the lowest: one row, not two
    assert _steps(None, None) == [250]  # nothing measured: the last alone


def test_last_best_all_and_a_number_evenly_spaced_with_the_last() -> None:
    assert _steps("last") == [250]
    assert _steps("best") == [100]
    assert _steps("all") == [50, 100, 150, 200, 250]
    assert _steps("3") == [50, 150, 250]
    assert _steps("1") == [250]
    assert _steps("9") == [50, 100, 150, 200, 250]
    tie = choose_checkpoints("best", KEPT, {50: 0.7, 200: 0.7})
    assert [c.step for c in tie.checkpoints] == [50]  # the lowest step among equal figures, as the summary says


def test_best_falls_back_to_the_last_and_says_why() -> None:
    absent = choose_checkpoints("best", KEPT, None)
    assert [c.step for c in absent.checkpoints] == [250]
    assert absent.note == ("--eval-checkpoints best: no holdout loss was measured (no outputs/holdout-loss.json), "
                           "so the last checkpoint is rendered")
    pruned = choose_checkpoints("best", KEPT, {0: 1.0, 20: 0.5})  # figures only for steps no longer kept
    assert [c.step for c in pruned.checkpoints] == [250] and "no kept checkpoint" in (pruned.note or "")


def test_a_lower_figure_outside_the_kept_checkpoints_is_said_not_hidden() -> None:
    chosen = choose_checkpoints("best", KEPT, {**FIGURES, 0: 0.2})
    assert [c.step for c in chosen.checkpoints] == [100]
    assert chosen.note == ("the lowest holdout total measured is at step 0 (0.2), which is not a kept checkpoint; "
                           "among the kept ones it is step 100 (0.9)")


def test_holdout_totals_are_read_from_the_figures_file(tmp_path: Path) -> None:
    path = tmp_path / "holdout-loss.json"
    assert read_holdout_totals(path) is None
    path.write_text(json.dumps([
        {"step": 0, "checkpoint": None, "holdout": {"video": 1.0, "audio": None, "total": 1.0}, "train": {}},
        {"step": 50, "checkpoint": "/ck/a", "holdout": {"video": 0.5, "audio": 0.25, "total": 0.75}, "train": {}},
        {"step": 100, "checkpoint": "/ck/b", "holdout": {"video": None, "audio": None, "total": None}}]))
    assert read_holdout_totals(path) == {0: 1.0, 50: 0.75}
    path.write_text("not json")
    assert read_holdout_totals(path) is None


@pytest.mark.parametrize("value", ["last", "best", "all", "4", "BEST"])
def test_the_request_takes_the_choices(value: str) -> None:
    request = check_request("r1", {"dataset": "/d", "eval_checkpoints": value})
    assert request.eval_checkpoints == value.lower()


@pytest.mark.parametrize("value", ["0", "some", "-2", "1.5"])
def test_the_request_refuses_anything_else_naming_the_choices(value: str) -> None:
    with pytest.raises(BadRequest, match="last, best, all or a number of checkpoints"):
        check_request("r1", {"dataset": "/d", "eval_checkpoints": value})
