"""The sbatch script of one training stage, rendered from a small frozen description (no I/O).

One task per node: the batch step first re-applies the train phase's resume logic (``node-launch
--prepare``: newest complete checkpoint pair -> the stage config), so a job SLURM requeues (node
failure, preemption) resumes from its latest checkpoint exactly as ``ltx-pipeline resume`` would;
then ``srun`` starts ``node-launch`` once per node, which builds that node's ``accelerate launch``
with its rank from ``SLURM_NODEID`` and the first node of the allocation as the main process. Every
path is shell-quoted; ``#SBATCH`` lines, which SLURM reads without a shell, only ever hold paths
``slurm_path_problem`` accepts. No secret is written: a store URL with a password is read from the
submitting environment, which sbatch exports to the job by default.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

__all__ = ["SlurmJob", "node_log_pattern", "render_script", "slurm_path_problem"]

# SLURM expands %-patterns in --output paths, and #SBATCH lines are not read by a shell: a path there
# holds none of %, whitespace, quotes or shell metacharacters.
_SAFE_PATH = re.compile(r"^[A-Za-z0-9_./+@=,:~-]+$")
_PORT_BASE, _PORT_SPAN = 20000, 20000


@dataclass(frozen=True)
class SlurmJob:
    """Everything the script of one stage says.

    Attributes:
        name: the job name (``--job-name``).
        nodes: nodes of the allocation, one task each.
        gpus_per_node: the plan's training processes per node (``--gpus-per-node``).
        workspace, run, stage, stages: what ``node-launch`` is told to launch.
        launcher: the argv that runs ltx-pipeline (the interpreter that wrote the script, ``-m ltx_pipeline.cli``).
        batch_output: the batch step's own log (``%x-%j`` patterns allowed).
        node_log: each node's trainer log, ``%n`` standing for the node's number in the job.
        store: the store URL to export (no password), or None.
        store_from_env: True when the store URL carries a password: the job reads ``LTX_PIPELINE_STORE``
            from the submitting environment.
        extra: the user's own ``#SBATCH`` options, verbatim (each starts with ``--``).
    """

    name: str
    nodes: int
    gpus_per_node: int
    workspace: Path
    run: str
    stage: int
    stages: int
    launcher: tuple[str, ...]
    batch_output: Path
    node_log: Path
    store: str | None = None
    store_from_env: bool = False
    extra: tuple[str, ...] = ()


def slurm_path_problem(path: Path) -> str | None:
    """Why a path cannot go into an ``#SBATCH`` line or a SLURM output pattern, or None."""
    if _SAFE_PATH.match(str(path)):
        return None
    return (f"{path} holds a character SLURM reads as a pattern or that a #SBATCH line cannot quote "
            "(%, whitespace, quotes, $, ...)")


def node_log_pattern(log: Path) -> Path:
    """``logs/train.log`` -> ``logs/train.node%n.log``: srun writes one log per node; node 0's is followed."""
    return log.with_name(f"{log.stem}.node%n{log.suffix}")


def render_script(job: SlurmJob) -> str:
    """The whole sbatch script, ending with a newline.

    Raises:
        ValueError: a path unfit for SLURM, a node or GPU count below 1, or an extra option not starting
            with ``--`` (callers check these first and say so to the user).
    """
    for path in (job.workspace, job.batch_output.parent, job.node_log.parent):
        if (problem := slurm_path_problem(path)) is not None:
            raise ValueError(problem)
    if job.nodes < 1 or job.gpus_per_node < 1:
        raise ValueError(f"nodes ({job.nodes}) and GPUs per node ({job.gpus_per_node}) must be at least 1")
    bad = [option for option in job.extra if not option.startswith("--") or "\n" in option]
    if bad:
        raise ValueError(f"extra #SBATCH options must start with -- and be one line: {bad}")
    target = ["node-launch", "--workspace", str(job.workspace), "--run", job.run, "--stage", str(job.stage)]
    head = [
        "#!/bin/bash",
        f"# ltx-pipeline: training of run {job.run}, stage {job.stage}/{job.stages}, on {job.nodes} node(s) x "
        f"{job.gpus_per_node} GPU(s).",
        "# Written by ltx-pipeline for one launch; `ltx-pipeline resume` writes a new script for a new launch.",
        f"#SBATCH --job-name={job.name}",
        f"#SBATCH --nodes={job.nodes}",
        "#SBATCH --ntasks-per-node=1",
        f"#SBATCH --gpus-per-node={job.gpus_per_node}",
        "#SBATCH --requeue",
        "#SBATCH --open-mode=append",
        f"#SBATCH --output={job.batch_output}",
        *(f"#SBATCH {option}" for option in job.extra),
        "",
        "set -euo pipefail",
        "",
    ]
    body = [*_store_lines(job), "",
            "# The first node of the allocation runs the main process; the port is derived from the job id,",
            "# so every node (and a requeued run of the same job) agrees on it without talking.",
            'MAIN_IP=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | sed -n 1p)',
            f"PORT=$(( {_PORT_BASE} + SLURM_JOB_ID % {_PORT_SPAN} ))",
            'echo "ltx-pipeline: job $SLURM_JOB_ID (restart ${SLURM_RESTART_COUNT:-0}) on $SLURM_JOB_NODELIST, '
            'main process $MAIN_IP:$PORT"',
            "",
            "# Requeue-safe: the run's resume logic (newest complete checkpoint pair -> the stage config) is",
            "# applied again each time the job starts, so a requeued job resumes from its latest checkpoint.",
            "# No signal is asked for before the time limit: checkpoints are saved at the planned interval.",
            _command([*job.launcher, *target, "--prepare"]),
            "",
            "# One task per node; node-launch takes the node's rank from SLURM_NODEID and writes to stdout only:",
            "# srun's --output is each node's log. srun does not inherit",
            "# --cpus-per-task from the allocation (SLURM >= 22.05): it is passed on when one was asked for",
            "# (the ${CPUS[@]+...} form keeps bash 4.2's `set -u` quiet about an empty array).",
            "CPUS=()",
            'if [[ -n "${SLURM_CPUS_PER_TASK:-}" ]]; then CPUS=(--cpus-per-task="$SLURM_CPUS_PER_TASK"); fi',
            _command(["srun", f"--nodes={job.nodes}", "--ntasks-per-node=1", f"--gpus-per-node={job.gpus_per_node}",
                      "--kill-on-bad-exit=1", "--open-mode=append", f"--output={job.node_log}"],
                     tail='${CPUS[@]+"${CPUS[@]}"} \\'),
            "    " + _command([*job.launcher, *target, "--stdout-only"]) + ' --main-ip "$MAIN_IP" --main-port "$PORT"']
    return "\n".join(head + body) + "\n"


def _store_lines(job: SlurmJob) -> list[str]:
    if job.store_from_env:
        return ["# The store URL carries a password, so it is not written here: the job reads LTX_PIPELINE_STORE",
                "# from the environment it was submitted from (sbatch exports the submitting environment by default;",
                "# with sbatch --export=NONE, export it in your own way).",
                ': "${LTX_PIPELINE_STORE:?LTX_PIPELINE_STORE is not set: submit from a shell where it is exported}"']
    if job.store:
        return ["# The run's store (a shared server): every node records into it.",
                f"export LTX_PIPELINE_STORE={shlex.quote(job.store)}"]
    return ["# The run's store is the workspace's own SQLite file, on the shared file system.",
            "unset LTX_PIPELINE_STORE"]


def _command(argv: Sequence[str], tail: str = "") -> str:
    text = " ".join(shlex.quote(part) for part in argv)
    return f"{text} {tail}" if tail else text
