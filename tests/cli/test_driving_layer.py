"""The run-driving layer (``ltx_pipeline.driving``) that ``cli`` and the dashboard call: typed results, no
printing, and the CLI mapping how each command ended to its exit code in one place (``cli.main``)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from ltx_pipeline.cli import Ending, ending_of, exit_code
from ltx_pipeline.driving import Approval, DriveHooks, approve, drive, find_workspace, prepare_run, stop_target
from ltx_pipeline.engine import Outcome
from tests.conftest import H100_SMI

CLI = Path(__file__).resolve().parents[2] / "ltx_pipeline" / "cli"


def _prepared(workspace, clips_dataset, fake_smi, ltx_prereqs):
    ws, store = find_workspace(workspace)
    options = {"dataset": str(clips_dataset), "nvidia_smi": fake_smi(H100_SMI), **ltx_prereqs}
    return ws, prepare_run(ws, store, "r1", options)


@pytest.mark.usefixtures("until_validate")
def test_a_run_is_driven_to_its_gate_approved_and_finished_through_typed_results_without_printing(
        workspace, clips_dataset, fake_smi, ltx_prereqs, capsys) -> None:
    ws, (store, run, request) = _prepared(workspace, clips_dataset, fake_smi, ltx_prereqs)
    events: list[tuple[str, str | None]] = []
    hooks = DriveHooks(on_event=lambda message, level, phase: events.append((level, phase)))

    driven = drive(ws, store, run, request, hooks=hooks)
    assert driven.outcome is Outcome.AWAITING_APPROVAL and driven.run == "r1"
    assert driven.gate is not None and driven.gate.phase == "plan" and driven.gate.name == "Plan"
    assert driven.gate.review == ws.run("r1").plan_file and driven.gate.blockers == ()
    assert ("info", "probe") in events

    approval = approve(ws, store, run, approved_by="a test")
    assert approval.new and approval.gate.subject == driven.gate.subject and approval.gate.phase == "plan"
    assert not approve(ws, store, run, approved_by="a test").new  # the same plan, approved already

    assert drive(ws, store, run, request, hooks=hooks).outcome is Outcome.FINISHED
    assert capsys.readouterr() == ("", "")  # the caller shows what happened, never the layer


@pytest.mark.usefixtures("until_validate")
def test_approve_as_passes_each_gate_once_and_says_so_through_its_hook(workspace, clips_dataset, fake_smi,
                                                                         ltx_prereqs) -> None:
    ws, (store, run, request) = _prepared(workspace, clips_dataset, fake_smi, ltx_prereqs)
    approved: list[Approval] = []
    driven = drive(ws, store, run, request, approve_as="run --approve", hooks=DriveHooks(on_approved=approved.append))
    assert driven.outcome is Outcome.FINISHED and driven.gate is None
    assert [(a.run, a.gate.name, a.new) for a in approved] == [("r1", "Plan", True)]
    assert store.approval_for(run.id, approved[0].gate.subject).approved_by == "run --approve"


def test_stop_finds_nothing_to_stop_in_a_run_that_runs_nothing(workspace, clips_dataset, fake_smi,
                                                                ltx_prereqs) -> None:
    _prepared(workspace, clips_dataset, fake_smi, ltx_prereqs)
    target = stop_target(workspace, None)  # the run updated last
    assert (target.run, target.kind, target.handle) == ("r1", "nothing", None)


def test_every_outcome_of_a_drive_has_its_exit_code() -> None:
    assert {o: exit_code(ending_of(o)) for o in Outcome} == {
        Outcome.FINISHED: 0, Outcome.DETACHED: 0, Outcome.AWAITING_APPROVAL: 3}
    assert [exit_code(e) for e in (Ending.DONE, Ending.FAILED, Ending.INVALID, Ending.AT_GATE, Ending.DECLINED)] \
        == [0, 1, 2, 3, 4]


def test_no_command_module_picks_an_exit_code() -> None:
    """Exit codes come from ``cli/__init__.py`` alone: a command returns an ``Ending`` or raises."""
    picked = sorted(f"{p.name}:{node.lineno}" for p in CLI.glob("*.py") if p.name != "__init__.py"
                    for node in ast.walk(ast.parse(p.read_text(encoding="utf-8")))
                    if isinstance(node, ast.Name | ast.alias) and getattr(node, "id", getattr(node, "name", ""))
                    .startswith("EXIT_"))
    assert picked == []
