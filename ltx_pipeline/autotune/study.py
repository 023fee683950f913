"""The autotune sweep's Optuna study: where every trial is recorded, and how a sweep resumes.

Owns the study in Optuna's standard RDB storage on ``<workspace>/optuna.db`` (a file of its own, so
its migrations never meet the engine's database; optuna-dashboard opens it as is). The planner
(``SweepPlanner``) chooses each config; Optuna records it through ask/tell with a fixed,
enqueued parameter set, one ``CategoricalDistribution`` per knob. Completed trials carry the
objective (seconds per optimizer step); failed ones the reason; configs settled without a run are
added as pruned trials with the reason. Every measurement is a user attribute, so a resumed sweep
rebuilds its planner from the study alone. Optuna is imported inside functions only.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ltx_pipeline.autotune._peaks import MeasuredTrialResult
from ltx_pipeline.ltx.autotune import SPACE_KEYS, Knobs, Pruned, TrialResult
from ltx_pipeline.store.location import OPTUNA_SCHEMA, optuna_storage, store_target
from ltx_pipeline.workspace import DB_FILENAME, OPTUNA_DB_FILENAME

if TYPE_CHECKING:  # types only: optuna itself is imported inside the functions that use it
    from optuna import Study, Trial
    from optuna.distributions import BaseDistribution
    from optuna.storages import RDBStorage
    from optuna.trial import FrozenTrial

__all__ = ["ORPHAN_REASON", "ask_trial", "delete_run_studies", "distributions", "fail_orphan", "finished_results",
           "open_study", "orphans", "record_pruned", "tell_result"]

ORPHAN_REASON = "orphaned: the engine stopped while it ran"
_MEASURES = ("step_time_s", "peak_vram_gb", "validation_peak_vram_gb", "seconds", "host_ram_gb", "step_margin")
# Where each memory figure came from, and whether the fit was assumed (memory not measurable): kept
# with the trial so a resumed sweep judges a replayed trial exactly as the live one was judged.
_MEMORY = ("peak_source", "validation_peak_source", "memory_note", "assumed_fit", "order_gb")


def storage_for(workspace: Path) -> str:
    """The study storage of a workspace: its ``optuna.db``, or the ``optuna`` schema of its shared store.

    Computed each time from ``LTX_PIPELINE_STORE``, so a server password is never written into outputs.
    """
    return optuna_storage(store_target(workspace / DB_FILENAME), workspace / OPTUNA_DB_FILENAME)


def rdb_storage(storage: str) -> RDBStorage:
    """Optuna's RDB storage for a storage URL (or a SQLite file path); a PostgreSQL schema is created first."""
    import optuna

    url = storage if "://" in storage else f"sqlite:///{storage}"
    if url.startswith("sqlite"):
        return optuna.storages.RDBStorage(url, engine_kwargs={"connect_args": {"timeout": 60}})
    from sqlalchemy import create_engine, text

    engine = create_engine(url)
    with engine.begin() as connection:
        connection.execute(text(f"CREATE SCHEMA IF NOT EXISTS {OPTUNA_SCHEMA}"))
    engine.dispose()
    return optuna.storages.RDBStorage(url, engine_kwargs={"pool_pre_ping": True})


def open_study(storage_file: str, run_name: str, inputs_key: str) -> tuple[Study, str]:
    """The run's study for these inputs: resumed when it exists, else created.

    A study whose inputs differ (the plan, configs or headroom changed) is kept for the record and a
    new one is named ``<run>-autotune-2``, ``-3``...

    Returns:
        (study, study name).
    """
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    storage = rdb_storage(storage_file)
    existing = {s.study_name: s for s in optuna.get_all_study_summaries(storage)}
    index = 1
    while True:
        name = f"{run_name}-autotune" + ("" if index == 1 else f"-{index}")
        summary = existing.get(name)
        if summary is None:
            study = optuna.create_study(storage=storage, study_name=name, direction="minimize")
            study.set_user_attr("inputs", inputs_key)
            study.set_user_attr("objective", "seconds per optimizer step at the planned effective batch")
            return study, name
        if summary.user_attrs.get("inputs") == inputs_key:
            return optuna.load_study(study_name=name, storage=storage), name
        index += 1


