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
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, Protocol, TypeVar

from ltx_pipeline.backends.base import DEFAULT_MAIN_PORT, LaunchSpec, Nodes
from ltx_pipeline.checkpoints.discovery import latest_pair
from ltx_pipeline.checkpoints.files import resume_restores, weights_file_name
from ltx_pipeline.engine.journal import ConfigChangedSinceValidation, RunJournal, ValidatedConfig
from ltx_pipeline.engine.outputs import PhaseOutputs
from ltx_pipeline.errors import BadInput, Refused
from ltx_pipeline.ltx.trainer_config.view import TrainerConfigView, load_config_view
from ltx_pipeline.outputs.config_patch import ConfigPatchOutputs
from ltx_pipeline.outputs.data_check import DataCheckOutputs
from ltx_pipeline.outputs.probe import ProbeOutputs
from ltx_pipeline.outputs.validate import ValidateOutputs
from ltx_pipeline.training.resume import check_compatible, patch_resume
from ltx_pipeline.training.validation import stage_launch_target, validate_stage

if TYPE_CHECKING:
    from ltx_pipeline.backends.base import TrainerBackend
    from ltx_pipeline.request import RunRequest
    from ltx_pipeline.workspace import Workspace

__all__ = ["NodeRun", "PhaseRecord", "node_launch_argv", "node_launch_printable", "node_log", "open_node_run",
           "rank_zero", "run_foreground"]

PROGRAM = "ltx-pipeline"
RANK_ENV = "SLURM_NODEID"  # the node's index within a SLURM allocation: its machine rank


#: What validate records as the main address of a SLURM job's nodes, known only once the job runs.
SLURM_MAIN_IP = "(the SLURM job's first node)"


OutputsT = TypeVar("OutputsT", bound=PhaseOutputs)


class PhaseRecord(Protocol):
    """The newest attempt of one phase as the store holds it (a ``PhaseRun`` row, read by the caller)."""

    @property
    def status(self) -> str: ...

    @property
    def outputs(self) -> dict[str, Any]: ...

    @property
    def outputs_version(self) -> int: ...


@dataclass(frozen=True)
class ValidatedRun:
    """The typed outputs a node launches from: what probe, data check, config patch and validate stored."""

    probe: ProbeOutputs
    data_check: DataCheckOutputs
    config_patch: ConfigPatchOutputs
    validate: ValidateOutputs

    @classmethod
    def read(cls, latest: Mapping[str, PhaseRecord]) -> ValidatedRun:
        """From the newest attempt of each phase (validate has succeeded, so the ones before it have too)."""
        def typed(kind: type[OutputsT]) -> OutputsT:
            row = latest[kind.PHASE]
            return kind.from_stored(row.outputs, row.outputs_version)

        return cls(typed(ProbeOutputs), typed(DataCheckOutputs), typed(ConfigPatchOutputs), typed(ValidateOutputs))


