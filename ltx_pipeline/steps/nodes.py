"""Multi-node training: rank 0's machine flags, the command every other node runs, and that command's work.

A run over ``--nodes N`` is launched by the engine on this machine as rank 0 (the train phase,
supervised and followed as any launch); each other node runs ``ltx-pipeline node-launch
--workspace W --run NAME --machine-rank R`` (a SLURM job's ``srun`` runs it on every node, with
the rank from ``SLURM_NODEID``). ``node-launch`` builds its node's launch from the run's validated
launch (the validate phase's outputs), validates the stage's config again exactly as it is now,
refuses one that differs from the config rank 0 is training with, and runs the trainer in the
foreground, its output on stdout and in ``<run>/logs/…node<R>.log``. ``--prepare`` applies the
train phase's resume rule once (newest complete checkpoint pair -> ``model.load_checkpoint``), so
a requeued job continues instead of training from step 0. The workspace must be the same path on
every node (a shared file system); only global rank 0 writes the outputs.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from ltx_pipeline.backends.base import DEFAULT_MAIN_PORT, LaunchSpec, Nodes
from ltx_pipeline.engine import slurm
from ltx_pipeline.engine.journal import ConfigChangedSinceValidation, RunJournal, ValidatedConfig
from ltx_pipeline.errors import BadInput, Refused
from ltx_pipeline.steps.resume import check_compatible, latest_pair, patch_resume
from ltx_pipeline.steps.validation import launch_target, validate_stage
from ltx_pipeline.yaml_io import load_yaml

__all__ = ["NodeRun", "node_launch_argv", "node_launch_printable", "node_log", "open_node_run", "rank_zero",
           "run_foreground"]

PROGRAM = "ltx-pipeline"
RANK_ENV = "SLURM_NODEID"  # the node's index within a SLURM allocation: its machine rank


#: What validate records as the main address of a SLURM job's nodes, known only once the job runs.
SLURM_MAIN_IP = "(the SLURM job's first node)"


def rank_zero(request: Any) -> Nodes | None:
    """This machine's place in the run's launch: rank 0 of ``request.nodes``; None for one node."""
    if request.nodes <= 1:
        return None
    # Under SLURM the job script finds the first node (scontrol) and passes it to every node-launch.
    main_ip = request.main_ip or (SLURM_MAIN_IP if request.slurm else "")
    return Nodes(request.nodes, 0, main_ip, request.main_port or DEFAULT_MAIN_PORT)


def node_launch_argv(workspace: Path, run: str, rank: int | None = None, nodes: Nodes | None = None) -> list[str]:
    """``ltx-pipeline node-launch`` for one node (no rank: the node takes it from ``SLURM_NODEID``)."""
    argv = [PROGRAM, "node-launch", "--workspace", str(workspace), "--run", run]
    if rank is not None:
        argv += ["--machine-rank", str(rank)]
    if nodes is not None:
        argv += ["--main-ip", nodes.main_ip, "--main-port", str(nodes.main_port)]
    return argv


def node_launch_printable(workspace: Path, run: str, rank: int | None = None, nodes: Nodes | None = None) -> str:
    """The same command, shlex-quoted, to print or record."""
    return shlex.join(node_launch_argv(workspace, run, rank, nodes))


def node_log(logs: Path, stage: int, stages: int, rank: int) -> Path:
    """``logs/train.node<R>.log`` (chained: ``train.stage-K.node<R>.log``), appended to by every launch."""
    name = "train" if stages == 1 else f"train.stage-{stage}"
    return logs / f"{name}.node{rank}.log"


@dataclass
class NodeRun:
    """A validated run seen from one node: its request, backend, validated launch and stored phase outputs."""

    workspace: Path
    name: str
    request: Any
    backend: Any
    outputs: dict[str, dict[str, Any]]  # succeeded phases' outputs, by phase
    store: Any
    run_id: int
    logs: Path

    @property
    def validate(self) -> dict[str, Any]:
        return self.outputs["validate"]

    @property
    def nodes(self) -> int:
        return int(self.validate.get("nodes", 1))

    def stage_index(self, requested: int | None) -> int:
        """The stage asked for, else the first whose final weights are not on disk.

        Raises:
            BadInput: no such stage, or every stage is trained already.
        """
        stages = [int(s["stage"]) for s in self.validate["stages"]]
        if requested is not None:
            if requested not in stages:
                raise BadInput(f"Run {self.name} has no stage {requested}", where="--stage",
                               fix=f"give one of {', '.join(map(str, stages))}")
            return requested
        for index in stages:
            if not self._final_weights(index).is_file():
                return index
        raise Refused(f"Every stage of run {self.name} is trained already", where="--run",
                      fix=f"see `ltx-pipeline status --workspace {self.workspace} --run {self.name}`")

    def config(self, stage: int) -> Path:
        return Path(self._entry("validate", stage)["config"])

    def output_dir(self, stage: int) -> Path:
        return Path(self._entry("config_patch", stage, key="configs")["output_dir"])

    def values(self, stage: int) -> dict[str, Any]:
        return load_yaml(self.config(stage).read_text(encoding="utf-8")) or {}

    def _final_weights(self, stage: int) -> Path:
        values = self.values(stage)
        steps = int((values.get("optimization") or {}).get("steps", 0))
        prefix = "lora" if (values.get("model") or {}).get("training_mode", "lora") == "lora" else "model"
        return self.output_dir(stage) / "checkpoints" / f"{prefix}_weights_step_{steps:05d}.safetensors"

    def _entry(self, phase: str, stage: int, key: str = "stages") -> dict[str, Any]:
        entries = self.outputs[phase][key]
        return next(e for e in entries if int(e.get("stage", e.get("index", 0))) == stage)

    # -- what a node does -----------------------------------------------------------------------

    def prepare(self, stage: int) -> list[str]:
        """The train phase's resume rule, once: patch the stage's config to its newest complete pair.

        Returns:
            What was done, one line each.
        """
        pair = latest_pair(self.output_dir(stage) / "checkpoints")
        if pair is None:
            return [f"Stage {stage} has no complete checkpoint pair: it trains from step 0."]
        step = check_compatible(pair, self.values(stage))
        lines = [f"{self.config(stage).name}: {r['path']} {r['old']} -> {r['new']} ({r['reason']})"
                 for r in patch_resume(self.config(stage), pair, workspace=self.workspace)]
        return [*lines, f"Stage {stage} resumes from its checkpoint at step {step} ({pair.weights.name})."]

    def validated(self, stage: int) -> ValidatedConfig:
        """The stage's config validated strictly, as it is now, for every process of every node."""
        data_stage = self._entry("data_check", stage)
        target = launch_target(self.outputs["probe"], self.outputs["data_check"], data_stage,
                               int(self.validate["num_processes"]))
        result = validate_stage(self.backend, self.config(stage), target, strict=True)
        return result.raise_if_failed(f"Stage {stage}'s config as this node would launch it")

    def refuse_other_config(self, stage: int, rank: int, validated: ValidatedConfig) -> None:
        """A node joins rank 0's running trainer only with the very config that trainer was launched with.

        Raises:
            Refused: the engine's rank 0 of this stage is running and this is rank 0 again, or the config
                file changed since rank 0's launch validated it.
        """
        rows = [r for r in self.store.processes(self.run_id, "train") if r.stage == stage]
        if not rows or rows[-1].status != "running" or not RunJournal.handle(rows[-1]).alive():
            return
        job = slurm.job_id_of(rows[-1].host)
        if job is not None and os.environ.get("SLURM_JOB_ID") == str(job):
            # One of the recorded job's own nodes, rank 0 included. Its batch step's --prepare may have moved
            # the config to the newest checkpoint since submission; validated() judged it strictly just now.
            return
        if rank == 0:
            raise Refused(f"Rank 0 of stage {stage} is running already (pid {rows[-1].pid} on {rows[-1].host}, "
                          "launched by the engine)", where="--machine-rank",
                          fix="start the other nodes with --machine-rank 1 and up")
        launched = rows[-1].config_sha256
        if launched and launched != validated.sha256:
            raise Refused(f"{validated.path} changed since rank 0 was launched with it ({launched[:19]}… -> "
                          f"{validated.sha256[:19]}…)", where=str(validated.path),
                          fix="restore the config rank 0 trains with, or stop the run and `ltx-pipeline resume` it")

    def launch(self, stage: int, rank: int, main_ip: str | None, main_port: int | None) -> LaunchSpec:
        """This node's trainer command: the validated launch with its own machine rank.

        Raises:
            BadInput: a rank outside the launch, or no address for rank 0.
        """
        count = self.nodes
        if not 0 <= rank < count:
            raise BadInput(f"Machine rank {rank} does not exist: run {self.name} trains on {count} node(s)",
                           where="--machine-rank", fix=f"give a rank from 0 to {count - 1}")
        nodes = None
        if count > 1:
            ip = main_ip or self.validate.get("main_ip")
            if not ip:
                raise BadInput("No address for the rank-0 node", where="--main-ip", fix="pass --main-ip IP")
            nodes = Nodes(count, rank, ip, int(main_port or self.validate.get("main_port") or DEFAULT_MAIN_PORT))
        per_node = int(self.validate.get("processes_per_node", self.validate["num_processes"]))
        spec: LaunchSpec = self.backend.train_command(self.config(stage), num_processes=per_node,
                                                      distributed=self.validate["distributed"], nodes=nodes)
        return spec


