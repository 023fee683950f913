"""The run lifecycle as a ``transitions`` state machine that refuses what the runner never does.

States: ``new``, one state per phase, ``awaiting_approval``, ``gate_stopped``, ``failed`` and
``finished`` (the ``RunState`` values, ``store/states.py``); ``runs.state`` keeps one of them (the
same values as ever: the phase last entered, or how the last drive ended). The machine is rebuilt
from ``runs.state`` for each drive, and the runner persists each new state in the same transaction
as the phase record it belongs to (work first, trigger afterwards, since ``transitions`` does not
roll back a transition when a later step fails).

One drive walks the phases in registry order, whether it runs a phase or skips it as unchanged:

- ``drive``: from any stored state to the first phase. Every drive starts at the top: a new run,
  one interrupted or detached in a phase (the driver killed, a training left running), or one
  that ended (a resume after a failure, a gate stop, an approval or a changed request). Which
  phase then really runs is the runner's call (the first whose inputs changed or whose last
  attempt did not succeed), so a resume re-enters the phase after the last finished one, or an
  earlier one a changed request invalidates, or a detached phase itself to re-attach.
- ``reach_<phase>``: from the phase before it only; no phase is passed twice, none jumped.
- ``start_gated``: the approval guard, refused for a phase past an unapproved approval point.
- ``await_approval``: from the phase a drive has reached (the one whose result waits for approval).
- ``stop_at_gate`` and ``fail``: from the phase being run only.
- ``finish``: from the last phase only, reached by a drive.

The runner calls the methods (``reach``, ``enter_phase``, ``wait_for_approval``, ``fail_phase``,
``stop_phase_at_gate``, ``finish_drive``), which raise where a refused condition would only make
the trigger return False.

A detached phase (``PhaseResult.pending``) ends the drive in that phase's state. Anything else
raises ``MachineError``: a runner bug, never a user error.
"""

from __future__ import annotations

from collections.abc import Iterable
from enum import Enum
from typing import TYPE_CHECKING

from transitions import Machine, MachineError, State

from ltx_pipeline.store.states import RunState

__all__ = ["TERMINAL_STATES", "RunLifecycle"]

# Plain strings (the enums' values): ``transitions`` names an Enum state by its member name, not its value.
_NEW = RunState.NEW.value
_AWAITING_APPROVAL, _GATE_STOPPED = RunState.AWAITING_APPROVAL.value, RunState.GATE_STOPPED.value
_FAILED, _FINISHED = RunState.FAILED.value, RunState.FINISHED.value
TERMINAL_STATES = (_AWAITING_APPROVAL, _GATE_STOPPED, _FAILED, _FINISHED)


class RunLifecycle:
    """The model object ``transitions`` drives; ``state`` is what the store keeps."""

    def __init__(self, phase_names: Iterable[str], state: str) -> None:
        self.phase_names = tuple(phase_names)
        if not self.phase_names:
            raise ValueError("a run lifecycle needs at least one phase")
        self.approval_ok = False
        self.running: str | None = None  # the phase being run (not merely passed as unchanged)
        self.driving = False
        states: list[str | Enum | State] = [_NEW, *self.phase_names, *TERMINAL_STATES]
        if state not in states:  # a phase removed from the registry since: a drive starts at the top anyway
            state = _NEW
        self.machine = Machine(model=self, states=states, initial=state, auto_transitions=False,
                               send_event=False)
        first, last = self.phase_names[0], self.phase_names[-1]
        self.machine.add_transition("drive", source=states, dest=first, unless="is_driving")
        for before, name in zip(self.phase_names, self.phase_names[1:], strict=False):
            self.machine.add_transition(f"reach_{name}", source=before, dest=name)
        self.machine.add_transition("start_gated", source=list(self.phase_names), dest="=",
                                    conditions="approval_allows")
        self.machine.add_transition("await_approval", source=list(self.phase_names), dest=_AWAITING_APPROVAL,
                                    conditions="is_driving")
        self.machine.add_transition("stop_at_gate", source=list(self.phase_names), dest=_GATE_STOPPED,
                                    conditions="is_running")
        self.machine.add_transition("fail", source=list(self.phase_names), dest=_FAILED, conditions="is_running")
        self.machine.add_transition("finish", source=last, dest=_FINISHED, conditions="is_driving")

    state: str

    if TYPE_CHECKING:  # trigger methods that ``Machine`` adds to the model at run time

        def trigger(self, trigger_name: str) -> bool: ...
        def drive(self) -> bool: ...
        def start_gated(self) -> bool: ...
        def await_approval(self) -> bool: ...
        def stop_at_gate(self) -> bool: ...
        def fail(self) -> bool: ...
        def finish(self) -> bool: ...

    def approval_allows(self) -> bool:
        return self.approval_ok

    def is_running(self) -> bool:
        return self.running is not None and self.running == self.state

    def is_driving(self) -> bool:
        return self.driving

    def reach(self, name: str) -> None:
        """Move the drive to phase ``name`` (to run it or to skip it as unchanged).

        Raises:
            MachineError: ``name`` is not the next phase of this drive (the first one, to begin).
        """
        if not self.driving:
            if name != self.phase_names[0]:
                raise MachineError(f"a drive starts at {self.phase_names[0]}, not {name}")
            self._refuse_unless(self.drive(), "drive")
            self.driving = True
        elif name == self.phase_names[0] or name not in self.phase_names:
            raise MachineError(f"Can't trigger event reach_{name} from state {self.state}!")
        else:
            self.trigger(f"reach_{name}")
        self.running = None

    def enter_phase(self, name: str, *, after_approval_point: bool) -> None:
        """Run the phase the drive has reached; past the approval point only with ``approval_ok`` set.

        Raises:
            MachineError: the drive is not at ``name``, or the guard refused (no approval for this plan).
        """
        if not self.driving or self.state != name:
            raise MachineError(f"cannot run {name}: the drive is at {self.state}")
        if after_approval_point and not self.start_gated():
            raise MachineError(f"phase {name} needs an approved plan")
        self.running = name

    def wait_for_approval(self) -> None:
        """The drive stops at the phase it has reached, whose result waits for approval.

        Raises:
            MachineError: no drive is at a phase.
        """
        self._refuse_unless(self.await_approval(), "await_approval")

    def finish_drive(self) -> None:
        """The drive went through the last phase: the run is finished.

        Raises:
            MachineError: the drive has not reached the last phase.
        """
        self._refuse_unless(self.finish(), "finish")

    def fail_phase(self) -> None:
        """The phase being run failed.

        Raises:
            MachineError: no phase is being run.
        """
        self._refuse_unless(self.fail(), "fail")

    def stop_phase_at_gate(self) -> None:
        """The phase being run stopped at a hardware gate.

        Raises:
            MachineError: no phase is being run.
        """
        self._refuse_unless(self.stop_at_gate(), "stop_at_gate")

    def _refuse_unless(self, moved: bool, trigger: str) -> None:
        # A refused condition makes ``transitions`` return False rather than raise: an impossible move all the same.
        if not moved:
            raise MachineError(f"Can't trigger event {trigger} from state {self.state}!")
