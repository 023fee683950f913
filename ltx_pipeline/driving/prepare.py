"""Creating a run, or updating one's run.yaml, before it is driven: the decisions taken on its request.

A new run is created only once its whole request passed (every problem reported at once) and, for a
run about to be driven, its GPU probe could start, so a refusal leaves no run behind. An existing run
keeps run.yaml's values for every option not given; a run whose training finished and whose steps now go
past that training's total continues from its final weights (``ltx.recipe.continue_points``), never again
from step 0, unless what was asked changes what its weights are (``ltx.recipe.WEIGHTS_FIELDS``).
"""

from __future__ import annotations

from typing import Any, NamedTuple

from ltx_pipeline.driving.runs import existing_run
from ltx_pipeline.errors import BadRequest
from ltx_pipeline.ltx.recipe import WEIGHTS_FIELDS, continue_points, refuse_fewer
from ltx_pipeline.outputs.train import TrainedStage, TrainOutputs
from ltx_pipeline.probing.gpus import check_gpu_probe
from ltx_pipeline.request import RunRequest, check_request, default_run_name, load_request, save_request
from ltx_pipeline.store import Run, Store, saved_id
from ltx_pipeline.workspace import Workspace, validate_run_name

__all__ = ["PreparedRun", "create_run", "prepare_run", "resume_run"]


class PreparedRun(NamedTuple):
    """A run ready to drive: the store it is in (opened when there was none), its row and its request."""

    store: Store
    run: Run
    request: RunRequest


def create_run(ws: Workspace, store: Store | None, run_name: str | None, options: dict[str, Any]) -> PreparedRun:
    """A new run and its run.yaml, nothing driven (``init``): no GPU probe, since nothing runs yet.

    Raises:
        BadRequest: a run of that name exists, or the request is invalid.
    """
    if run_name and store is not None and store.get_run(run_name):
        raise BadRequest(f"Run {run_name} already exists", where="--run", fix="choose another name or use `resume`")
    return prepare_run(ws, store, run_name, options, check_gpu=False)


def resume_run(ws: Workspace, store: Store | None, run_name: str, options: dict[str, Any]) -> PreparedRun:
    """An existing run with ``options`` (the few ``resume`` takes) saved into its run.yaml, re-read.

    Raises:
        BadRequest: no run of that name in the workspace.
    """
    found, _ = existing_run(ws, store, run_name)
    return prepare_run(ws, found, run_name, options)


def prepare_run(ws: Workspace, store: Store | None, run_name: str | None, options: dict[str, Any], *,
                check_gpu: bool = True) -> PreparedRun:
    """Create the run, or update an existing one's run.yaml with the options given.

    With ``check_gpu`` (every caller that goes on to drive the run), a GPU probe that could not even
    start (no nvidia-smi for the ltx backend, a broken ``--nvidia-smi``, a malformed ``--assume-gpu``)
    is refused here, before the run is created or changed, so that no failed run is left behind. A new
    run's workspace and store (``store`` None: there is none yet) are created only once its request passed.

    Raises:
        BadRequest / BadInputs: no dataset for a new run, an invalid request, fewer steps than trained.
    """
    # No stored run has a name validation refuses.
    existing = store.get_run(run_name) if store is not None and run_name else None
    if existing is None:
        created = _create(ws, store, run_name, options, check_gpu)
        if isinstance(created, PreparedRun):
            return created
        store, existing = created
    assert store is not None  # an existing run was found in it
    return PreparedRun(store, existing, _updated(ws, store, existing, options, check_gpu))


def _create(ws: Workspace, store: Store | None, run_name: str | None, options: dict[str, Any],
            check_gpu: bool) -> PreparedRun | tuple[Store, Run]:
    """A new run, or (the request's default name is taken) the store and the run of that name."""
    if "dataset" not in options:
        if run_name is not None:
            validate_run_name(run_name)  # "" and reserved names are refused, not replaced by a default
        raise BadRequest("A new run needs a dataset", where="--dataset",
                         fix="pass --dataset PATH (or --run NAME of an existing run)")
    request = check_request(run_name, options)  # every problem at once, before anything is written
    if check_gpu:
        check_gpu_probe(request.backend, request.assume_gpu, request.nvidia_smi)
    name = run_name or default_run_name(request)
    if store is None:
        ws.create()
        store = Store.open(ws.store)
    found = store.get_run(name)
    if found is not None:
        return store, found
    save_request(ws.run(name).request_file, request, ws.root)
    return PreparedRun(store, store.create_run(name, request.model_dump(mode="json")), request)


def _updated(ws: Workspace, store: Store, run: Run, options: dict[str, Any], check_gpu: bool) -> RunRequest:
    """An existing run's request with ``options`` over run.yaml's values, saved when anything changed."""
    paths = ws.run(run.name)
    request = load_request(paths.request_file)
    if "config_set" in options:  # --set adds to (or changes) the run's own values; run.yaml removes them
        options = {**options, "config_set": {**request.config_set, **options["config_set"]}}
    trained = _trained(store, run, {**request.model_dump(mode="json"), **options})
    refuse_fewer(trained, options.get("steps"), run=run.name)  # before run.yaml's own checks: the cause
    if options:
        request = check_request(None, {**request.model_dump(exclude_none=True), **options})
    continued = _continued(run, request, trained, str(paths.request_file))
    if check_gpu:
        check_gpu_probe(request.backend, request.assume_gpu, request.nvidia_smi)
    if options or continued is not request:
        save_request(paths.request_file, continued, ws.root)
    return continued


def _trained(store: Store, run: Run, asked: dict[str, Any]) -> int | None:
    """The step a run's finished training reached (its last stage's start plus final step), or None when
    its training has not finished, or ``asked`` changes what its weights are (``ltx.recipe.WEIGHTS_FIELDS``,
    against the request the run was last driven with): then it is re-planned, not continued."""
    train = store.latest_phase_runs(saved_id(run)).get("train")
    if train is None or train.status != "succeeded":
        return None
    before = run.request or {}
    # A field the run was last driven without (added since) had its default then.
    if any(before.get(key, _default(key)) != asked.get(key, _default(key)) for key in WEIGHTS_FIELDS):
        return None
    stages = TrainOutputs.from_stored(train.outputs, train.outputs_version).stages
    last = stages[-1] if stages else None
    return last.run_final_step if isinstance(last, TrainedStage) else None


def _default(field: str) -> Any:
    info = RunRequest.model_fields.get(field)
    return None if info is None else info.get_default(call_default_factory=True)


def _continued(run: Run, request: RunRequest, trained: int | None, where: str) -> RunRequest:
    """The request with ``continued_from`` updated when its steps go past a finished training's total
    (``ltx.recipe.continue_points``): that training goes on from its final weights, never again from 0."""
    points = continue_points(list(request.continued_from), trained, request.steps, run=run.name, where=where)
    if points == list(request.continued_from):
        return request
    return check_request(None, {**request.model_dump(exclude_none=True), "continued_from": points})