def open_node_run(workspace: Path | None, name: str) -> NodeRun:
    """The run as this node sees it, once validate has succeeded.

    Raises:
        BadInput: no such run, not validated yet, or run.yaml asks for other nodes than were validated.
    """
    from ltx_pipeline.backends import make_backend
    from ltx_pipeline.request import load_request
    from ltx_pipeline.store import Store, saved_id
    from ltx_pipeline.workspace import Workspace

    ws = Workspace.at(workspace)
    if not ws.has_store():
        raise BadInput(f"No workspace database in {ws.root}", where="--workspace",
                       fix="pass the run's workspace (the same path on every node)")
    store = Store.open(ws.store)
    run = store.get_run(name)
    if run is None:
        raise BadInput(f"No run named {name!r} in {ws.root}", where="--run", fix="see `ltx-pipeline status`")
    run_id = saved_id(run)
    latest = store.latest_phase_runs(run_id)
    validate = latest.get("validate")
    if validate is None or validate.status != "succeeded":
        state = "has not run" if validate is None else validate.status.replace("_", " ")
        raise BadInput(f"Run {name} is not validated (validate {state})", where="--run",
                       fix=f"approve its plan and `ltx-pipeline resume --workspace {ws.root} --run {name}` until "
                           "it has validated")
    outputs = {phase: dict(row.outputs) for phase, row in latest.items() if row.status in ("succeeded", "detached")}
    paths = ws.run(name)
    request = load_request(paths.request_file)
    validated_nodes = int(validate.outputs.get("nodes", 1))
    if request.nodes != validated_nodes:
        raise BadInput(f"run.yaml asks for {request.nodes} node(s) but the validated launch is for {validated_nodes}",
                       where=str(paths.request_file),
                       fix=f"`ltx-pipeline resume --workspace {ws.root} --run {name}` validates it again")
    backend = make_backend(request.backend, trainer_root=request.trainer_root,
                           trainer_python=request.trainer_python, surface=request.surface,
                           assume_gpu=request.assume_gpu, memory_scale=request.reference_memory_scale)
    return NodeRun(ws.root, name, request, backend, outputs, store, run_id, paths.logs)


