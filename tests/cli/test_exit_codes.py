"""The exit-code table: each error class, raised inside a command, is its code and exactly one line on stderr.

Every class in ``ltx_pipeline.errors`` is listed, so a new one cannot go without its row (the README's
table shows the same codes). ``DiskFull`` (exit 5) is #43 point 8's.
"""

from __future__ import annotations

import inspect

import pytest

from ltx_pipeline import errors
from ltx_pipeline.cli import main

TABLE: dict[type[errors.LtxPipelineError], int] = {
    errors.BadInput: 2, errors.BadRequest: 2, errors.BadDataset: 2, errors.BadConfig: 2, errors.UnsafePath: 2,
    errors.BadInputs: 2,
    errors.Refused: 4, errors.RunLocked: 4, errors.ApprovalRefused: 4, errors.ResumeRefused: 4,
    errors.GateStopped: 1, errors.RunFailed: 1, errors.PhaseFailed: 1, errors.LtxPipelineError: 1,
    errors.DiskFull: 5,
}


def _instance(kind: type[errors.LtxPipelineError]) -> errors.LtxPipelineError:
    if kind is errors.PhaseFailed:
        return errors.PhaseFailed("plan", 2, "ValueError: x", "/ws/r1/logs/engine.log")
    if kind is errors.BadInputs:
        return errors.BadInputs([errors.BadRequest("a is wrong", "--a", "fix a"), errors.BadRequest("b", "--b")])
    return kind("Something is wrong.", where="--option", fix="do this.")


def test_every_error_class_has_a_row() -> None:
    classes = {value for value in vars(errors).values()
               if inspect.isclass(value) and issubclass(value, errors.LtxPipelineError)}
    assert classes == set(TABLE)


@pytest.mark.parametrize("kind", list(TABLE), ids=lambda kind: kind.__name__)
def test_each_class_is_its_exit_code_and_one_line(kind: type[errors.LtxPipelineError],
                                                  monkeypatch: pytest.MonkeyPatch,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    error = _instance(kind)

    def raising(*args: object, **kwargs: object) -> None:
        raise error

    monkeypatch.setattr("ltx_pipeline.status.report.status_report", raising)
    assert main(["status"]) == TABLE[kind] == error.exit_code
    captured = capsys.readouterr()
    expected = {
        errors.PhaseFailed: "error: Phase plan failed on attempt 2: ValueError: x (/ws/r1/logs/engine.log). Fix: read "
                            "the traceback in that log, correct the cause, then run `ltx-pipeline resume`.\n",
        errors.BadInputs: "error: 2 problems in the request:\n- a is wrong (--a). Fix: fix a.\n- b (--b).\n",
    }.get(kind, "error: Something is wrong (--option). Fix: do this.\n")
    assert (captured.out, captured.err) == ("", expected)
