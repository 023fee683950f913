"""The workflow commands: ``run``, ``init``, ``resume``, ``approve`` and ``status``.

Each translates its options into a request or a query, calls ``ltx_pipeline.driving`` (every decision
about a run's state is there) or reads the status, prints what comes back and returns how it ended (an
``Ending``, which ``cli.main`` turns into the exit code); registered on the app by ``cli.app``. Module
level holds only the command signatures (typer reads them to build the CLI, their options in
``cli.run_options``); what a command needs is imported when it runs.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from ltx_pipeline.cli import Ending
from ltx_pipeline.cli.options import QueueOpt, RequestFileOpt, RunOpt, WorkspaceOpt
from ltx_pipeline.cli.run_help import STRATEGIES, choices, default
from ltx_pipeline.cli.run_options import (
    AcceptRiskOpt,
    ApproveOpt,
    AssumeGpuOpt,
    AudioOpt,
    AutotuneOpt,
    AutotuneParallelOpt,
    BackendOpt,
    BucketsOpt,
    CaptionerOpt,
    CheckpointIntervalOpt,
    ConfigSetOpt,
    DatasetOpt,
    DetachOpt,
    EffectiveBatchOpt,
    EvalCheckpointsOpt,
    EvalPromptOpt,
    FreshPreprocessOpt,
    HeadroomOpt,
    HoldoutFileOpt,
    HoldoutLossOpt,
    HoldoutOpt,
    LearningRateOpt,
    MainIpOpt,
    MainPortOpt,
    MinSceneOpt,
    ModelPathOpt,
    ModeOpt,
    NodesOpt,
    NvidiaSmiOpt,
    PreprocessProcessesOpt,
    ProcessesOpt,
    PushToHubOpt,
    RankOpt,
    SkipEvalOpt,
    SlurmArgOpt,
    SlurmOpt,
    SplitOverOpt,
    StepsOpt,
    StrategyOpt,
    SurfaceOpt,
    TextEncoderPathOpt,
    TrainerPythonOpt,
    TrainerRootOpt,
    TrainingModeOpt,
    TriggerOpt,
    ValidationIntervalOpt,
    ValidationMediaOpt,
    VllmUrlOpt,
)

if TYPE_CHECKING:
    from ltx_pipeline.store import Store
    from ltx_pipeline.workspace import Workspace

# The engine, the store, backends and the request model are imported inside each command: a command
# loads only what it uses, so `status` and `--help` start in a fraction of the time (#16).

__all__ = ["approve", "init", "resume", "run", "status"]


def run(  # one option per request field (``cli.run_options``); options left out are None: run.yaml's value stands
    workspace: WorkspaceOpt = None, run_name: RunOpt = None, request_file: RequestFileOpt = None,
    dataset: DatasetOpt = None, mode: ModeOpt = None, training_mode: TrainingModeOpt = None,
    strategy: StrategyOpt = None, buckets: BucketsOpt = None, rank: RankOpt = None, steps: StepsOpt = None,
    learning_rate: LearningRateOpt = None, effective_batch: EffectiveBatchOpt = None, trigger: TriggerOpt = None,
    trainer_root: TrainerRootOpt = None, trainer_python: TrainerPythonOpt = None, model_path: ModelPathOpt = None,
    text_encoder_path: TextEncoderPathOpt = None, backend: BackendOpt = None, surface: SurfaceOpt = None,
    assume_gpu: AssumeGpuOpt = None, nvidia_smi: NvidiaSmiOpt = None, accept_risk: AcceptRiskOpt = None,
    fresh_preprocess: FreshPreprocessOpt = None, preprocess_processes: PreprocessProcessesOpt = None,
    headroom: HeadroomOpt = None, autotune: AutotuneOpt = None,
    autotune_parallel: AutotuneParallelOpt = None,
    audio: AudioOpt = None, validation_media: ValidationMediaOpt = None, processes: ProcessesOpt = None,
    nodes: NodesOpt = None, main_ip: MainIpOpt = None, main_port: MainPortOpt = None,
    checkpoint_interval: CheckpointIntervalOpt = None, validation_interval: ValidationIntervalOpt = None,
    captioner: CaptionerOpt = None, vllm_url: VllmUrlOpt = None, holdout: HoldoutOpt = None,
    holdout_file: HoldoutFileOpt = None, split_over: SplitOverOpt = None, min_scene: MinSceneOpt = None,
    eval_prompt: EvalPromptOpt = None, skip_eval: SkipEvalOpt = None, holdout_loss: HoldoutLossOpt = None,
    eval_checkpoints: EvalCheckpointsOpt = None, push_to_hub: PushToHubOpt = None,
    slurm: SlurmOpt = None,
    slurm_arg: SlurmArgOpt = None, config_set: ConfigSetOpt = None, approve: ApproveOpt = False,
    detach: DetachOpt = False, queue: QueueOpt = False,
) -> Ending:
    """Create (or update) a run and drive it: probe, plan, then stop for approval.

    Options left out keep run.yaml's value for an existing run; the defaults shown are a new run's. Values
    are checked with the whole request, every problem reported at once.
    """
    from ltx_pipeline.cli.request_options import RequestOptions, with_request_file
    from ltx_pipeline.cli.watch import watch_drive
    from ltx_pipeline.driving import find_workspace, prepare_run
    from ltx_pipeline.engine.options import RunOptions

    _deprecated_scene_options(split_over, min_scene)
    given = RequestOptions(
        dataset=dataset, mode=mode, training_mode=training_mode, strategy=strategy, buckets=buckets, rank=rank,
        steps=steps, learning_rate=learning_rate, effective_batch=effective_batch, trigger=trigger,
        trainer_root=trainer_root, trainer_python=trainer_python, model_path=model_path,
        text_encoder_path=text_encoder_path, backend=backend, surface=surface, assume_gpu=assume_gpu,
        nvidia_smi=nvidia_smi, accept_risk=accept_risk, fresh_preprocess=fresh_preprocess,
        preprocess_processes=preprocess_processes, headroom=headroom,
        autotune=autotune, autotune_parallel=autotune_parallel,
        audio=audio, validation_media=validation_media, processes=processes, nodes=nodes,
        main_ip=main_ip, main_port=main_port,
        checkpoint_interval=checkpoint_interval, validation_interval=validation_interval, captioner=captioner,
        vllm_url=vllm_url, holdout=holdout, holdout_file=holdout_file, eval_prompts=eval_prompt,
        skip_eval=skip_eval, holdout_loss=holdout_loss, eval_checkpoints=eval_checkpoints, push_to_hub=push_to_hub,
        slurm=slurm,
        slurm_args=slurm_arg, config_set=config_set).given()
    ws, found = find_workspace(workspace)  # nothing is written before the request is accepted
    store, run_row, request = prepare_run(ws, found, run_name, with_request_file(request_file, given))
    return watch_drive(ws, store, run_row, request, approve, RunOptions(detach=detach, queue=queue))


def _deprecated_scene_options(split_over: float | None, min_scene: float | None) -> None:
    """--split-over and --min-scene no longer mean anything: say so, and leave the request as it is."""
    from ltx_pipeline.cli.console import err

    if split_over is not None:
        err.print("warning: --split-over is deprecated and ignored: every video is now looked at for scene cuts, "
                  "whatever its length, and plan.md lists what was found; drop the option.", markup=False)
    if min_scene is not None:
        err.print("warning: --min-scene is deprecated and ignored: cuts are never merged away; scenes shorter than "
                  "the smallest bucket's frames are dropped and listed in plan.md; drop the option.", markup=False)


def init(
    workspace: WorkspaceOpt = None,
    run_name: RunOpt = None,
    request_file: RequestFileOpt = None,
    dataset: Annotated[Path | None, typer.Option(help="Metadata file, clips folder or .precomputed folder.")] = None,
    mode: Annotated[str | None, typer.Option(metavar="<mode>", help="Training mode (see `run --help`)."
                                             + default("mode"))] = None,
    strategy: Annotated[str | None, typer.Option(metavar=choices(STRATEGIES), help="One bucket, several mixed in "
                                                 "one training, or one stage per bucket." + default("strategy"))
                        ] = None,
    buckets: Annotated[str | None, typer.Option(help='Resolution buckets "WxHxF;WxHxF".')] = None,
) -> Ending:
    """Create a run and its run.yaml without running anything; edit run.yaml, then `resume`."""
    from ltx_pipeline.cli.console import out
    from ltx_pipeline.cli.request_options import RequestOptions, with_request_file
    from ltx_pipeline.driving import create_run, find_workspace

    options = RequestOptions(dataset=dataset, mode=mode, strategy=strategy, buckets=buckets).given()
    ws, store = find_workspace(workspace)  # nothing is written before the request is accepted
    created = create_run(ws, store, run_name, with_request_file(request_file, options))
    out.print(f"Created run {created.run.name}: {ws.run(created.run.name).request_file}", markup=False)
    return Ending.DONE


def resume(workspace: WorkspaceOpt = None, run_name: RunOpt = None,
           accept_risk: Annotated[bool | None, typer.Option("--accept-risk", help="Continue below 32 GB.")] = None,
           approve: Annotated[bool, typer.Option("--approve", help="Approve the plan once written.")] = False,
           detach: Annotated[bool, typer.Option("--detach", help="Return once training is launched.")] = False,
           apply_fix: Annotated[bool, typer.Option("--apply-fix", help="Apply the fix proposed for the last "
                                                   "failure (shown by status) before retrying.")] = False,
           restart_training: Annotated[bool, typer.Option(
               "--restart-training", help="Train the unfinished stage again from step 0 into a fresh output "
               "folder; its old output folder (checkpoints, samples) is kept beside it.")] = False,
           eval_prompt: Annotated[list[str] | None, typer.Option(
               "--eval-prompt", help="Replace the out-of-distribution evaluation prompts (repeat for more); "
               "saved in run.yaml.")] = None,
           skip_eval: Annotated[bool | None, typer.Option("--skip-eval/--no-skip-eval", help="Skip (or bring back) "
                                                          "the evaluation renders; saved in run.yaml.")] = None,
           replan: Annotated[bool, typer.Option(
               "--replan", help="After an upgrade: redo what this version would do otherwise (fingerprints an "
               "earlier version wrote compared strictly; phases it added run on a finished run).")] = False,
           queue: QueueOpt = False) -> Ending:
    """Continue a run where it stopped, re-running only what changed (run.yaml is re-read)."""
    from ltx_pipeline.cli.watch import watch_drive
    from ltx_pipeline.driving import find_workspace, latest_run_name, resume_run
    from ltx_pipeline.engine.options import RunOptions

    ws, found = find_workspace(workspace)
    updates: dict[str, object] = {"accept_risk": True} if accept_risk else {}
    updates.update(_eval_options(eval_prompt, skip_eval))
    store, run_row, request = resume_run(ws, found, run_name or latest_run_name(found), updates)
    return watch_drive(ws, store, run_row, request, approve,
                       RunOptions(detach=detach, apply_fix=apply_fix, restart_training=restart_training,
                                  replan=replan, queue=queue))


def approve(workspace: WorkspaceOpt = None, run_name: RunOpt = None) -> Ending:
    """Approve the run's current plan.md (by its content hash) so heavy phases may run."""
    from ltx_pipeline.cli.console import out
    from ltx_pipeline.driving import approve as approve_gate
    from ltx_pipeline.driving import existing_run, find_workspace, latest_run_name

    ws, found = find_workspace(workspace)
    name = run_name or latest_run_name(found)
    store, run_row = existing_run(ws, found, name)
    approval = approve_gate(ws, store, run_row, approved_by="approve command")
    verb = "Approved" if approval.new else "Already approved:"
    out.print(f"{verb} {approval.gate.name.lower()} {approval.gate.subject[:19]}… of run {name}. Next: ltx-pipeline "
              f"resume --workspace {ws.root} --run {name}", markup=False)
    return Ending.DONE