def run_foreground(spec: LaunchSpec, log: Path | None, validated: ValidatedConfig, *,
                   stdout: IO[bytes] | None = None, header: str = "") -> int:
    """Run ``spec`` here, its output to ``stdout`` and appended to ``log``; the trainer's exit code.

    ``log`` None: stdout only (under ``srun``, whose ``--output`` already is the node's log file).

    SIGINT and SIGTERM (Ctrl-C, ``scancel``) are passed on to the trainer, which ends at a step boundary.

    Raises:
        Refused: the config changed between its validation and this launch.
    """
    sink = stdout or sys.stdout.buffer
    if log is not None:
        log.parent.mkdir(parents=True, exist_ok=True)
    try:
        validated.check_unchanged()
    except ConfigChangedSinceValidation as exc:
        raise Refused(f"Not launched: {exc}", where=str(validated.path),
                      fix="leave the run's config files alone while it runs, then run node-launch again") from None
    with log.open("ab") if log is not None else contextlib.nullcontext(sink) as handle:
        if log is not None:
            handle.write(f"=== ltx-pipeline node-launch at {time.strftime('%Y-%m-%d %H:%M:%S')}: {header}"
                         f"{spec.printable} ===\n".encode())
        child = subprocess.Popen(list(spec.argv), cwd=spec.cwd, env={**os.environ, **spec.env},  # noqa: S603
                                 stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        previous = {sig: signal.signal(sig, lambda signum, _frame: child.send_signal(signum))
                    for sig in (signal.SIGINT, signal.SIGTERM)}
        try:
            assert child.stdout is not None
            for line in iter(child.stdout.readline, b""):
                sink.write(line)
                sink.flush()
                if handle is not sink:
                    handle.write(line)
                    handle.flush()
            code = child.wait()
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)
        handle.write(f"=== trainer exited {code} ===\n".encode())
    return code if code >= 0 else 128 - code
