"""Run, phase and process states are ``str`` enums whose values are the strings the store has always kept."""

from __future__ import annotations

import json

from ltx_pipeline.engine.machine import TERMINAL_STATES, RunLifecycle
from ltx_pipeline.store.states import PhaseState, ProcessState, RunState


def test_the_values_are_the_strings_stored_before_the_enums() -> None:
    # Rows written by every earlier release hold these: a renamed value would change their meaning.
    assert [s.value for s in RunState] == ["new", "awaiting_approval", "gate_stopped", "failed", "finished"]
    assert [s.value for s in PhaseState] == ["running", "succeeded", "failed", "interrupted", "gate_stopped",
                                             "detached"]
    assert [s.value for s in ProcessState] == ["running", "exited", "crashed", "stopped"]


def test_a_state_reads_as_its_value_in_text_json_and_comparisons() -> None:
    state = PhaseState.GATE_STOPPED
    assert (str(state), f"{state}") == ("gate_stopped", "gate_stopped")  # never "PhaseState.GATE_STOPPED"
    assert json.dumps({"status": state}) == '{"status": "gate_stopped"}'
    assert state == "gate_stopped" and "gate_stopped" in (PhaseState.GATE_STOPPED,)
    assert {PhaseState.SUCCEEDED: "finished"}.get("succeeded") == "finished"  # a plain row value finds its key


def test_the_lifecycle_keeps_plain_strings_for_the_store() -> None:
    # ``transitions`` names an Enum state by its member name: the machine must hold the values themselves.
    assert all(type(state) is str for state in TERMINAL_STATES)
    lifecycle = RunLifecycle(["probe", "plan"], RunState.FINISHED.value)
    assert lifecycle.state == "finished" and type(lifecycle.state) is str
    lifecycle.reach("probe")
    assert lifecycle.state == "probe"