def status(workspace: WorkspaceOpt = None, run_name: RunOpt = None,
           as_json: Annotated[bool, typer.Option("--json", help="Print JSON for scripts.")] = False) -> Ending:
    """Show every run and phase, the approval state and the next command (read-only, no lock)."""
    from ltx_pipeline.cli.console import out
    from ltx_pipeline.cli.render import print_json, render_status
    from ltx_pipeline.errors import BadRequest
    from ltx_pipeline.status.report import status_report
    from ltx_pipeline.store.reader import StoreReader
    from ltx_pipeline.training import readers as trainer_readers
    from ltx_pipeline.workspace import Workspace

    ws = Workspace.at(workspace)
    # The standard library's sqlite3 reads a store at the newest schema; an older one goes through
    # the full store, which upgrades it (what status always did).
    target = ws.store
    store = (StoreReader.open(target) if isinstance(target, Path) else None) or _full_store(ws)
    report = status_report(store, ws, run_name, log_summary=trainer_readers.log_summary,
                           weights_files=trainer_readers.weights_files, gpus=trainer_readers.gpus_now)
    if run_name and not report["runs"]:
        raise BadRequest(f"No run named {run_name!r} in {ws.root}", where="--run", fix="omit --run to list all")
    print_json(out, report) if as_json else render_status(out, report)
    return Ending.DONE


def _full_store(ws: Workspace) -> Store | None:
    """The SQLAlchemy store (a server's, or a SQLite file at an older schema, which it upgrades), or None when
    the workspace has no database."""
    if not ws.has_store():
        return None
    from ltx_pipeline.store import Store

    return Store.open(ws.store)


def _eval_options(prompts: list[str] | None, skip: bool | None) -> dict[str, object]:
    """The evaluation's request fields given on the command line (absent ones keep run.yaml's)."""
    options: dict[str, object] = {}
    if prompts:
        options["eval_prompts"] = list(prompts)
    if skip is not None:
        options["skip_eval"] = skip
    return options
