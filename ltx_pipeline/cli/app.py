"""Typer commands: options -> ``RunRequest`` -> engine -> render.

Commands only translate: they build requests, open the workspace, hand the registry of phases to
the runner and print what comes back. Outcomes become exit codes in ``cli.main`` alone.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console

from ltx_pipeline.backends import make_backend
from ltx_pipeline.cli.bench import bench_app
from ltx_pipeline.cli.config_tools import command as command_command
from ltx_pipeline.cli.config_tools import validate as validate_command
from ltx_pipeline.cli.demo import demo as demo_command
from ltx_pipeline.cli.render import print_event, print_json, render_status
from ltx_pipeline.cli.training import TrainingProgressBar
from ltx_pipeline.cli.training import stop as stop_command
from ltx_pipeline.engine import Outcome, Runner, approve_plan
from ltx_pipeline.engine.status import status_report
from ltx_pipeline.errors import EXIT_APPROVAL_GATE, EXIT_OK, BadRequest
from ltx_pipeline.request import (
    RunRequest,
    build_request,
    default_run_name,
    load_request,
    read_request_file,
    save_request,
)
from ltx_pipeline.store import Run, Store
from ltx_pipeline.workspace import Workspace

__all__ = ["app"]

app = typer.Typer(name="ltx-pipeline", add_completion=False, pretty_exceptions_enable=False,
                  no_args_is_help=True, help="Plan, tune, train and monitor LTX-2 LoRAs with ltx-trainer.")
out = Console(highlight=False, soft_wrap=True)
err = Console(stderr=True, highlight=False, soft_wrap=True)

WorkspaceOpt = Annotated[Path | None, typer.Option("--workspace", "-w", help="Workspace folder "
                         "(default: $LTX_PIPELINE_WORKSPACE, else ./workspaces).")]
RunOpt = Annotated[str | None, typer.Option("--run", "-r", help="Run name (letters, digits, . _ -).")]
RequestFileOpt = Annotated[Path | None, typer.Option("--request", help="Start from a run-request YAML file "
                           "(options given on the command line override its fields).")]


def _request_options(dataset: Path | None, mode: str | None, training_mode: str | None, strategy: str | None,
                     buckets: str | None, rank: int | None, steps: int | None, learning_rate: float | None,
                     effective_batch: int | None, trigger: str | None, trainer_root: Path | None,
                     model_path: str | None, text_encoder_path: str | None, backend: str | None,
                     assume_gpu: str | None, nvidia_smi: str | None, accept_risk: bool | None,
                     surface: Path | None = None, fresh_preprocess: bool | None = None,
                     headroom: float | None = None, processes: int | None = None,
                     checkpoint_interval: int | None = None, validation_interval: int | None = None) -> dict[str, Any]:
    """The request fields the user actually gave (None means "not given")."""
    given = dict(mode=mode, training_mode=training_mode, strategy=strategy, buckets=buckets, rank=rank,
                 steps=steps, learning_rate=learning_rate, effective_batch=effective_batch, trigger=trigger,
                 model_path=model_path, text_encoder_path=text_encoder_path, backend=backend,
                 assume_gpu=assume_gpu, nvidia_smi=nvidia_smi, accept_risk=accept_risk,
                 fresh_preprocess=fresh_preprocess, headroom=headroom, processes=processes,
                 checkpoint_interval=checkpoint_interval, validation_interval=validation_interval)
    if dataset is not None:
        given["dataset"] = str(_existing(dataset, "--dataset"))
    for key in ("model_path", "text_encoder_path", "nvidia_smi"):
        value = given.get(key)
        # Local paths are stored absolute so run.yaml means the same from any directory; URLs and
        # bare command names (nvidia-smi on PATH) are kept as given for the request to judge.
        if value and "://" not in value and (os.sep in value or key != "nvidia_smi"):
            given[key] = str(Path(value).expanduser().resolve())
    if trainer_root is not None:
        given["trainer_root"] = str(trainer_root.expanduser().resolve())
    if surface is not None:
        given["surface"] = str(_existing(surface, "--surface"))
    return {k: v for k, v in given.items() if v is not None}


def _with_request_file(request_file: Path | None, options: dict[str, Any]) -> dict[str, Any]:
    if request_file is None:
        return options
    return {**read_request_file(_existing(request_file, "--request")), **options}


def _existing(path: Path, option: str) -> Path:
    resolved = path.expanduser().resolve()
    if not resolved.exists():
        raise BadRequest(f"{path} does not exist", where=option, fix="give the path of your dataset "
                         "(a metadata .csv/.json/.jsonl, a folder of clips, or a .precomputed folder)")
    return resolved


def _open(workspace: Path | None, create: bool = True) -> tuple[Workspace, Store | None]:
    ws = Workspace.at(workspace)
    if not create and not ws.db_file.exists():
        return ws, None
    ws.create()
    return ws, Store.open(ws.db_file)


def _prepare_run(ws: Workspace, store: Store, run_name: str | None, options: dict[str, Any]) -> tuple[Run, RunRequest]:
    """Create the run, or update an existing one's run.yaml with the options given."""
    existing = store.get_run(run_name) if run_name else None
    if existing is None:
        if "dataset" not in options:
            raise BadRequest("A new run needs a dataset", where="--dataset",
                             fix="pass --dataset PATH (or --run NAME of an existing run)")
        request = build_request(options)
        name = run_name or default_run_name(request)
        paths = ws.run(name)
        if store.get_run(name) is None:
            save_request(paths.request_file, request, ws.root)
            return store.create_run(name, request.model_dump(mode="json")), request
        existing = store.get_run(name)
    paths = ws.run(existing.name)
    request = load_request(paths.request_file)
    if options:
        request = build_request({**request.model_dump(exclude_none=True), **options})
        save_request(paths.request_file, request, ws.root)
    return existing, request