def distributions(space: list[Knobs]) -> dict[str, BaseDistribution]:
    """One categorical distribution per knob, its choices as the space spells them."""
    from optuna.distributions import CategoricalDistribution

    out: dict[str, BaseDistribution] = {}
    for key in SPACE_KEYS:
        choices: list[Any] = []
        for knobs in space:
            if knobs[key] not in choices:
                choices.append(knobs[key])
        out[key] = CategoricalDistribution(choices)
    return out


def _params(knobs: Knobs) -> dict[str, Any]:
    return {k: knobs[k] for k in SPACE_KEYS}


def ask_trial(study: Study, knobs: Knobs, dists: dict[str, BaseDistribution]) -> Trial:
    """A RUNNING Optuna trial with exactly ``knobs`` (enqueued, then asked)."""
    from optuna.trial import TrialState

    params = _params(knobs)
    waiting = study.get_trials(deepcopy=False, states=(TrialState.WAITING,))
    if not any(t.params == params for t in waiting):
        study.enqueue_trial(params)
    while True:
        trial = study.ask(dists)
        if trial.params == params:
            return trial
        # A config enqueued by an engine that died before asking it: not this sweep's next trial.
        trial.set_user_attr("reason", "superseded: enqueued by an engine that stopped before running it")
        study.tell(trial, state=TrialState.FAIL)


def tell_result(study: Study, trial: Trial, result: TrialResult, *, fits: bool, objective: float,
                extra: dict[str, Any]) -> str:
    """Record a finished trial: COMPLETE with the objective when it fits, else FAIL with the reason."""
    from optuna.trial import TrialState

    attrs = {"outcome": result.outcome, "reason": result.reason,
             **{k: getattr(result, k, None) for k in (*_MEASURES, *_MEMORY)}, **extra}
    for key, value in attrs.items():
        trial.set_user_attr(key, value)
    if fits and math.isfinite(objective):
        study.tell(trial, objective)
        return "complete"
    study.tell(trial, state=TrialState.FAIL)
    return "fail"


def record_pruned(study: Study, pruned: list[Pruned], dists: dict[str, BaseDistribution]) -> None:
    """Add each newly pruned config as a PRUNED trial with its reason (never twice)."""
    import optuna
    from optuna.trial import TrialState

    seen = {json.dumps(t.params, sort_keys=True)
            for t in study.get_trials(deepcopy=False, states=(TrialState.PRUNED,))}
    for item in pruned:
        params = _params(item.knobs)
        if json.dumps(params, sort_keys=True) in seen:
            continue
        study.add_trial(optuna.trial.create_trial(state=TrialState.PRUNED, params=params, distributions=dists,
                                                  user_attrs={"reason": item.reason, "outcome": "pruned"}))


def superseded(study: Study) -> dict[int, str]:
    """Finished trials a fix made obsolete (Optuna trial number -> why); they are never replayed."""
    return {int(number): str(why) for number, why in (study.user_attrs.get("superseded") or {}).items()}


def supersede(study: Study, numbers: dict[int, str]) -> None:
    """Record finished trials as obsolete: a finished Optuna trial cannot be changed, so the study
    keeps the list (a study attribute, committed with the storage like any trial). None given: nothing written."""
    if not numbers:
        return
    merged = {str(k): v for k, v in superseded(study).items()} | {str(k): v for k, v in numbers.items()}
    study.set_user_attr("superseded", merged)


