"""Opening a workspace, creating or updating a run from options, and driving it through the engine.

Shared by ``run``, ``init``, ``resume`` and ``demo``: the commands translate their options and call
these; outcomes become exit codes here (approval gate, detached, finished) and errors in ``cli.main``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ltx_pipeline.backends import make_backend
from ltx_pipeline.cli.console import err, out
from ltx_pipeline.cli.progress import CountProgressBar, TerminalReporter
from ltx_pipeline.cli.render import print_event
from ltx_pipeline.cli.training import TrainingProgressBar
from ltx_pipeline.engine import Outcome, Runner, approve_plan
from ltx_pipeline.engine.options import RunOptions
from ltx_pipeline.errors import EXIT_APPROVAL_GATE, EXIT_OK, BadRequest
from ltx_pipeline.ltx.recipe import WEIGHTS_FIELDS, continue_points, refuse_fewer
from ltx_pipeline.outputs.train import TrainedStage, TrainOutputs
from ltx_pipeline.probing.gpus import check_gpu_probe
from ltx_pipeline.request import (
    RunRequest,
    check_request,
    default_run_name,
    load_request,
    read_request_file,
    save_request,
)
from ltx_pipeline.store import Run, Store, saved_id
from ltx_pipeline.workspace import Workspace, validate_run_name

__all__ = ["drive_run", "existing_path", "find_workspace", "gate_name", "latest_run_name", "open_workspace",
           "prepare_run", "with_request_file"]


def with_request_file(request_file: Path | None, options: dict[str, Any]) -> dict[str, Any]:
    if request_file is None:
        return options
    return {**read_request_file(_existing(request_file, "--request")), **options}


def existing_path(path: Path, option: str) -> Path:
    """The absolute path of a file the user named, or one line saying it does not exist."""
    return _existing(path, option)


def _existing(path: Path, option: str) -> Path:
    resolved = path.expanduser().resolve()
    if not resolved.exists():
        raise BadRequest(f"{path} does not exist", where=option, fix="give the path of your dataset "
                         "(a metadata .csv/.json/.jsonl, a folder of clips, or a .precomputed folder)")
    return resolved


def open_workspace(workspace: Path | None) -> tuple[Workspace, Store]:
    """The workspace (created if missing) and its store, upgraded to the newest schema."""
    ws = Workspace.at(workspace)
    ws.create()
    return ws, Store.open(ws.store)


def find_workspace(workspace: Path | None) -> tuple[Workspace, Store | None]:
    """The workspace and its store when it has one (upgraded to the newest schema), else None.

    Creates nothing: a command refused before it has anything to record leaves the workspace as it found
    it (no ``ltx-pipeline.db``, no folder). ``prepare_run`` creates both once a new run is accepted.
    """
    ws = Workspace.at(workspace)
    return ws, (Store.open(ws.store) if ws.has_store() else None)


def prepare_run(ws: Workspace, store: Store | None, run_name: str | None, options: dict[str, Any], *,
                check_gpu: bool = True) -> tuple[Store, Run, RunRequest]:
    """Create the run, or update an existing one's run.yaml with the options given.

    With ``check_gpu`` (every caller that goes on to drive the run), a GPU probe that could not even
    start (no nvidia-smi for the ltx backend, a broken ``--nvidia-smi``, a malformed ``--assume-gpu``)
    is refused here, before the run is created or changed, so that no failed run is left behind. A new
    run's workspace and store (``store`` None: there is none yet) are created only once its request passed.

    Returns:
        The store (opened here when ``store`` was None), the run and its request.
    """
    # No stored run has a name validation refuses.
    existing = store.get_run(run_name) if store is not None and run_name else None
    if existing is None:
        if "dataset" not in options:
            if run_name is not None:
                validate_run_name(run_name)  # "" and reserved names are refused, not replaced by a default
            raise BadRequest("A new run needs a dataset", where="--dataset",
                             fix="pass --dataset PATH (or --run NAME of an existing run)")
        request = check_request(run_name, options)  # every problem at once, before anything is written
        if check_gpu:
            check_gpu_probe(request.backend, request.assume_gpu, request.nvidia_smi)
        name = run_name or default_run_name(request)
        paths = ws.run(name)
        if store is None:
            ws.create()
            store = Store.open(ws.store)
        found = store.get_run(name)
        if found is None:
            save_request(paths.request_file, request, ws.root)
            return store, store.create_run(name, request.model_dump(mode="json")), request
        existing = found
    assert store is not None  # an existing run was found in it
    paths = ws.run(existing.name)
    request = load_request(paths.request_file)
    trained = _trained(store, existing, {**request.model_dump(mode="json"), **options})
    refuse_fewer(trained, options.get("steps"), run=existing.name)  # before run.yaml's own checks: the cause
    if options:
        request = check_request(None, {**request.model_dump(exclude_none=True), **options})
    continued = _continued(existing, request, trained, str(paths.request_file))
    if check_gpu:
        check_gpu_probe(request.backend, request.assume_gpu, request.nvidia_smi)
    if options or continued is not request:
        save_request(paths.request_file, continued, ws.root)
    return store, existing, continued


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


def drive_run(ws: Workspace, store: Store, run: Run, request: RunRequest, approve: bool,
              options: RunOptions | None = None) -> int:
    from phases import PHASES  # the registry is handed to the engine here, not imported by it

    def on_event(message: str, level: str, phase: str | None) -> None:
        print_event(out if level in ("info", "result") else err, message, level, phase)

    store.update_request(saved_id(run), request.model_dump(mode="json"))
    backend = make_backend(request.backend, trainer_root=request.trainer_root,
                           trainer_python=request.trainer_python, surface=request.surface,
                           assume_gpu=request.assume_gpu, memory_scale=request.reference_memory_scale,
                           nvidia_smi=request.nvidia_smi)
    bar, counts = TrainingProgressBar(out), CountProgressBar()
    runner = Runner(store, ws, PHASES, backend=backend, on_event=on_event, options=options or RunOptions(),
                    reporter=TerminalReporter(bar, counts))
    try:
        report = runner.drive(run, request)
        approved: set[str] = set()
        # --approve passes every gate (the plan, then the prepared captions), each once, and says so.
        while report.outcome is Outcome.AWAITING_APPROVAL and approve and report.approval_subject not in approved:
            subject, _ = approve_plan(store, run, approved_by="run --approve")
            approved.add(subject)
            out.print(f"{gate_name(report.approval_phase)} {subject[:19]}… approved by --approve.", markup=False)
            report = runner.drive(run, request)
    finally:
        bar.close()
        counts.close()
    target = f"--workspace {ws.root} --run {run.name}"
    if report.outcome is Outcome.AWAITING_APPROVAL:
        what = (f"the captions shown above (all in {ws.run(run.name).dataset / 'dataset.json'}; edit it by hand "
                "and resume to change any)" if report.approval_phase == "prepare" else ws.run(run.name).plan_file)
        gate = "captions approval gate" if report.approval_phase == "prepare" else "approval gate"
        out.print(f"Stopped at the {gate}. Read {what}, then:", markup=False)
        if report.approval_blockers:
            out.print("  (approve will refuse until these are provided: "
                      + "; ".join(report.approval_blockers) + ")", markup=False)
        out.print(f"  ltx-pipeline approve {target}\n  ltx-pipeline resume {target}", markup=False)
        return EXIT_APPROVAL_GATE
    if report.outcome is Outcome.DETACHED:
        out.print(f"Run {run.name} goes on without this process. Re-attach: ltx-pipeline resume {target}; "
                  f"stop it: ltx-pipeline stop {target}; check it: ltx-pipeline status {target}", markup=False)
        return EXIT_OK
    out.print(f"Run {run.name} finished: see {ws.run(run.name).outputs / 'run-summary.md'}", markup=False)
    return EXIT_OK


def gate_name(phase: str | None) -> str:
    """What a gate approves, in words: the plan, or the captions the prepare phase wrote."""
    return "Captions" if phase == "prepare" else "Plan"


def latest_run_name(store: Store | None) -> str:
    """The name of the run updated last (None: the workspace has no store yet, so no runs)."""
    runs = store.list_runs() if store is not None else []
    if not runs:
        raise BadRequest("This workspace has no runs", where="--workspace", fix="start one with `ltx-pipeline run`")
    return max(runs, key=lambda r: r.updated_at).name
