"""The run lifecycle allows what the runner does, in order, and raises on anything else."""

from __future__ import annotations

import pytest
from transitions import MachineError

from ltx_pipeline.engine.machine import TERMINAL_STATES, RunLifecycle

PHASES = ("probe", "plan", "train")
STORED = ("new", *PHASES, *TERMINAL_STATES)


def walk(lifecycle: RunLifecycle, *names: str, run: tuple[str, ...] = ()) -> None:
    """Reach each phase in turn; run those in ``run`` (skip the others as unchanged)."""
    for name in names:
        lifecycle.reach(name)
        if name in run:
            lifecycle.enter_phase(name, after_approval_point=False)


def test_a_first_drive_runs_every_phase_in_order_and_finishes() -> None:
    lifecycle = RunLifecycle(PHASES, "new")
    seen = []
    for name in PHASES:
        lifecycle.reach(name)
        lifecycle.enter_phase(name, after_approval_point=False)
        seen.append(lifecycle.state)
    lifecycle.finish_drive()
    assert seen == list(PHASES) and lifecycle.state == "finished"


@pytest.mark.parametrize("stored", [*STORED, "a_phase_removed_since"])
def test_every_stored_state_starts_a_drive_at_the_top(stored: str) -> None:
    """A resume after an interruption, a detach, a failure, a gate stop, an approval or a finish: from the top."""
    lifecycle = RunLifecycle(PHASES, stored)
    walk(lifecycle, "probe", "plan", "train", run=("train",))  # probe and plan unchanged, skipped
    lifecycle.finish_drive()
    assert lifecycle.state == "finished"


def test_a_changed_request_reruns_from_an_earlier_phase_after_a_finish() -> None:
    lifecycle = RunLifecycle(PHASES, "finished")
    walk(lifecycle, "probe", "plan", run=("plan",))
    lifecycle.wait_for_approval()  # the new plan has a new subject
    assert lifecycle.state == "awaiting_approval"


def test_a_detached_phase_ends_the_drive_in_its_own_state_and_the_next_drive_reenters_it() -> None:
    lifecycle = RunLifecycle(PHASES, "new")
    walk(lifecycle, "probe", "plan", "train", run=PHASES)
    assert lifecycle.state == "train"  # PhaseResult.pending: the runner stops here and stores "train"
    again = RunLifecycle(PHASES, lifecycle.state)
    walk(again, "probe", "plan", "train", run=("train",))
    again.finish_drive()
    assert again.state == "finished"


@pytest.mark.parametrize("stored", STORED)
def test_a_drive_cannot_begin_past_the_first_phase(stored: str) -> None:
    lifecycle = RunLifecycle(PHASES, stored)
    with pytest.raises(MachineError):
        lifecycle.reach("plan")
    assert lifecycle.state == ("new" if stored not in STORED else stored)


@pytest.mark.parametrize(("reached", "target"), [(("probe",), "train"), (("probe", "plan"), "probe"),
                                                  (("probe", "plan"), "plan"), (("probe",), "unknown")])
def test_no_phase_is_jumped_over_or_passed_twice(reached: tuple[str, ...], target: str) -> None:
    lifecycle = RunLifecycle(PHASES, "new")
    walk(lifecycle, *reached)
    with pytest.raises(MachineError):
        lifecycle.reach(target)
    assert lifecycle.state == reached[-1]


def test_only_the_phase_reached_can_run_and_past_an_approval_point_only_when_approved() -> None:
    lifecycle = RunLifecycle(PHASES, "new")
    lifecycle.reach("probe")
    with pytest.raises(MachineError):
        lifecycle.enter_phase("plan", after_approval_point=False)
    walk(lifecycle, "plan", "train")
    with pytest.raises(MachineError, match="needs an approved plan"):
        lifecycle.enter_phase("train", after_approval_point=True)
    lifecycle.approval_ok = True
    lifecycle.enter_phase("train", after_approval_point=True)
    assert lifecycle.state == "train"


def test_a_phase_fails_or_stops_at_a_gate_only_while_it_runs() -> None:
    lifecycle = RunLifecycle(PHASES, "new")
    lifecycle.reach("probe")  # skipped as unchanged: nothing runs that could fail
    with pytest.raises(MachineError):
        lifecycle.fail_phase()
    with pytest.raises(MachineError):
        lifecycle.stop_phase_at_gate()
    lifecycle.enter_phase("probe", after_approval_point=False)
    lifecycle.stop_phase_at_gate()
    assert lifecycle.state == "gate_stopped"
    failing = RunLifecycle(PHASES, "gate_stopped")
    walk(failing, "probe", run=("probe",))
    failing.fail_phase()
    assert failing.state == "failed"


def test_only_the_last_phase_finishes_a_drive() -> None:
    lifecycle = RunLifecycle(PHASES, "new")
    walk(lifecycle, "probe", "plan", run=("probe", "plan"))
    with pytest.raises(MachineError):
        lifecycle.finish_drive()
    assert lifecycle.state == "plan"


@pytest.mark.parametrize("stored", STORED)
def test_outside_a_drive_nothing_ends_waits_or_fails(stored: str) -> None:
    """A stored state (a new run, one interrupted or detached in a phase, one that ended) moves only by a drive."""
    lifecycle = RunLifecycle(PHASES, stored)
    moves = (lifecycle.finish_drive, lifecycle.wait_for_approval, lifecycle.fail_phase, lifecycle.stop_phase_at_gate)
    for move in moves:
        with pytest.raises(MachineError):
            move()
    assert lifecycle.state == stored


def test_an_ended_drive_moves_no_further() -> None:
    lifecycle = RunLifecycle(PHASES, "new")
    walk(lifecycle, "probe", "plan", run=("probe", "plan"))
    lifecycle.wait_for_approval()
    with pytest.raises(MachineError):
        lifecycle.reach("train")
    with pytest.raises(MachineError):
        lifecycle.reach("probe")  # a drive begins once; the next drive builds its own lifecycle
    with pytest.raises(MachineError):
        lifecycle.finish_drive()
    assert lifecycle.state == "awaiting_approval"


def test_a_registry_needs_a_phase() -> None:
    with pytest.raises(ValueError):
        RunLifecycle((), "new")
