"""The autotune sweep on several GPU hosts of one model: the driver's side and the worker's side.

On a shared store the driver (the autotune phase) records on the study what every host must agree on
(GPU model and memory, run, sanity set, the space), measures the baseline itself, then keeps up to
W configs queued as WAITING trials (W live workers, plus one for itself when it is idle), chosen as the
planner would choose them with the running and queued ones taken. The driver and each
``ltx-pipeline autotune-worker`` pop queued trials (``autotune.hosts``: atomic, never twice),
run them with the same ``TrialRunner`` and tell the results into the study; the driver folds every
result into the planner as it arrives, takes queued configs the results settled off the queue
("superseded"), and reclaims trials whose host's heartbeat was lost. While the driver runs a trial of
its own, a scheduler thread does that bookkeeping, so workers never wait on the driver's trial. The
sweep ends when the planner has nothing left to choose and nothing runs or waits.

Run folders live on a file system every host mounts at the same path (configs and logs are written
under ``<run>/overfit/trial-NNN/``, NNN the Optuna trial number + 1, unique across hosts).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any, Protocol

from ltx_pipeline.autotune import hosts, trial_line
from ltx_pipeline.autotune import study as studies
from ltx_pipeline.autotune.trial_runner import TrialRunner
from ltx_pipeline.engine.processes import heartbeat_interval_s, host_id
from ltx_pipeline.ltx.autotune import SPACE_KEYS, SweepPlanner, format_knobs
from ltx_pipeline.outputs.probe import ProbeOutputs
from ltx_pipeline.phase_context import LtxContext

__all__ = ["SharedSweep", "SweepCore", "work"]

POLL_S = 0.5


def _key(knobs: dict[str, Any]) -> tuple[Any, ...]:
    return tuple(knobs.get(k) for k in SPACE_KEYS)


class SweepCore(Protocol):
    """What the driver's side needs of the sweep it shares (``autotune.sweep.Sweep`` is one)."""

    ctx: LtxContext
    planner: SweepPlanner
    trials: list[dict[str, Any]]
    space: list[dict[str, Any]]
    max_batch: int
    capacity: float
    per_gpu_batch: int  # batch x accumulation on one process: what every host's planner keeps fixed

    @property
    def trial_runner(self) -> TrialRunner: ...

    def resume(self, study: Any, *, shared: bool = False) -> None:
        """Settle trials left running, read back what finished (``shared``: this host's processes only)."""
        ...

    def apply_prior(self, prior: Any) -> None:
        """Let an earlier run's finished sweep settle this one, once its baseline agrees."""
        ...

    def record(self, number: Any, result: Any, fits: bool, state: str, extra: dict[str, Any]) -> dict[str, Any]:
        """Keep one trial's record."""
        ...

    def fold(self, study: Any, trial: Any, result: Any, extra: dict[str, Any]) -> dict[str, Any]:
        """A result into the planner, the study and the records."""
        ...


