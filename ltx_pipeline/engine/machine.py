"""The run lifecycle as a ``transitions`` state machine.

States: ``new``, one state per phase (the phase now running), ``awaiting_approval``,
``gate_stopped``, ``failed`` and ``finished``. Entering a phase that comes after an approval point
is guarded by ``approval_ok``. The machine holds no state of its own beyond what the store
persisted: it is rebuilt from ``runs.state`` on every drive, and the runner persists each new state
in the same transaction as the phase record it belongs to (work first, trigger afterwards, since
``transitions`` does not roll back a transition when a later step fails).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from transitions import Machine, MachineError

__all__ = ["TERMINAL_STATES", "RunLifecycle"]

TERMINAL_STATES = ("awaiting_approval", "gate_stopped", "failed", "finished")


class RunLifecycle:
    """The model object ``transitions`` drives; ``state`` is what the store keeps."""

    def __init__(self, phase_names: Iterable[str], state: str) -> None:
        self.phase_names = tuple(phase_names)
        self.approval_ok = False
        states = ["new", *self.phase_names, *TERMINAL_STATES]
        if state not in states:  # a phase removed from the registry since: restart from the top
            state = "new"
        self.machine = Machine(model=self, states=states, initial=state, auto_transitions=False,
                               send_event=False)
        for name in self.phase_names:
            self.machine.add_transition(f"start_{name}", source="*", dest=name)
        self.machine.add_transition("start_gated", source="*", dest="=", conditions="approval_allows")
        self.machine.add_transition("await_approval", source="*", dest="awaiting_approval")
        self.machine.add_transition("stop_at_gate", source="*", dest="gate_stopped")
        self.machine.add_transition("fail", source="*", dest="failed")
        self.machine.add_transition("finish", source="*", dest="finished")

    state: str

    if TYPE_CHECKING:  # trigger methods that ``Machine`` adds to the model at run time

        def trigger(self, trigger_name: str) -> bool: ...
        def start_gated(self) -> bool: ...
        def await_approval(self) -> bool: ...
        def stop_at_gate(self) -> bool: ...
        def fail(self) -> bool: ...
        def finish(self) -> bool: ...

    def approval_allows(self) -> bool:
        return self.approval_ok

    def enter_phase(self, name: str, *, after_approval_point: bool) -> None:
        """Move into ``name``; past the approval point only with ``approval_ok`` set.

        Raises:
            MachineError: the guard refused (no approval for this plan).
        """
        if after_approval_point and not self.start_gated():
            raise MachineError(f"phase {name} needs an approved plan")
        self.trigger(f"start_{name}")
