"""One autotune study shared by several GPU hosts: Optuna's own heartbeat, stale-trial and queue mechanics.

On a shared store (PostgreSQL) the driver enqueues configs as WAITING trials; the driver and every
``autotune-worker`` pop them, run them and tell the results into the same study. What makes that safe
is Optuna's RDB storage, not code of ours:

- never run twice: a WAITING trial is taken by ``storage.set_trial_state_values(id, RUNNING)``, which
  locks the trial's row (``SELECT ... FOR UPDATE``) and returns False unless it is still WAITING
  (optuna/storages/_rdb/storage.py ``set_trial_state_values``; ``Study._pop_waiting_trial_id`` relies on
  the same), so of two hosts popping one trial exactly one gets it;
- a lost host: while a trial runs, its host records the trial's heartbeat every interval
  (``storage.record_heartbeat``, as Optuna's own ``optimize`` does); ``optuna.storages.fail_stale_trials``
  fails a RUNNING trial whose heartbeat is older than the grace period (once: the same row lock), and
  the storage's ``RetryHeartbeatStaleTrialCallback`` (``RetryFailedTrialCallback`` before Optuna 4.9)
  enqueues a WAITING copy with the same params: reclaimed.

Interval and grace are the engine's (``engine.processes``: 10 s and 60 s, ``LTX_PIPELINE_HEARTBEAT_S``
shortens both). A finished Optuna trial cannot take a user attribute, so why a trial was lost is kept
as the study attribute ``lost:<number>``; who is working, as ``worker:<host>`` (one row per host, so
hosts never overwrite each other). Optuna is imported inside functions only.
"""

from __future__ import annotations

import math
import threading
import time
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from ltx_pipeline.engine.processes import heartbeat_grace_s, heartbeat_interval_s
from ltx_pipeline.store.location import OPTUNA_SCHEMA, is_sqlite, store_target
from ltx_pipeline.workspace import DB_FILENAME

if TYPE_CHECKING:  # types only: optuna itself is imported inside the functions that use it
    from optuna import Study, Trial
    from optuna.distributions import BaseDistribution, CategoricalDistribution
    from optuna.trial import FrozenTrial

__all__ = ["DISTRIBUTED", "LOST_PREFIX", "OVER", "SUPERSEDED", "beating", "clear_waiting", "distributions_of",
           "enqueue", "find_shared", "knobs_of", "live_workers", "lost_reasons", "open_shared", "pop_waiting",
           "reclaim_stale", "register", "shared_store", "start_own", "still_running"]

DISTRIBUTED = "distributed"  # study attr: what every host must agree on (GPU model, run, sanity set, space)
OVER = "sweep_over"  # study attr: the driver has nothing left to queue; workers stop
LOST_PREFIX = "lost:"
WORKER_PREFIX = "worker:"
SUPERSEDED = "superseded: settled by other results while it waited"


def shared_store(workspace: Path) -> bool:
    """Whether the workspace's store is shared by several hosts (a server, not its SQLite file)."""
    return not is_sqlite(store_target(workspace / DB_FILENAME))


@runtime_checkable
class _Heartbeats(Protocol):
    """A storage that keeps trial heartbeats (Optuna's RDB storage, behind its cache)."""

    def record_heartbeat(self, trial_id: int) -> None: ...


def _heartbeats(study: Study) -> _Heartbeats:
    """The study's storage as the heartbeat keeper it is for every study ``open_shared`` opens."""
    storage = study._storage
    if not isinstance(storage, _Heartbeats):
        raise TypeError(f"{type(storage).__name__} keeps no trial heartbeats: open the study with open_shared")
    return storage


def open_shared(storage_url: str, study_name: str) -> Study:
    """The study on an RDB storage that keeps trial heartbeats and reclaims stale trials."""
    import optuna
    from sqlalchemy import create_engine, text

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    engine = create_engine(storage_url)
    with engine.begin() as connection:
        connection.execute(text(f"CREATE SCHEMA IF NOT EXISTS {OPTUNA_SCHEMA}"))
    engine.dispose()
    grace = max(1, math.ceil(heartbeat_grace_s()))  # whole seconds, as Optuna's grace_period is typed
    with warnings.catch_warnings():  # "experimental" in Optuna's words since 2.8; the design of its heartbeats
        warnings.simplefilter("ignore")
        retry = optuna.storages.RetryHeartbeatStaleTrialCallback(max_retry=None)

    def on_stale(study: Study, frozen: FrozenTrial) -> None:
        host = frozen.user_attrs.get("host") or "its host"
        study.set_user_attr(f"{LOST_PREFIX}{frozen.number}",
                            f"heartbeat lost: {host} sent no heartbeat for over {grace:g} s (host or worker "
                            "gone); its config runs again")
        retry(study, frozen)

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        # Optuna's interval only switches heartbeats on (its own thread is not used: ``beating`` is ours).
        storage = optuna.storages.RDBStorage(
            storage_url, engine_kwargs={"pool_pre_ping": True},
            heartbeat_interval=max(1, round(heartbeat_interval_s())), grace_period=grace,
            heartbeat_stale_trial_callback=on_stale)
    return optuna.load_study(study_name=study_name, storage=storage)


def find_shared(storage_url: str, run_name: str) -> Study | None:
    """The run's newest study a driver opened for several hosts (``open_shared``), None when there is none."""
    import optuna

    from ltx_pipeline.autotune.study import rdb_storage

    found = [s for s in optuna.get_all_study_summaries(rdb_storage(storage_url))
             if (s.user_attrs.get(DISTRIBUTED) or {}).get("run") == run_name]
    return open_shared(storage_url, max(found, key=lambda s: s._study_id).study_name) if found else None


