"""The workflow commands: ``run``, ``init``, ``resume``, ``approve`` and ``status``.

Each translates its options into a request or a query, calls ``cli.driving`` or the engine, and
prints what comes back; registered on the app by ``cli.app``. Module level holds only the command
signatures (typer reads them to build the CLI); what a command needs is imported when it runs.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from ltx_pipeline.cli.options import RequestFileOpt, RunOpt, WorkspaceOpt
from ltx_pipeline.cli.run_help import (
    AUDIO,
    AUTOTUNE,
    BACKENDS,
    CAPTIONERS,
    MODE_NAMES,
    PANELS,
    STRATEGIES,
    TRAINING_MODES,
    VALIDATION_MEDIA,
    choices,
    default,
)

if TYPE_CHECKING:
    from ltx_pipeline.store import Store
    from ltx_pipeline.workspace import Workspace

# The engine, the store, backends and the request model are imported inside each command: a command
# loads only what it uses, so `status` and `--help` start in a fraction of the time (#16).

__all__ = ["approve", "init", "resume", "run", "status"]

_DATA, _TRAINING, _TRAINER = PANELS["data"], PANELS["training"], PANELS["trainer"]
_AUTOTUNE, _EVALUATION = PANELS["autotune"], PANELS["evaluation"]


def run(
    workspace: WorkspaceOpt = None,
    run_name: RunOpt = None,
    request_file: RequestFileOpt = None,
    dataset: Annotated[Path | None, typer.Option(help="Metadata file, clips folder or .precomputed folder.",
                                                 rich_help_panel=_DATA)] = None,
    mode: Annotated[str | None, typer.Option(metavar="<mode>", help="Training mode, one of "
                                             + ", ".join(MODE_NAMES) + "." + default("mode"),
                                             rich_help_panel=_TRAINING)] = None,
    training_mode: Annotated[str | None, typer.Option(metavar=choices(TRAINING_MODES), help="A LoRA, or a full "
                                                      "fine-tune." + default("training_mode"),
                                                      rich_help_panel=_TRAINING)] = None,
    strategy: Annotated[str | None, typer.Option(metavar=choices(STRATEGIES), help="One bucket, several mixed in "
                                                 "one training, or one stage per bucket." + default("strategy"),
                                                 rich_help_panel=_TRAINING)] = None,
    buckets: Annotated[str | None, typer.Option(help='Resolution buckets "WxHxF;WxHxF".' + default("buckets"),
                                                rich_help_panel=_TRAINING)] = None,
    rank: Annotated[int | None, typer.Option(help="LoRA rank (alpha = rank)." + default("rank"),
                                             rich_help_panel=_TRAINING)] = None,
    steps: Annotated[int | None, typer.Option(help="Optimizer steps per stage." + default("steps"),
                                              rich_help_panel=_TRAINING)] = None,
    learning_rate: Annotated[float | None, typer.Option(help="Learning rate (first stage)."
                                                        + default("learning_rate"), rich_help_panel=_TRAINING)] = None,
    effective_batch: Annotated[int | None, typer.Option(help="Samples per optimizer step, all GPUs."
                                                        + default("effective_batch"),
                                                        rich_help_panel=_TRAINING)] = None,
    trigger: Annotated[str | None, typer.Option(help="Trigger word (default: none).", rich_help_panel=_TRAINING)
                       ] = None,
    trainer_root: Annotated[Path | None, typer.Option(help="LTX-2 checkout." + default("trainer_root"),
                                                      rich_help_panel=_TRAINER)] = None,
    trainer_python: Annotated[Path | None, typer.Option(help="Python of an environment where ltx-trainer is "
                                                        "installed (venv or conda): runs the trainer's scripts "
                                                        "instead of `uv run`.", rich_help_panel=_TRAINER)] = None,
    model_path: Annotated[str | None, typer.Option(help="Local LTX checkpoint .safetensors.",
                                                   rich_help_panel=_TRAINER)] = None,
    text_encoder_path: Annotated[str | None, typer.Option(help="Local Gemma text-encoder folder.",
                                                          rich_help_panel=_TRAINER)] = None,
    backend: Annotated[str | None, typer.Option(metavar=choices(BACKENDS), help="Trainer backend: the LTX-2 "
                                                "trainer, the toy reference trainer, or a simulated one."
                                                + default("backend"), rich_help_panel=_TRAINER)] = None,
    surface: Annotated[Path | None, typer.Option(help="Cost surface YAML for --backend simulated.",
                                                 rich_help_panel=_TRAINER)] = None,
    assume_gpu: Annotated[str | None, typer.Option(help='Plan for "NAME,MEMORY_MIB[,COUNT]" instead of the GPUs '
                                                   "found.", rich_help_panel=_TRAINER)] = None,
    nvidia_smi: Annotated[str | None, typer.Option(help="nvidia-smi executable to use.", rich_help_panel=_TRAINER)
                          ] = None,
    accept_risk: Annotated[bool | None, typer.Option("--accept-risk", help="Continue below 32 GB.",
                                                     rich_help_panel=_TRAINER)] = None,
    fresh_preprocess: Annotated[bool | None, typer.Option(
        "--fresh-preprocess", help="Ignore an existing .precomputed; preprocess into the run's folder.",
        rich_help_panel=_DATA)] = None,
    headroom: Annotated[float | None, typer.Option(help="Autotune VRAM headroom: peak VRAM stays under capacity x "
                                                   "(1 - headroom)." + default("headroom"),
                                                   rich_help_panel=_AUTOTUNE)] = None,
    autotune: Annotated[str | None, typer.Option(metavar=choices(AUTOTUNE), help="on: sweep for the fastest config "
                                                 "that fits; off: train with the plan's baseline config as is."
                                                 + default("autotune"), rich_help_panel=_AUTOTUNE)] = None,
    audio: Annotated[str | None, typer.Option(metavar=choices(AUDIO), help="auto: train audio when every clip has "
                                              "sound, video only when none has; on: audio and video, silent clips "
                                              "left out; off: video only on every clip (t2v, i2v, video-extend, "
                                              "video-suffix)." + default("audio"), rich_help_panel=_DATA)] = None,
    validation_media: Annotated[str | None, typer.Option(
        metavar=choices(VALIDATION_MEDIA),
        help="Where validation conditions (first frame, audio, reference, mask) come from when no row of your "
             "data can give them: auto: from your rows, else the plan stops and asks; without: the prompts alone; "
             "none: no validation during training." + default("validation_media"),
        rich_help_panel=_TRAINING)] = None,
    processes: Annotated[int | None, typer.Option(help="Training processes per node." + default("processes"),
                                                  rich_help_panel=_TRAINER)] = None,
    nodes: Annotated[int | None, typer.Option(help="Machines training together; this one is rank 0, the others "
                                              "run `ltx-pipeline node-launch`." + default("nodes"),
                                              rich_help_panel=_TRAINER)] = None,
    main_ip: Annotated[str | None, typer.Option(help="This (rank-0) machine's address, reachable from the other "
                                                "nodes (needed with --nodes 2 or more).",
                                                rich_help_panel=_TRAINER)] = None,
    main_port: Annotated[int | None, typer.Option(help="Rendezvous port on this machine." + default("main_port"),
                                                  rich_help_panel=_TRAINER)] = None,
    checkpoint_interval: Annotated[int | None, typer.Option(help="Steps between checkpoints."
                                                            + default("checkpoint_interval"),
                                                            rich_help_panel=_TRAINING)] = None,
    validation_interval: Annotated[int | None, typer.Option(help="Steps between validations."
                                                            + default("validation_interval"),
                                                            rich_help_panel=_TRAINING)] = None,
    captioner: Annotated[str | None, typer.Option(metavar=choices(CAPTIONERS), help="Captions for clips without "
                                                  "one: offline (measured facts), qwen_omni (a local Qwen-Omni "
                                                  "through vLLM) or gemini_flash." + default("captioner"),
                                                  rich_help_panel=_DATA)] = None,
    vllm_url: Annotated[str | None, typer.Option(help="qwen_omni's vLLM server (the trainer script's default)."
                                                 + default("vllm_url"), rich_help_panel=_DATA)] = None,
    holdout: Annotated[int | None, typer.Option(help="Samples to hold out (0: none)." + default("holdout"),
                                                rich_help_panel=_DATA)] = None,
    holdout_file: Annotated[Path | None, typer.Option(help="Your own holdout rows (.json/.jsonl), used as "
                                                      "they are.", rich_help_panel=_DATA)] = None,
    split_over: Annotated[float | None, typer.Option(help="Deprecated, ignored: every video is looked at for "
                                                     "scene cuts, whatever its length.", rich_help_panel=_DATA)
                          ] = None,
    min_scene: Annotated[float | None, typer.Option(help="Deprecated, ignored: scenes shorter than the smallest "
                                                    "bucket are dropped and listed.", rich_help_panel=_DATA)] = None,
    eval_prompt: Annotated[list[str] | None, typer.Option(
        "--eval-prompt", help="An out-of-distribution prompt for the evaluation renders (repeat for more; "
        "default: 3 generic prompts with the trigger word).", rich_help_panel=_EVALUATION)] = None,
    skip_eval: Annotated[bool | None, typer.Option("--skip-eval", help="Finish without the evaluation "
                                                   "renders (recorded as skipped).",
                                                   rich_help_panel=_EVALUATION)] = None,
    slurm: Annotated[bool | None, typer.Option("--slurm", help="Submit each training stage to SLURM (sbatch of "
                                               "<run>/slurm/train*.sbatch) instead of launching it here.",
                                               rich_help_panel=_TRAINER)] = None,
    slurm_arg: Annotated[list[str] | None, typer.Option(
        "--slurm-arg", help="An #SBATCH option for the job script, verbatim (repeat for more), e.g. "
        "--slurm-arg=--partition=gpu --slurm-arg=--time=24:00:00.", rich_help_panel=_TRAINER)] = None,
    approve: Annotated[bool, typer.Option("--approve", help="Approve every gate (the plan, then the captions) "
                                          "as soon as it is reached.")] = False,
    detach: Annotated[bool, typer.Option("--detach", help="Return once training is launched.")] = False,
) -> int:
    """Create (or update) a run and drive it: probe, plan, then stop for approval.

    Options left out keep run.yaml's value for an existing run; the defaults shown are a new run's. Values
    are checked with the whole request, every problem reported at once.
    """
    from ltx_pipeline.cli.driving import drive_run, find_workspace, prepare_run, with_request_file
    from ltx_pipeline.cli.request_options import RequestOptions
    from ltx_pipeline.engine.options import RunOptions

    _deprecated_scene_options(split_over, min_scene)
    given = RequestOptions(
        dataset=dataset, mode=mode, training_mode=training_mode, strategy=strategy, buckets=buckets, rank=rank,
        steps=steps, learning_rate=learning_rate, effective_batch=effective_batch, trigger=trigger,
        trainer_root=trainer_root, trainer_python=trainer_python, model_path=model_path,
        text_encoder_path=text_encoder_path, backend=backend, surface=surface, assume_gpu=assume_gpu,
        nvidia_smi=nvidia_smi, accept_risk=accept_risk, fresh_preprocess=fresh_preprocess, headroom=headroom,
        autotune=autotune, audio=audio, validation_media=validation_media, processes=processes, nodes=nodes,
        main_ip=main_ip, main_port=main_port,
        checkpoint_interval=checkpoint_interval, validation_interval=validation_interval, captioner=captioner,
        vllm_url=vllm_url, holdout=holdout, holdout_file=holdout_file, eval_prompts=eval_prompt,
        skip_eval=skip_eval, slurm=slurm, slurm_args=slurm_arg).given()
    ws, found = find_workspace(workspace)  # nothing is written before the request is accepted
    store, run_row, request = prepare_run(ws, found, run_name, with_request_file(request_file, given))
    return drive_run(ws, store, run_row, request, approve, RunOptions(detach=detach))


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
) -> int:
    """Create a run and its run.yaml without running anything; edit run.yaml, then `resume`."""
    from ltx_pipeline.cli.console import out
    from ltx_pipeline.cli.driving import find_workspace, prepare_run, with_request_file
    from ltx_pipeline.cli.request_options import RequestOptions
    from ltx_pipeline.errors import EXIT_OK, BadRequest

    options = RequestOptions(dataset=dataset, mode=mode, strategy=strategy, buckets=buckets).given()
    ws, store = find_workspace(workspace)  # nothing is written before the request is accepted
    if run_name and store is not None and store.get_run(run_name):
        raise BadRequest(f"Run {run_name} already exists", where="--run", fix="choose another name or use `resume`")
    _, run_row, _ = prepare_run(ws, store, run_name, with_request_file(request_file, options), check_gpu=False)
    out.print(f"Created run {run_row.name}: {ws.run(run_row.name).request_file}", markup=False)
    return EXIT_OK


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
           ) -> int:
    """Continue a run where it stopped, re-running only what changed (run.yaml is re-read)."""
    from ltx_pipeline.cli.driving import drive_run, find_workspace, latest_run_name, prepare_run
    from ltx_pipeline.engine.options import RunOptions
    from ltx_pipeline.errors import BadRequest

    ws, found = find_workspace(workspace)
    name = run_name or latest_run_name(found)
    if found is None or found.get_run(name) is None:
        raise BadRequest(f"No run named {name!r} in {ws.root}", where="--run", fix="see `ltx-pipeline status`")
    updates: dict[str, object] = {"accept_risk": True} if accept_risk else {}
    updates.update(_eval_options(eval_prompt, skip_eval))
    store, run_row, request = prepare_run(ws, found, name, updates)
    return drive_run(ws, store, run_row, request, approve,
                     RunOptions(detach=detach, apply_fix=apply_fix, restart_training=restart_training,
                                replan=replan))


def approve(workspace: WorkspaceOpt = None, run_name: RunOpt = None) -> int:
    """Approve the run's current plan.md (by its content hash) so heavy phases may run."""
    from ltx_pipeline.cli.console import out
    from ltx_pipeline.cli.driving import find_workspace, gate_name, latest_run_name
    from ltx_pipeline.engine import approve_plan
    from ltx_pipeline.errors import EXIT_OK, BadRequest
    from ltx_pipeline.store import saved_id

    ws, store = find_workspace(workspace)
    name = run_name or latest_run_name(store)
    run_row = store.get_run(name) if store is not None else None
    if store is None or run_row is None:
        raise BadRequest(f"No run named {name!r} in {ws.root}", where="--run", fix="see `ltx-pipeline status`")
    subject, new = approve_plan(store, run_row, approved_by="approve command")
    rows = store.latest_phase_runs(saved_id(run_row)).values()
    phase = next((r.phase for r in rows if r.approval_subject == subject), None)
    verb = "Approved" if new else "Already approved:"
    out.print(f"{verb} {gate_name(phase).lower()} {subject[:19]}… of run {name}. Next: ltx-pipeline resume "
              f"--workspace {ws.root} --run {name}", markup=False)
    return EXIT_OK


def status(workspace: WorkspaceOpt = None, run_name: RunOpt = None,
           as_json: Annotated[bool, typer.Option("--json", help="Print JSON for scripts.")] = False) -> int:
    """Show every run and phase, the approval state and the next command (read-only, no lock)."""
    from ltx_pipeline.cli.console import out
    from ltx_pipeline.cli.render import print_json, render_status
    from ltx_pipeline.errors import EXIT_OK, BadRequest
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
    return EXIT_OK



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
