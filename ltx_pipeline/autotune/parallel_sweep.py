"""The sweep on this host with several trials at once, one GPU slot each (``--autotune-parallel``).

Each trial runs in a thread of its own (``TrialRunner.run`` with its slot's GPUs: that trial process's
``CUDA_VISIBLE_DEVICES``); everything else stays on the calling thread: Optuna (each config enqueued
and asked from the study's WAITING queue as it starts, the multi-host sweep's queue), the planner, the
records and the narration. ``SpeculativeSchedule`` says what to start and commits results in the
sequential sweep's order, so the stopping rule, dominance pruning and the prior decide as they do with
one slot; a trial the committed results settle while it runs is stopped and told to the study as
superseded (no measurement, never replayed). Each trial's GPUs and its start and end (epoch seconds)
are kept as user attributes of its Optuna trial, and its GPUs in its record (autotune.md and .log).
"""

from __future__ import annotations

import queue
import threading
import time
from dataclasses import dataclass
from typing import Any

from ltx_pipeline.autotune import study as studies
from ltx_pipeline.autotune.side_by_side import read_spans, summarise, summary_line
from ltx_pipeline.autotune.speculation import SpeculativeSchedule, config_key
from ltx_pipeline.ltx.autotune import format_knobs
from ltx_pipeline.outputs.autotune import SideBySide

__all__ = ["ParallelTrials", "SETTLED_WHILE_RUNNING"]

SETTLED_WHILE_RUNNING = "superseded: settled by other results while it ran"


@dataclass
class _Flight:
    """One trial in flight: its Optuna trial, number, GPUs and thread."""

    trial: Any
    number: int
    gpus: tuple[int, ...]
    thread: threading.Thread


class ParallelTrials:
    """Runs a ``Sweep``'s remaining trials over ``slots`` (disjoint GPU index groups)."""

    def __init__(self, sweep: Any, study: Any, dists: dict[str, Any], prior: Any,
                 slots: list[tuple[int, ...]]) -> None:
        self.sweep, self.study, self.dists, self.prior = sweep, study, dists, prior
        self.slots, self.free = list(slots), list(slots)
        self.schedule = SpeculativeSchedule(sweep.planner, len(slots))
        self.flights: dict[tuple[Any, ...], _Flight] = {}
        self.ended: queue.Queue[tuple[dict[str, Any], Any, BaseException | None]] = queue.Queue()
        # Trials measured but not yet committed, with what the study keeps of them.
        self.pending: dict[tuple[Any, ...], tuple[_Flight, dict[str, Any]]] = {}
        self.next_number = 1 + max((h.stage for h in sweep.ctx.journal.processes("trial")), default=0)

    def run(self) -> SideBySide | None:
        """Every trial the sweep still needs, to the last; then how they shared the GPUs (from the study)."""
        ctx = self.sweep.ctx
        ctx.narrate(f"Autotune runs up to {len(self.free)} trials at once, each on its own GPU(s) "
                    f"({', '.join(str(list(s)) for s in self.free)}); results are committed in the order the "
                    "sequential sweep would take them, so its winner is the same.")
        try:
            while True:
                for knobs in self.schedule.starts():
                    self._start(knobs)
                if not self.flights:
                    side = summarise(read_spans(self.study, SETTLED_WHILE_RUNNING), self.slots)
                    if side is not None:
                        ctx.narrate(summary_line(side))
                    return side
                knobs, done, error = self.ended.get()
                if error is not None and config_key(knobs) not in self.schedule.stopped:
                    raise error
                self._land(knobs, done)
        finally:
            self._stop_all()

    def _start(self, knobs: dict[str, Any]) -> None:
        number, gpus = self.next_number, self.free.pop(0)
        self.next_number += 1
        trial = studies.ask_trial(self.study, knobs, self.dists)
        trial.set_user_attr("trial_number", number)
        records = list(self.sweep.trials)  # what the committed trials measured (carried validation, timing)

        def body() -> None:
            try:
                self.ended.put((knobs, self.sweep.trial_runner.run(knobs, number, records, gpus=gpus), None))
            except BaseException as exc:  # noqa: BLE001 - handed to the calling thread, raised there
                self.ended.put((knobs, None, exc))

        thread = threading.Thread(target=body, name=f"autotune-trial-{number}", daemon=True)
        self.flights[config_key(knobs)] = _Flight(trial, number, gpus, thread)
        thread.start()

    def _land(self, knobs: dict[str, Any], done: Any) -> None:
        """A trial ended: free its GPUs, commit what the sequential order allows, stop what is settled."""
        flight = self.flights.pop(config_key(knobs))
        flight.thread.join()
        self.free.append(flight.gpus)
        outcome, extra = done if done is not None else (None, {})
        if not self.schedule.ended(knobs, outcome.result if outcome is not None else None):
            self._supersede(flight, extra)
            return
        self.pending[config_key(knobs)] = (flight, extra)
        sweep = self.sweep
        while (result := self.schedule.ready()) is not None:
            committed, extra = self.pending.pop(config_key(result.knobs))
            sweep.fold(self.study, committed.trial, result, extra)
            sweep.apply_prior(self.prior)
            studies.record_pruned(self.study, sweep.planner.pruned, self.dists)
        stop, drop = self.schedule.settled()
        for result in drop:
            settled, extra = self.pending.pop(config_key(result.knobs))
            self._supersede(settled, extra)
        for knobs in stop:
            self._stop(self.flights[config_key(knobs)])

    def _supersede(self, flight: _Flight, extra: dict[str, Any]) -> None:
        """A trial the committed results settled: told as FAIL with no outcome (never read back as a result)."""
        from optuna.trial import TrialState

        for key in ("gpus", "started_at", "ended_at", "log"):
            flight.trial.set_user_attr(key, extra.get(key))
        flight.trial.set_user_attr("reason", SETTLED_WHILE_RUNNING)
        self.study.tell(flight.trial, state=TrialState.FAIL)
        knobs = format_knobs(dict(flight.trial.params))
        self.sweep.ctx.narrate(f"Trial {flight.number} ({knobs}) {SETTLED_WHILE_RUNNING}; not a result.")

    def _stop(self, flight: _Flight) -> None:
        journal = self.sweep.ctx.journal
        handle = journal.live("trial", flight.number)
        if handle is not None:
            journal.stop(handle)

    def _stop_all(self) -> None:
        """On the way out (an error, Ctrl-C): stop every trial still running and wait for its thread."""
        for flight in list(self.flights.values()):
            self._stop(flight)
        deadline = time.monotonic() + 60
        for flight in list(self.flights.values()):
            flight.thread.join(timeout=max(0.0, deadline - time.monotonic()))