def finished_results(study: Study) -> list[tuple[FrozenTrial, TrialResult]]:
    """Every trial a previous attempt finished (complete or failed with a measurement) and no fix
    superseded, in order."""
    from optuna.trial import TrialState

    out: list[tuple[FrozenTrial, TrialResult]] = []
    obsolete = superseded(study)
    for frozen in study.get_trials(deepcopy=False, states=(TrialState.COMPLETE, TrialState.FAIL)):
        attrs = frozen.user_attrs
        if "outcome" not in attrs or frozen.number in obsolete:
            continue  # orphaned or superseded: nothing was measured, or the fix changed what it measured
        result = MeasuredTrialResult(dict(frozen.params), attrs["outcome"], attrs.get("step_time_s"),
                                     attrs.get("peak_vram_gb"), attrs.get("validation_peak_vram_gb"),
                                     float(attrs.get("seconds") or 0.0), attrs.get("reason") or "",
                                     peak_source=attrs.get("peak_source"),
                                     validation_peak_source=attrs.get("validation_peak_source"),
                                     memory_note=attrs.get("memory_note") or "",
                                     assumed_fit=bool(attrs.get("assumed_fit")), order_gb=attrs.get("order_gb"),
                                     step_margin=attrs.get("step_margin"))
        out.append((frozen, result))
    return out


def orphans(study: Study) -> list[FrozenTrial]:
    """Trials left RUNNING by an engine that stopped."""
    from optuna.trial import TrialState

    return study.get_trials(deepcopy=False, states=(TrialState.RUNNING,))


def fail_orphan(study: Study, frozen: FrozenTrial) -> None:
    """Mark an orphaned trial FAIL with the orphan reason."""
    import optuna
    from optuna.trial import TrialState

    optuna.trial.Trial(study, frozen._trial_id).set_user_attr("reason", ORPHAN_REASON)
    study.tell(frozen.number, state=TrialState.FAIL)


# -- earlier sweeps as a prior ---------------------------------------------------------------------

def mark_prior_key(study: Study, key: str) -> None:
    """Tag the study with what its memory surface depends on, so a later run can find it as a prior."""
    if study.user_attrs.get("prior_key") != key:
        study.set_user_attr("prior_key", key)


def mark_finished(study: Study, winner: Knobs | None) -> None:
    """A sweep that ran to its winner: only such a study is ever a prior."""
    study.set_user_attr("finished", True)
    study.set_user_attr("winner", winner)


def find_prior(storage_file: str, key: str, *,
               exclude: str) -> tuple[str, list[tuple[FrozenTrial, TrialResult]]] | None:
    """The newest finished study with this prior key (not ``exclude``), and its finished results; None when none."""
    import optuna

    storage = rdb_storage(storage_file)
    found = [s for s in optuna.get_all_study_summaries(storage)
             if s.study_name != exclude and s.user_attrs.get("prior_key") == key and s.user_attrs.get("finished")]
    if not found:
        return None
    newest = max(found, key=lambda s: s._study_id)
    study = optuna.load_study(study_name=newest.study_name, storage=storage)
    return newest.study_name, finished_results(study)


def record_memory_miss(storage_file: str, study_name: str, miss: dict[str, Any]) -> None:
    """Append a memory-model miss (predicted vs the training's measured peak) to the sweep's study."""
    import optuna

    study = optuna.load_study(study_name=study_name, storage=rdb_storage(storage_file))
    study.set_user_attr("memory_model_misses", [*(study.user_attrs.get("memory_model_misses") or []), miss])


def delete_run_studies(workspace: Path, run_name: str) -> list[str]:
    """Delete the run's studies (``<run>-autotune``, ``<run>-autotune-2``...; ``open_study`` names them so, and
    no other run's name gives one of these) from the workspace's study storage; return their names.

    A workspace whose storage was never created (no ``optuna.db``) has none, and nothing is created.
    """
    storage = storage_for(workspace)
    if storage.startswith("sqlite:///") and not Path(storage.removeprefix("sqlite:///")).is_file():
        return []
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    rdb = rdb_storage(storage)
    own = re.compile(re.escape(f"{run_name}-autotune") + r"(-[0-9]+)?")
    names = [s.study_name for s in optuna.get_all_study_summaries(rdb) if own.fullmatch(s.study_name)]
    for name in names:
        optuna.delete_study(study_name=name, storage=rdb)
    return names