@contextmanager
def beating(study: Study, trial_id: int) -> Iterator[None]:
    """Record the trial's heartbeat every interval while the body runs (a daemon thread, as ``optimize``)."""
    stop = threading.Event()
    interval = heartbeat_interval_s()

    def beat() -> None:
        while True:
            try:
                _heartbeats(study).record_heartbeat(trial_id)
            except Exception:  # noqa: BLE001 - the server may be briefly away: the next beat retries
                pass
            if stop.wait(interval):
                return

    _heartbeats(study).record_heartbeat(trial_id)  # at once: a trial with no heartbeat at all is never stale
    thread = threading.Thread(target=beat, name=f"trial-heartbeat-{trial_id}", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join(timeout=interval + 5)


def distributions_of(study: Study) -> dict[str, CategoricalDistribution]:
    """The sweep's distributions, as the driver recorded them on the study (one categorical per knob)."""
    from optuna.distributions import CategoricalDistribution, json_to_distribution

    out = {}
    for knob, text in (study.user_attrs.get(DISTRIBUTED) or {})["space"].items():
        dist = json_to_distribution(text)
        if not isinstance(dist, CategoricalDistribution):
            raise TypeError(f"knob {knob} of the shared sweep has a {type(dist).__name__}, not a categorical one")
        out[knob] = dist
    return out


def knobs_of(frozen: FrozenTrial) -> dict[str, Any]:
    """A trial's config: its params, or the params it was enqueued with (not yet asked)."""
    return dict(frozen.params) or dict(frozen.system_attrs.get("fixed_params") or {})


def enqueue(study: Study, knobs: dict[str, Any]) -> None:
    study.enqueue_trial(dict(knobs), skip_if_exists=False)


def pop_waiting(study: Study, host: str) -> Trial | None:
    """Take one WAITING trial for this host (atomic, see the module docstring); None when none waits.

    Returns an ``optuna.Trial`` in state RUNNING whose params are its config, its heartbeat recorded.
    """
    import optuna
    from optuna.trial import TrialState

    dists = distributions_of(study)
    for frozen in study.get_trials(deepcopy=False, states=(TrialState.WAITING,)):
        try:
            if not study._storage.set_trial_state_values(frozen._trial_id, state=TrialState.RUNNING):
                continue  # another host took it first
        except optuna.exceptions.UpdateFinishedTrialError:
            continue  # cleared (superseded) meanwhile
        _heartbeats(study).record_heartbeat(frozen._trial_id)
        trial = optuna.Trial(study, frozen._trial_id)
        for name, dist in dists.items():
            trial.suggest_categorical(name, dist.choices)  # the enqueued value (or the retried copy's param)
        trial.set_user_attr("host", host)
        return trial
    return None


def start_own(study: Study, knobs: dict[str, Any], dists: dict[str, BaseDistribution], host: str) -> Trial:
    """A RUNNING trial with ``knobs`` that was never queued (the driver's baseline), its heartbeat recorded."""
    import optuna
    from optuna.trial import TrialState

    template = optuna.trial.create_trial(state=TrialState.RUNNING, params={k: knobs[k] for k in dists},
                                         distributions=dists, user_attrs={"host": host})
    trial_id = study._storage.create_new_trial(study._study_id, template_trial=template)
    _heartbeats(study).record_heartbeat(trial_id)
    return optuna.Trial(study, trial_id)


def still_running(study: Study, trial: Trial) -> bool:
    """Whether a trial this host runs is still its own (not failed as stale meanwhile)."""
    from optuna.trial import TrialState

    return bool(study._storage.get_trial(trial._trial_id).state == TrialState.RUNNING)


def clear_waiting(study: Study, frozen: FrozenTrial, reason: str) -> bool:
    """Take a WAITING trial off the queue as FAIL with ``reason``; False when a host took it first."""
    import optuna
    from optuna.trial import TrialState

    try:
        if not study._storage.set_trial_state_values(frozen._trial_id, state=TrialState.RUNNING):
            return False
    except optuna.exceptions.UpdateFinishedTrialError:
        return False
    trial = optuna.Trial(study, frozen._trial_id)
    for name, dist in distributions_of(study).items():
        trial.suggest_categorical(name, dist.choices)  # the study shows which config was cleared
    trial.set_user_attr("reason", reason)
    study.tell(trial, state=TrialState.FAIL)
    return True


def reclaim_stale(study: Study) -> None:
    """Fail RUNNING trials whose heartbeat is older than the grace period; each is re-enqueued (reclaimed)."""
    import optuna

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        optuna.storages.fail_stale_trials(study)


def lost_reasons(study: Study) -> dict[int, str]:
    """Trials failed because their host's heartbeat was lost (number -> why)."""
    return {int(k[len(LOST_PREFIX):]): str(v) for k, v in study.user_attrs.items() if k.startswith(LOST_PREFIX)}


def register(study: Study, host: str, state: str) -> None:
    """Say this host works on the study (``state``: idle, running, gone)."""
    study.set_user_attr(f"{WORKER_PREFIX}{host}", {"seen": time.time(), "state": state})


def live_workers(study: Study, *, exclude: str) -> list[str]:
    """Hosts (not ``exclude``) that said they work on the study within the grace period."""
    now, grace = time.time(), heartbeat_grace_s()
    return sorted(k[len(WORKER_PREFIX):] for k, v in study.user_attrs.items()
                  if k.startswith(WORKER_PREFIX) and k[len(WORKER_PREFIX):] != exclude
                  and isinstance(v, dict) and v.get("state") != "gone" and now - float(v.get("seen") or 0) <= grace)