def rank_zero(request: RunRequest) -> Nodes | None:
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
    """A validated run seen from one node: its request, backend, validated launch and stored phase outputs.

    It reads the run's train processes through ``journal``; the caller opened the store.
    """

    workspace: Path
    name: str
    request: RunRequest
    backend: TrainerBackend
    outputs: ValidatedRun  # the succeeded phases' typed outputs it launches from
    journal: RunJournal  # of the train phase
    logs: Path

    @property
    def validate(self) -> ValidateOutputs:
        return self.outputs.validate

    @property
    def nodes(self) -> int:
        return self.validate.node_count

    def stage_index(self, requested: int | None) -> int:
        """The stage asked for, else the first whose final weights are not on disk.

        Raises:
            BadInput: no such stage, or every stage is trained already.
        """
        stages = [s.stage for s in self.validate.stages]
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
        return Path(next(s.config for s in self.validate.stages if s.stage == stage))

    def output_dir(self, stage: int) -> Path:
        patched = next(c for c in self.outputs.config_patch.configs if c.stage == stage)
        if patched.output_dir is None:  # a run configured before output folders were recorded
            raise BadInput(f"Run {self.name} was configured by an older ltx-pipeline that did not record stage "
                           f"{stage}'s output folder", where="--run",
                           fix=f"`ltx-pipeline resume --workspace {self.workspace} --run {self.name}` configures it "
                               "again")
        return Path(patched.output_dir)

    def view(self, stage: int) -> TrainerConfigView:
        return load_config_view(self.config(stage))

    def _final_weights(self, stage: int) -> Path:
        config = self.view(stage)
        return self.output_dir(stage) / "checkpoints" / weights_file_name(config.model.training_mode,
                                                                         config.optimization.steps)

    # -- what a node does -----------------------------------------------------------------------

    def prepare(self, stage: int) -> list[str]:
        """The train phase's resume rule, once: patch the stage's config to its newest complete pair.

        Returns:
            What was done, one line each.
        """
        pair = latest_pair(self.output_dir(stage) / "checkpoints")
        if pair is None:
            return [f"Stage {stage} has no complete checkpoint pair: it trains from step 0."]
        config = self.view(stage)
        step = check_compatible(pair, config)
        lines = [f"{self.config(stage).name}: {r.path} {r.old} -> {r.new} ({r.reason})"
                 for r in patch_resume(self.config(stage), pair, workspace=self.workspace)]
        restores = resume_restores(config.checkpoints.save_training_state)
        return [*lines, f"Stage {stage} resumes from its checkpoint at step {step} ({pair.weights.name}); {restores}"]

    def validated(self, stage: int) -> ValidatedConfig:
        """The stage's config validated strictly, as it is now, for every process of every node."""
        data_check = self.outputs.data_check
        data_stage = next(s for s in data_check.stages if s.index == stage)
        target = stage_launch_target(self.outputs.probe, data_check, data_stage, self.validate.num_processes)
        result = validate_stage(self.backend, self.config(stage), target, strict=True)
        return result.raise_if_failed(f"Stage {stage}'s config as this node would launch it")

    def refuse_other_config(self, stage: int, rank: int, validated: ValidatedConfig) -> None:
        """A node joins rank 0's running trainer only with the very config that trainer was launched with.

        Raises:
            Refused: the engine's rank 0 of this stage is running and this is rank 0 again, or the config
                file changed since rank 0's launch validated it.
        """
        rows = self.journal.processes("train", stage)
        if not rows or rows[-1].status != "running" or not rows[-1].alive():
            return
        job = rows[-1].slurm_job
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
            ip = main_ip or self.validate.main_ip
            if not ip:
                raise BadInput("No address for the rank-0 node", where="--main-ip", fix="pass --main-ip IP")
            nodes = Nodes(count, rank, ip, int(main_port or self.validate.main_port or DEFAULT_MAIN_PORT))
        spec: LaunchSpec = self.backend.train_command(self.config(stage), num_processes=self.validate.per_node,
                                                      distributed=self.validate.distributed, nodes=nodes)
        return spec


def open_node_run(ws: Workspace, name: str, latest: Mapping[str, PhaseRecord], journal: RunJournal) -> NodeRun:
    """The run as this node sees it, once validate has succeeded.

    Args:
        ws: the run's workspace (the same path on every node).
        name: the run.
        latest: the newest attempt of each of the run's phases, by phase (the caller read the store).
        journal: the run's train-phase journal (to see whether rank 0 is running, and with which config).

    Raises:
        BadInput: not validated yet, or run.yaml asks for other nodes than were validated.
    """
    from ltx_pipeline.backends import make_backend
    from ltx_pipeline.request import load_request

    validate = latest.get("validate")
    if validate is None or validate.status != "succeeded":
        state = "has not run" if validate is None else validate.status.replace("_", " ")
        raise BadInput(f"Run {name} is not validated (validate {state})", where="--run",
                       fix=f"approve its plan and `ltx-pipeline resume --workspace {ws.root} --run {name}` until "
                           "it has validated")
    outputs = ValidatedRun.read(latest)
    paths = ws.run(name)
    request = load_request(paths.request_file)
    validated_nodes = outputs.validate.node_count
    if request.nodes != validated_nodes:
        raise BadInput(f"run.yaml asks for {request.nodes} node(s) but the validated launch is for {validated_nodes}",
                       where=str(paths.request_file),
                       fix=f"`ltx-pipeline resume --workspace {ws.root} --run {name}` validates it again")
    backend = make_backend(request.backend, trainer_root=request.trainer_root,
                           trainer_python=request.trainer_python, surface=request.surface,
                           assume_gpu=request.assume_gpu, memory_scale=request.reference_memory_scale)
    return NodeRun(ws.root, name, request, backend, outputs, journal, paths.logs)


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