class SharedSweep:
    """The driver's side of a ``SweepCore`` (planner, records, resume, prior) shared with workers."""

    def __init__(self, sweep: SweepCore, storage: str, name: str, sanity_root: str) -> None:
        self.sweep = sweep
        self.ctx: LtxContext = sweep.ctx
        self.host = host_id()
        self.study = hosts.open_shared(storage, name)
        self.dists = studies.distributions(sweep.space)
        self.lock = threading.RLock()  # the planner and the sweep's records, between the two threads
        self.folded: set[int] = set()
        self.own_running = False  # the driver runs a trial itself: it needs none queued for it meanwhile
        self.sanity_root = sanity_root

    def run(self, prior: Any) -> None:
        sweep, study, ctx = self.sweep, self.study, self.ctx
        gpu = ctx.output(ProbeOutputs).gpus.gpus[0]
        study.set_user_attr(hosts.DISTRIBUTED, {
            "gpu": gpu.name, "memory_mib": gpu.memory_mib, "run": ctx.run_name, "driver": self.host,
            "sanity_root": self.sanity_root, "max_batch": sweep.max_batch, "headroom": ctx.request.headroom,
            "capacity_gb": sweep.capacity, "per_gpu_batch": sweep.per_gpu_batch,
            "space": {k: _dist_json(d) for k, d in self.dists.items()}})
        study.set_user_attr(hosts.OVER, False)
        sweep.resume(study, shared=True)
        self.folded = {frozen.number for frozen, _ in studies.finished_results(study)}
        sweep.apply_prior(prior)
        ctx.narrate(f"Autotune on a shared store: workers on other hosts with a {gpu.name} may join "
                    f"(`ltx-pipeline autotune-worker --run {ctx.run_name}`); each pops queued trials.")
        while True:
            with self.lock:
                idle = self.schedule(prior)
            if idle:
                break
            trial = self._own_trial()
            if trial is None:
                time.sleep(POLL_S)
                continue
            self._run_own(trial, prior)
        study.set_user_attr(hosts.OVER, True)

    def _own_trial(self) -> Any:
        """The baseline, created by the driver itself (never queued: it is measured first, here), else a
        queued trial."""
        sweep = self.sweep
        with self.lock:
            if sweep.planner.next_trials(1, []) == [sweep.planner.baseline] and not self._busy():
                return hosts.start_own(self.study, sweep.planner.baseline, self.dists, self.host)
        return hosts.pop_waiting(self.study, self.host)

    def _busy(self) -> list[Any]:
        from optuna.trial import TrialState

        busy: list[Any] = self.study.get_trials(deepcopy=False, states=(TrialState.RUNNING, TrialState.WAITING))
        return busy

    def schedule(self, prior: Any) -> bool:
        """Reclaim lost trials, fold in told results, settle the queue; True when the sweep is over."""
        from optuna.trial import TrialState

        sweep, study = self.sweep, self.study
        hosts.reclaim_stale(study)
        for frozen, result in studies.finished_results(study):
            if frozen.number in self.folded:
                continue
            self.folded.add(frozen.number)
            self._fold_told(frozen, result)
        sweep.apply_prior(prior)
        studies.record_pruned(study, sweep.planner.pruned, self.dists)
        remaining = {_key(k) for k in sweep.planner.remaining()}
        waiting = []
        for frozen in study.get_trials(deepcopy=False, states=(TrialState.WAITING,)):
            knobs = hosts.knobs_of(frozen)
            if _key(knobs) not in remaining and hosts.clear_waiting(study, frozen, hosts.SUPERSEDED):
                self.ctx.narrate(f"Queued {format_knobs(knobs)} taken off the queue: {hosts.SUPERSEDED}.")
            else:
                waiting.append(frozen)
        running = study.get_trials(deepcopy=False, states=(TrialState.RUNNING,))
        busy = [hosts.knobs_of(t) for t in (*running, *waiting)]
        want = len(hosts.live_workers(study, exclude=self.host)) + (0 if self.own_running else 1)
        baseline_pending = sweep.planner.next_trials(1, []) == [sweep.planner.baseline]
        new = [] if baseline_pending else sweep.planner.next_trials(max(0, want - len(waiting)), busy)
        for knobs in new:
            hosts.enqueue(study, knobs)
        nothing_left = not (baseline_pending or new or waiting or running or sweep.planner.next_trials(1, busy))
        return nothing_left

    def _fold_told(self, frozen: Any, result: Any) -> None:
        """A result another host (or an earlier driver) told: into the planner and the records."""
        sweep = self.sweep
        if _key(result.knobs) not in {_key(k) for k in sweep.planner.remaining()}:
            return  # measured twice (a reclaimed trial whose host came back) or settled by the prior
        sweep.planner.record(result)
        attrs = frozen.user_attrs
        extra = {k: attrs.get(k) for k in ("trial_number", "host_ram_gb", "log", "failure_kind", "fixes",
                                           "step_spread", "host")}
        state = "complete" if frozen.state.name == "COMPLETE" else "fail"
        record = sweep.record(attrs.get("trial_number"), result, sweep.planner.fits(result), state, extra)
        self.ctx.narrate(trial_line(record) + f" (on {attrs.get('host')})")

    def _run_own(self, trial: Any, prior: Any) -> None:
        """Run a trial here, the scheduler thread keeping the queue fed meanwhile."""
        sweep, study = self.sweep, self.study
        number = trial.number + 1
        trial.set_user_attr("trial_number", number)
        knobs = dict(trial.params)
        with self.lock:
            records = list(sweep.trials)
        stop = threading.Event()
        self.own_running = True
        scheduler = threading.Thread(target=self._scheduler, args=(stop, prior), daemon=True)
        scheduler.start()
        try:
            with hosts.beating(study, trial._trial_id):
                done, extra = sweep.trial_runner.run(knobs, number, records)
        finally:
            stop.set()
            scheduler.join()
            self.own_running = False
        extra["host"] = self.host
        with self.lock:
            if not hosts.still_running(study, trial):
                self.ctx.warn(f"Trial {number} was reclaimed while it ran here (its heartbeat went stale): "
                              "its result is dropped, the config runs again.")
                return
            self.folded.add(trial.number)
            if _key(done.result.knobs) not in {_key(k) for k in sweep.planner.remaining()}:
                tell_only(study, trial, done.result, extra, sweep.planner)
                return
            sweep.fold(study, trial, done.result, extra)

    def _scheduler(self, stop: threading.Event, prior: Any) -> None:
        while not stop.wait(POLL_S):
            try:
                with self.lock:
                    self.schedule(prior)
            except Exception as exc:  # noqa: BLE001 - bookkeeping retries at the next tick; the trial goes on
                self.ctx.warn(f"Autotune scheduler: {type(exc).__name__}: {exc}")