def _drive(ws: Workspace, store: Store, run: Run, request: RunRequest, approve: bool,
           options: dict[str, Any] | None = None) -> int:
    from phases import PHASES  # the registry is handed to the engine here, not imported by it

    def on_event(message: str, level: str, phase: str | None) -> None:
        print_event(out if level in ("info", "result") else err, message, level, phase)

    store.update_request(run.id, request.model_dump(mode="json"))
    backend = make_backend(request.backend, trainer_root=request.trainer_root, surface=request.surface,
                           assume_gpu=request.assume_gpu, memory_scale=request.reference_memory_scale)
    bar = TrainingProgressBar(out)
    runner = Runner(store, ws, PHASES, backend=backend, on_event=on_event,
                    options={**(options or {}), "on_progress": bar})
    try:
        report = runner.drive(run, request)
        if report.outcome is Outcome.AWAITING_APPROVAL and approve:
            subject, _ = approve_plan(store, run, approved_by="run --approve")
            out.print(f"Plan {subject[:19]}… approved by --approve.", markup=False)
            report = runner.drive(run, request)
    finally:
        bar.close()
    target = f"--workspace {ws.root} --run {run.name}"
    if report.outcome is Outcome.AWAITING_APPROVAL:
        out.print(f"Stopped at the approval gate. Read {ws.run(run.name).plan_file}, then:", markup=False)
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


@app.command()
def run(
    workspace: WorkspaceOpt = None,
    run_name: RunOpt = None,
    request_file: RequestFileOpt = None,
    dataset: Annotated[Path | None, typer.Option(help="Metadata file, clips folder or .precomputed folder.")] = None,
    mode: Annotated[str | None, typer.Option(help="t2v, i2v, v2v, a2v, v2a, t2a, a2a, av2av, "
                                             "video-extend, video-suffix, video-inpaint, video-outpaint, "
                                             "audio-extend, audio-suffix, audio-inpaint.")] = None,
    training_mode: Annotated[str | None, typer.Option(help="lora or full.")] = None,
    strategy: Annotated[str | None, typer.Option(help="single, mixed or chain.")] = None,
    buckets: Annotated[str | None, typer.Option(help='Resolution buckets "WxHxF;WxHxF".')] = None,
    rank: Annotated[int | None, typer.Option(help="LoRA rank (alpha = rank).")] = None,
    steps: Annotated[int | None, typer.Option(help="Optimizer steps per stage.")] = None,
    learning_rate: Annotated[float | None, typer.Option(help="Learning rate (first stage).")] = None,
    effective_batch: Annotated[int | None, typer.Option(help="Samples per optimizer step, all GPUs.")] = None,
    trigger: Annotated[str | None, typer.Option(help="Trigger word.")] = None,
    trainer_root: Annotated[Path | None, typer.Option(help="LTX-2 checkout (default $LTX2_ROOT).")] = None,
    model_path: Annotated[str | None, typer.Option(help="Local LTX checkpoint .safetensors.")] = None,
    text_encoder_path: Annotated[str | None, typer.Option(help="Local Gemma text-encoder folder.")] = None,
    backend: Annotated[str | None, typer.Option(help="Trainer backend: ltx, reference or simulated.")] = None,
    surface: Annotated[Path | None, typer.Option(help="Cost surface YAML for --backend simulated.")] = None,
    assume_gpu: Annotated[str | None, typer.Option(help='Plan for "NAME,MEMORY_MIB[,COUNT]".')] = None,
    nvidia_smi: Annotated[str | None, typer.Option(help="nvidia-smi executable to use.")] = None,
    accept_risk: Annotated[bool | None, typer.Option("--accept-risk", help="Continue below 32 GB.")] = None,
    fresh_preprocess: Annotated[bool | None, typer.Option(
        "--fresh-preprocess", help="Ignore an existing .precomputed; preprocess into the run's folder.")] = None,
    headroom: Annotated[float | None, typer.Option(help="Autotune VRAM headroom (default 0.05).")] = None,
    processes: Annotated[int | None, typer.Option(help="Training processes (default: one per GPU).")] = None,
    checkpoint_interval: Annotated[int | None, typer.Option(help="Steps between checkpoints (default 250).")] = None,
    validation_interval: Annotated[int | None, typer.Option(help="Steps between validations (default 100).")] = None,
    approve: Annotated[bool, typer.Option("--approve", help="Approve the plan as soon as it is written.")] = False,
    detach: Annotated[bool, typer.Option("--detach", help="Return once training is launched.")] = False,
) -> int:
    """Create (or update) a run and drive it: probe, plan, then stop for approval."""
    options = _request_options(dataset, mode, training_mode, strategy, buckets, rank, steps, learning_rate,
                               effective_batch, trigger, trainer_root, model_path, text_encoder_path, backend,
                               assume_gpu, nvidia_smi, accept_risk, surface, fresh_preprocess, headroom, processes,
                               checkpoint_interval, validation_interval)
    ws, store = _open(workspace)
    run_row, request = _prepare_run(ws, store, run_name, _with_request_file(request_file, options))
    return _drive(ws, store, run_row, request, approve, {"detach": detach})


