"""``ltx-pipeline autotune-worker``: run another GPU host's share of a run's autotune sweep.

On a shared store (``--store postgresql+psycopg://…``) the run's driver queues the sweep's configs in
its Optuna study; a worker on another host with the same GPU model pops them, runs each as the driver
would and tells the results into the study, until the driver says the sweep is over (or, with
``--once``, after one trial). It never takes the run's driver lock. Refused, in one line: a store that
is not shared, a run with no autotune study yet, a host whose GPU model differs from the study's.
Registered by ``cli.app``; what it needs is imported when it runs.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, TypedDict

import typer

from ltx_pipeline.cli import Ending
from ltx_pipeline.cli.options import RunOpt, WorkspaceOpt

if TYPE_CHECKING:
    from ltx_pipeline.backends.base import TrainerBackend
    from ltx_pipeline.phase_context import LtxContext
    from ltx_pipeline.request import RunRequest
    from ltx_pipeline.store import Run, Store
    from ltx_pipeline.workspace import Workspace

__all__ = ["autotune_worker"]


class _HostGpu(TypedDict):
    """The GPU model this host's trials run on, and the indices they may use."""

    name: str
    indices: list[int]


def autotune_worker(
    workspace: WorkspaceOpt = None,
    run_name: RunOpt = None,
    once: Annotated[bool, typer.Option("--once", help="Run one trial, then stop.")] = False,
    assume_gpu: Annotated[str | None, typer.Option(help='Take this host\'s GPU for "NAME,MEMORY_MIB[,COUNT]" '
                                                   "(default: the run's, else nvidia-smi).")] = None,
    nvidia_smi: Annotated[str | None, typer.Option(help="nvidia-smi executable to use on this host.")] = None,
) -> Ending:
    """Pull queued trials of a run's autotune sweep from the shared store and run them on this host."""
    from ltx_pipeline.autotune import study as studies
    from ltx_pipeline.autotune.hosts import find_shared
    from ltx_pipeline.cli.console import out
    from ltx_pipeline.driving import open_workspace
    from ltx_pipeline.errors import BadInput, BadRequest
    from ltx_pipeline.store.location import is_sqlite, store_target
    from ltx_pipeline.workspace import DB_FILENAME, Workspace

    # Refused before anything is opened: a worker never creates a workspace or a store of its own.
    if is_sqlite(store_target(Workspace.at(workspace).root / DB_FILENAME)):
        raise BadInput("autotune-worker needs a shared store (--store postgresql+psycopg://…)", where="--store",
                       fix="pass the store the run's driver uses, e.g. --store postgresql+psycopg://user@host/db")
    root = Workspace.at(workspace).root
    if not root.is_dir():
        raise BadInput(f"No workspace folder at {root}", where="--workspace",
                       fix="pass the driver's workspace, mounted at the same path on this host")
    ws, store = open_workspace(workspace)
    assert store is not None
    if not run_name:
        raise BadRequest("autotune-worker needs the run it works for", where="--run", fix="pass --run NAME")
    run = store.get_run(run_name)
    if run is None:
        raise BadRequest(f"No run named {run_name!r} in the shared store", where="--run",
                         fix="see `ltx-pipeline status` on the driver's host")
    ctx, host_gpu = _context(ws, store, run, assume_gpu, nvidia_smi)
    study = find_shared(studies.storage_for(Path(ctx.workspace)), run_name)
    if study is None:
        raise BadInput(f"Run {run_name} has no autotune study on this store yet", where="autotune-worker",
                       fix=f"let the driver reach autotune (`ltx-pipeline resume --run {run_name}` on its host), "
                           "then start the worker")
    info = study.user_attrs["distributed"]
    if host_gpu["name"] != info["gpu"]:
        raise BadInput(f"This host's GPU is a {host_gpu['name']}, the sweep of run {run_name} measures a "
                       f"{info['gpu']}: its trials would not measure that GPU", where="autotune-worker",
                       fix=f"run the worker on a host with a {info['gpu']}")
    from ltx_pipeline.autotune.hosts import OVER
    from ltx_pipeline.autotune.shared_sweep import work

    if study.user_attrs.get(OVER) or study.user_attrs.get("finished"):
        out.print(f"The autotune sweep of run {run_name} is over: nothing to run.", markup=False)
        return Ending.DONE

    def say(message: str) -> None:
        out.print(message, markup=False)

    ran = work(ctx, study, once=once, say=say, gpu_indices=host_gpu["indices"])
    out.print(f"autotune-worker: {ran} trial(s) of run {run_name} ran on this host.", markup=False)
    return Ending.DONE


def _context(ws: Workspace, store: Store, run: Run, assume_gpu: str | None,
             nvidia_smi: str | None) -> tuple[LtxContext, _HostGpu]:
    """The run's context as the autotune phase sees it (no driver lock), and this host's GPU."""
    from ltx_pipeline.backends import make_backend
    from ltx_pipeline.cli.console import err, out
    from ltx_pipeline.cli.render import print_event
    from ltx_pipeline.engine import RunContext
    from ltx_pipeline.engine.journal import RunJournal
    from ltx_pipeline.engine.outputs import StoredOutputs
    from ltx_pipeline.engine.processes import host_id
    from ltx_pipeline.request import load_request
    from ltx_pipeline.store import saved_id

    paths = ws.run(run.name)
    request = load_request(paths.request_file)
    backend = make_backend(request.backend, trainer_root=request.trainer_root,
                           trainer_python=request.trainer_python, surface=request.surface,
                           assume_gpu=request.assume_gpu, memory_scale=request.reference_memory_scale)
    run_id = saved_id(run)
    upstream = {name: StoredOutputs(row.outputs, row.outputs_version)
                for name, row in store.latest_phase_runs(run_id).items()
                if row.status == "succeeded" and row.outputs is not None}
    host = host_id()

    def narrate(message: str, level: str) -> None:
        store.record_event(run_id, f"[{host}] {message}", phase="autotune", level=level)
        print_event(out if level == "info" else err, message, level, "autotune")

    ctx = RunContext(run_name=run.name, workspace=ws.root, paths=paths, request=request, upstream=upstream,
                     backend=backend, approved=True, _narrator=narrate, phase="autotune",
                     journal=RunJournal(store, run_id, "autotune"))
    return ctx, _host_gpu(request, backend, assume_gpu, nvidia_smi)


def _host_gpu(request: RunRequest, backend: TrainerBackend, assume_gpu: str | None,
              nvidia_smi: str | None) -> _HostGpu:
    """This host's GPU model and indices, found as the probe phase finds them (``--assume-gpu`` first)."""
    from ltx_pipeline.backends.simulated import SimulatedBackend
    from ltx_pipeline.errors import BadInput
    from ltx_pipeline.probing.gpus import assumed_probe, probe_gpus

    spec = assume_gpu or request.assume_gpu
    if spec:
        probe = assumed_probe(spec)
    elif isinstance(backend, SimulatedBackend):  # the cost surface's GPU: what its trials "run" on
        gpu = backend.surface.gpu
        probe = assumed_probe(f"{gpu.name},{gpu.memory_mib},{gpu.count}")
    else:
        probe = probe_gpus(nvidia_smi or request.nvidia_smi)
    if not probe.gpus:
        raise BadInput("No GPU is visible on this host", where="autotune-worker",
                       fix="run the worker on a GPU host (check nvidia-smi and CUDA_VISIBLE_DEVICES)")
    return {"name": probe.gpus[0].name, "indices": [g.index for g in probe.gpus]}