def _dist_json(dist: Any) -> str:
    from optuna.distributions import distribution_to_json

    return distribution_to_json(dist)


def tell_only(study: Any, trial: Any, result: Any, extra: dict[str, Any], planner: SweepPlanner) -> str:
    """Tell a result into the study by the planner's rules (fit and objective) without recording it."""
    return studies.tell_result(study, trial, result, fits=planner.fits(result), objective=planner.objective(result),
                               extra=extra)


def work(ctx: LtxContext, study: Any, *, once: bool, say: Callable[[str], None], gpu_indices: list[int]) -> int:
    """The worker's side: pop queued trials, run them here, tell the results, until the sweep is over.

    Returns the number of trials this worker ran.
    """
    host = host_id()
    info = study.user_attrs[hosts.DISTRIBUTED]
    runner = TrialRunner(ctx, sanity_root=info["sanity_root"], max_batch=int(info["max_batch"]),
                         gpu_indices=gpu_indices, capacity_gb=float(info["capacity_gb"]))
    ran, seen = 0, 0.0
    try:
        while not (study.user_attrs.get(hosts.OVER) or study.user_attrs.get("finished")):
            if time.monotonic() - seen >= heartbeat_interval_s():
                hosts.register(study, host, "idle")
                seen = time.monotonic()
            hosts.reclaim_stale(study)
            trial = hosts.pop_waiting(study, host)
            if trial is None:
                time.sleep(POLL_S)
                continue
            knobs, number = dict(trial.params), trial.number + 1
            trial.set_user_attr("trial_number", number)
            hosts.register(study, host, "running")
            with hosts.beating(study, trial._trial_id):
                done, extra = runner.run(knobs, number, _records(study))
            extra["host"] = host
            if not hosts.still_running(study, trial):
                say(f"Trial {number} was reclaimed while it ran here: its result is dropped.")
                continue
            # The planner's own rules for fit and objective (one config: nothing else is decided here).
            planner = SweepPlanner([knobs], knobs, capacity_gb=float(info["capacity_gb"]),
                                   headroom=float(info["headroom"]), per_gpu_batch=_per_gpu_batch(info))
            state = tell_only(study, trial, done.result, extra, planner)
            say(f"Trial {number}: {format_knobs(knobs)} -> {done.result.outcome} ({state}).")
            ran += 1
            if once:
                break
    finally:
        hosts.register(study, host, "gone")
    return ran


def _per_gpu_batch(info: dict[str, Any]) -> int:
    """The per-GPU batch the driver recorded (a driver before ltx-pipeline's typed outputs named it
    ``effective_batch``, with the same per-GPU meaning)."""
    return int(info["per_gpu_batch"] if "per_gpu_batch" in info else info["effective_batch"])


def _records(study: Any) -> list[dict[str, Any]]:
    """What finished trials measured, in the sweep's record format (for a trial's timing and carried
    validation figure)."""
    out = []
    for frozen, result in studies.finished_results(study):
        attrs = frozen.user_attrs
        out.append({"number": attrs.get("trial_number"), "knobs": dict(result.knobs),
                    "step_spread": attrs.get("step_spread"), "validation_peak_vram_gb": result.validation_peak_vram_gb,
                    "validation_peak_source": attrs.get("validation_peak_source")})
    return out