@app.command()
def init(
    workspace: WorkspaceOpt = None,
    run_name: RunOpt = None,
    request_file: RequestFileOpt = None,
    dataset: Annotated[Path | None, typer.Option(help="Metadata file, clips folder or .precomputed folder.")] = None,
    mode: Annotated[str | None, typer.Option(help="Training mode (see `run --help`).")] = None,
    strategy: Annotated[str | None, typer.Option(help="single, mixed or chain.")] = None,
    buckets: Annotated[str | None, typer.Option(help='Resolution buckets "WxHxF;WxHxF".')] = None,
) -> int:
    """Create a run and its run.yaml without running anything; edit run.yaml, then `resume`."""
    options = _request_options(dataset, mode, None, strategy, buckets, None, None, None, None, None, None,
                               None, None, None, None, None, None)
    ws, store = _open(workspace)
    if run_name and store.get_run(run_name):
        raise BadRequest(f"Run {run_name} already exists", where="--run", fix="choose another name or use `resume`")
    run_row, _ = _prepare_run(ws, store, run_name, _with_request_file(request_file, options))
    out.print(f"Created run {run_row.name}: {ws.run(run_row.name).request_file}", markup=False)
    return EXIT_OK


@app.command()
def resume(workspace: WorkspaceOpt = None, run_name: RunOpt = None,
           accept_risk: Annotated[bool | None, typer.Option("--accept-risk", help="Continue below 32 GB.")] = None,
           approve: Annotated[bool, typer.Option("--approve", help="Approve the plan once written.")] = False,
           detach: Annotated[bool, typer.Option("--detach", help="Return once training is launched.")] = False,
           apply_fix: Annotated[bool, typer.Option("--apply-fix", help="Apply the fix proposed for the last "
                                                   "failure (shown by status) before retrying.")] = False,
           ) -> int:
    """Continue a run where it stopped, re-running only what changed (run.yaml is re-read)."""
    ws, store = _open(workspace)
    name = run_name or _latest_run_name(store)
    if store.get_run(name) is None:
        raise BadRequest(f"No run named {name!r} in {ws.root}", where="--run", fix="see `ltx-pipeline status`")
    run_row, request = _prepare_run(ws, store, name, {"accept_risk": True} if accept_risk else {})
    return _drive(ws, store, run_row, request, approve, {"detach": detach, "apply_fix": apply_fix})


@app.command("approve")
def approve_cmd(workspace: WorkspaceOpt = None, run_name: RunOpt = None) -> int:
    """Approve the run's current plan.md (by its content hash) so heavy phases may run."""
    ws, store = _open(workspace)
    name = run_name or _latest_run_name(store)
    run_row = store.get_run(name)
    if run_row is None:
        raise BadRequest(f"No run named {name!r} in {ws.root}", where="--run", fix="see `ltx-pipeline status`")
    subject, new = approve_plan(store, run_row, approved_by="approve command")
    verb = "Approved" if new else "Already approved:"
    out.print(f"{verb} plan {subject[:19]}… of run {name}. Next: ltx-pipeline resume --workspace {ws.root} "
              f"--run {name}", markup=False)
    return EXIT_OK


@app.command()
def status(workspace: WorkspaceOpt = None, run_name: RunOpt = None,
           as_json: Annotated[bool, typer.Option("--json", help="Print JSON for scripts.")] = False) -> int:
    """Show every run and phase, the approval state and the next command (read-only, no lock)."""
    from ltx_pipeline.steps.follow import log_summary  # reads trainer logs; no torch or optuna

    ws, store = _open(workspace, create=False)
    report = status_report(store, ws, run_name, log_summary=log_summary)
    if run_name and not report["runs"]:
        raise BadRequest(f"No run named {run_name!r} in {ws.root}", where="--run", fix="omit --run to list all")
    print_json(out, report) if as_json else render_status(out, report)
    return EXIT_OK


app.command("stop")(stop_command)
app.command("demo")(demo_command)
app.command("validate")(validate_command)
app.command("command")(command_command)
app.add_typer(bench_app, name="bench")


def _latest_run_name(store: Store) -> str:
    runs = store.list_runs()
    if not runs:
        raise BadRequest("This workspace has no runs", where="--workspace", fix="start one with `ltx-pipeline run`")
    return max(runs, key=lambda r: r.updated_at).name
