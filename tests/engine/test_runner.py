"""The drive loop on a real SQLite store, with tiny phases handed in through the registry seam."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import pytest

from ltx_pipeline.engine import Outcome, PhaseResult, RunContext, Runner, approve_plan
from ltx_pipeline.engine.fingerprint import digest
from ltx_pipeline.engine.lock import DriverLock
from ltx_pipeline.engine.outputs import PhaseOutputs
from ltx_pipeline.errors import ApprovalRefused, BadInput, PhaseFailed, RunLocked
from ltx_pipeline.status.report import status_report
from ltx_pipeline.store import Store
from ltx_pipeline.workspace import Workspace


@dataclass
class Request:
    steps: int = 2000
    blocked: bool = False


class Recorded(PhaseOutputs):
    """What a recording phase outputs (its name is stored per row; one model serves every fake phase)."""

    PHASE: ClassVar[str] = "recorded"
    steps: int
    seen: list[str]


@dataclass
class RecordingPhase:
    """A phase that records each call and outputs a function of the request."""

    name: str
    outputs_type: ClassVar[type[Recorded]] = Recorded
    heavy: bool = False
    approval: bool = False
    fail_with: BaseException | None = None
    calls: list[str] = field(default_factory=list)

    def fingerprint(self, ctx: RunContext) -> dict[str, Any]:
        upstream = {k: ctx.output_digest(k) for k in ctx.upstream}
        return {"run request": {"steps": ctx.request.steps}, "upstream": upstream}

    def run(self, ctx: RunContext) -> PhaseResult:
        self.calls.append(ctx.run_name)
        if self.fail_with is not None:
            raise self.fail_with
        ctx.narrate(f"{self.name} working")
        outputs = Recorded(steps=ctx.request.steps, seen=sorted(ctx.upstream))
        if self.approval:
            return PhaseResult(outputs, approval_subject=digest(outputs.to_stored()),
                               approval_blockers=["model files missing"] if ctx.request.blocked else [])
        return PhaseResult(outputs)

    def summary(self, outputs: Recorded) -> str:
        return f"{self.name} done with steps={outputs.steps}"


@pytest.fixture
def setup(workspace: Path):
    ws = Workspace.at(workspace)
    ws.create()
    store = Store.open(ws.db_file)
    run = store.create_run("r1", {"steps": 2000})
    yield ws, store, run
    store.close()


def phases() -> list[RecordingPhase]:
    return [RecordingPhase("probe"), RecordingPhase("plan", approval=True), RecordingPhase("train", heavy=True)]


def test_stops_at_the_gate_until_the_exact_plan_is_approved(setup) -> None:
    ws, store, run = setup
    registry = phases()
    runner = Runner(store, ws, registry)
    report = runner.drive(run, Request())
    assert report.outcome is Outcome.AWAITING_APPROVAL
    assert report.ran == ["probe", "plan"] and registry[2].calls == []
    assert store.get_run("r1").state == "awaiting_approval"

    approve_plan(store, run, "test")
    report = runner.drive(run, Request())
    assert report.outcome is Outcome.FINISHED
    assert report.skipped == ["probe", "plan"] and report.ran == ["train"]
    assert store.get_run("r1").state == "finished"


def test_changed_request_reruns_downstream_says_why_and_voids_approval(setup) -> None:
    ws, store, run = setup
    registry = phases()
    runner = Runner(store, ws, registry)
    runner.drive(run, Request())
    approve_plan(store, run, "test")
    runner.drive(run, Request())

    report = runner.drive(run, Request(steps=3000))
    assert report.outcome is Outcome.AWAITING_APPROVAL  # the new plan has a new hash
    assert report.ran == ["probe", "plan"]
    rows = store.latest_phase_runs(run.id)
    assert rows["probe"].reason == "run request.steps: 2000 -> 3000"
    assert "run request.steps: 2000 -> 3000" in rows["plan"].reason
    assert rows["train"].attempt == 1  # not re-run before approval
    entry = status_report(store, ws)["runs"][0]
    assert entry["approval"]["state"] == "awaiting approval"
    assert "approve" in entry["next_command"]


def test_unchanged_inputs_skip_every_phase(setup) -> None:
    ws, store, run = setup
    registry = phases()
    runner = Runner(store, ws, registry)
    runner.drive(run, Request())
    approve_plan(store, run, "test")
    runner.drive(run, Request())
    report = runner.drive(run, Request())
    assert report.ran == [] and report.skipped == ["probe", "plan", "train"]
    assert [len(p.calls) for p in registry] == [1, 1, 1]


def test_bad_input_is_recorded_and_reraised_then_retried(setup) -> None:
    ws, store, run = setup
    registry = phases()
    registry[0].fail_with = BadInput("dataset is malformed", where="data.json", fix="fix it")
    runner = Runner(store, ws, registry)
    with pytest.raises(BadInput):
        runner.drive(run, Request())
    row = store.latest_phase_runs(run.id)["probe"]
    assert row.status == "failed" and "dataset is malformed" in row.error
    assert store.get_run("r1").state == "failed"

    registry[0].fail_with = None
    report = runner.drive(run, Request())
    # The reason names what ended the last attempt (its error's "what" and "where"), not only that it failed.
    reason = store.latest_phase_runs(run.id)["probe"].reason
    assert reason == "previous attempt 1 failed: dataset is malformed (data.json)"
    assert report.outcome is Outcome.AWAITING_APPROVAL


def test_unexpected_exception_becomes_phase_failed_with_traceback_log(setup) -> None:
    ws, store, run = setup
    registry = phases()
    registry[1].fail_with = ZeroDivisionError("boom")
    with pytest.raises(PhaseFailed) as info:
        Runner(store, ws, registry).drive(run, Request())
    assert info.value.phase == "plan"
    log = ws.run("r1").engine_log
    assert "ZeroDivisionError: boom" in log.read_text()
    assert str(log) in info.value.line()


def test_running_rows_left_by_a_dead_driver_are_marked_interrupted_and_rerun(setup) -> None:
    ws, store, run = setup
    store.begin_phase(run.id, "probe", reason="first run", fingerprint="x", parts={}, run_state="probe")
    assert status_report(store, ws)["runs"][0]["state"] == "interrupted"  # never shown as running
    report = Runner(store, ws, phases()).drive(run, Request())
    attempts = [(r.phase, r.attempt, r.status) for r in store.phase_attempts(run.id)]
    assert ("probe", 1, "interrupted") in attempts and ("probe", 2, "succeeded") in attempts
    assert report.outcome is Outcome.AWAITING_APPROVAL


def test_a_second_driver_is_refused_naming_the_holder(setup) -> None:
    ws, store, run = setup
    with DriverLock(ws.run("r1").lock_file, "r1"):
        with pytest.raises(RunLocked) as info:
            Runner(store, ws, phases()).drive(run, Request())
    assert "pid" in info.value.line()


def test_approve_refuses_without_plan_and_with_blockers(setup) -> None:
    ws, store, run = setup
    with pytest.raises(ApprovalRefused, match="no plan"):
        approve_plan(store, run, "test")
    Runner(store, ws, phases()).drive(run, Request(blocked=True))
    with pytest.raises(ApprovalRefused, match="model files missing"):
        approve_plan(store, run, "test")


def test_heavy_phase_without_an_approval_point_is_refused(setup) -> None:
    ws, store, run = setup
    with pytest.raises(PhaseFailed, match="approval point"):
        Runner(store, ws, [RecordingPhase("train", heavy=True)]).drive(run, Request())


def test_events_record_narration_in_order(setup) -> None:
    ws, store, run = setup
    seen: list[tuple[str, str]] = []
    Runner(store, ws, phases(), on_event=lambda m, lvl, p: seen.append((lvl, m))).drive(run, Request())
    messages = [e.message for e in store.events(run.id)]
    assert "probe working" in messages and "plan working" in messages
    assert messages.index("probe working") < messages.index("plan working")
    assert ("result", "probe done with steps=2000") in seen


class Other(PhaseOutputs):
    PHASE: ClassVar[str] = "other"


def test_a_phase_returning_another_outputs_type_than_it_declares_fails(setup) -> None:
    ws, store, run = setup

    class Liar(RecordingPhase):
        def run(self, ctx: RunContext) -> PhaseResult:  # type: ignore[override]
            return PhaseResult(Other())

    with pytest.raises(PhaseFailed, match="returned Other, not its declared Recorded"):
        Runner(store, ws, [Liar("probe")]).drive(run, Request())
    assert store.latest_phase_runs(run.id)["probe"].status == "failed"


@dataclass
class EnvironmentPhase(RecordingPhase):
    """A probe whose fingerprint reads a setting its outputs do not depend on."""

    setting: str = "a"

    def fingerprint(self, ctx: RunContext) -> dict[str, Any]:
        return {**super().fingerprint(ctx), "setting": self.setting}


def test_a_phase_that_runs_again_to_the_same_result_leaves_the_later_phases_standing(setup) -> None:
    """Only new outputs make the phases after a phase run again (#49): on main, "upstream probe re-ran" re-ran the
    plan (voiding its approval) and everything after it, though the probe came to the same result."""
    ws, store, run = setup
    registry = [EnvironmentPhase("probe"), RecordingPhase("plan", approval=True), RecordingPhase("train", heavy=True)]
    runner = Runner(store, ws, registry)
    runner.drive(run, Request())
    approve_plan(store, run, "test")
    runner.drive(run, Request())
    registry[0].setting = "b"
    report = runner.drive(run, Request())
    assert report.outcome is Outcome.FINISHED
    assert report.ran == ["probe"] and report.skipped == ["plan", "train"]
    assert store.latest_phase_runs(run.id)["probe"].reason == "setting: a -> b"
    assert [len(p.calls) for p in registry] == [2, 1, 1]
