"""Write a stage's sbatch script into ``<run>/slurm/`` and submit it with ``sbatch --parsable``.

Scripts are named like the stage's logs (``train.sbatch``, ``train.stage-2.sbatch``,
``train.attempt-2.sbatch``): each launch has its own, and a submitted script is never rewritten.
The one case where a different script already has the name (written by an engine that stopped
before it could submit, then the plan changed) keeps the old one beside it as ``<name>.prev``
(``.prev-2``, ... when that exists too) before the new one is written. With no ``sbatch`` on
``PATH`` the script is still written, and the refusal names the exact command that submits it.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from ltx_pipeline.errors import BadInput, Refused, RunFailed
from ltx_pipeline.slurm.queue import Submitted, query_job
from ltx_pipeline.slurm.script import SlurmJob, node_log_pattern, render_script, slurm_path_problem
from ltx_pipeline.store.location import STORE_ENV, is_sqlite, redact
from ltx_pipeline.workspace import atomic_write

__all__ = ["check_paths", "job_end_fix", "require_queue", "sbatch_argv", "script_path", "stage_job", "submit_script",
           "write_script"]

_SUBMIT_TIMEOUT_S = 120.0


def script_path(run_root: Path, log: Path) -> Path:
    """``<run>/slurm/<log name>.sbatch``: one script per launch, named as its log is."""
    return run_root / "slurm" / f"{log.stem}.sbatch"


def check_paths(workspace: Path) -> None:
    """Refuse a workspace whose path SLURM would misread (a ``%``, a space...), before anything is written.

    Raises:
        BadInput: naming the character class and the way out.
    """
    problem = slurm_path_problem(workspace)
    if problem is not None:
        raise BadInput(f"--slurm cannot use this workspace: {problem}", where=str(workspace),
                       fix="move the workspace to a path of letters, digits and ._-/+@=,: only")


def stage_job(*, workspace: Path, run_root: Path, run: str, stage: int, stages: int, log: Path, nodes: int,
              gpus_per_node: int, extra: tuple[str, ...]) -> SlurmJob:
    """The description of one stage's job: the store as this process sees it, the interpreter that wrote it."""
    store = os.environ.get(STORE_ENV, "").strip() or None
    secret = store is not None and not is_sqlite(store) and redact(store) != store
    name = f"ltx-{run}" if stages == 1 else f"ltx-{run}-stage{stage}"
    return SlurmJob(name=name, nodes=nodes, gpus_per_node=gpus_per_node, workspace=workspace, run=run, stage=stage,
                    stages=stages, launcher=(sys.executable, "-m", "ltx_pipeline.cli"),
                    batch_output=run_root / "slurm" / "%x-%j.out", node_log=node_log_pattern(log),
                    store=None if secret else store, store_from_env=secret, extra=extra)


def write_script(path: Path, job: SlurmJob, *, workspace: Path) -> tuple[Path, Path | None]:
    """Write the script atomically; returns it and where a different old script of that name was kept."""
    text = render_script(job)
    kept = None
    if path.is_file() and path.read_text(encoding="utf-8") != text:
        kept = path.with_name(path.name + ".prev")
        number = 1
        while kept.exists():
            number += 1
            kept = path.with_name(f"{path.name}.prev-{number}")
        os.replace(path, kept)
    atomic_write(path, text, root=workspace)
    return path, kept


def sbatch_argv(script: Path, sbatch: str = "sbatch") -> list[str]:
    """The exact submission command."""
    return [sbatch, "--parsable", str(script)]


def submit_script(script: Path, *, resume_command: str) -> Submitted:
    """Submit with ``sbatch --parsable`` and return the job id it printed.

    Raises:
        Refused: ``sbatch`` is not on ``PATH`` (the script is written; the message names the command).
        BadInput: ``sbatch`` refused the job (its own words: a partition or option the cluster rejects).
        RunFailed: ``sbatch`` did not answer, or printed no job id.
    """
    sbatch = shutil.which("sbatch")
    printable = " ".join(sbatch_argv(script))
    if sbatch is None:
        raise Refused(f"sbatch is not on PATH here, so the training was not submitted; its job script is written "
                      f"({printable} submits it)", where=str(script),
                      fix=f"run `{resume_command}` on a SLURM login node: it submits the script, records the job "
                          "and follows it")
    argv = sbatch_argv(script, sbatch)
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=_SUBMIT_TIMEOUT_S,  # noqa: S603
                              check=False, cwd=script.parent)
    except subprocess.TimeoutExpired:
        raise RunFailed(f"sbatch did not answer within {_SUBMIT_TIMEOUT_S:.0f} s", where=str(script),
                        fix=f"check the cluster (`squeue --me`): a job that was queued anyway must be cancelled "
                            f"(`scancel ID`) before `{resume_command}`") from None
    if done.returncode != 0:
        words = " ".join((done.stderr or done.stdout).split())[:300]
        raise BadInput(f"sbatch refused the job (exit {done.returncode}): {words}", where=str(script),
                       fix="correct slurm_args in run.yaml (or --slurm-arg), then `ltx-pipeline resume`")
    first = (done.stdout.strip().splitlines() or [""])[0]
    job_id = first.split(";")[0].strip()  # --parsable: "jobid" or "jobid;cluster"
    if not job_id.isdigit():
        raise RunFailed(f"sbatch printed no job id: {first[:200]!r}", where=str(script),
                        fix="check `squeue --me`; cancel a job that was queued anyway, then resume")
    return Submitted(int(job_id), tuple(argv), script.parent, " ".join(argv))


def require_queue(job_id: int, resume_command: str) -> None:
    """Refuse to go on when a submitted job's state cannot be read here: following it or submitting another
    both depend on it, and a second job must never be submitted while the first may still run.

    Raises:
        Refused: neither squeue nor sacct answers about the job here.
    """
    state = query_job(job_id, fresh=True)
    if state.alive is None:
        raise Refused(f"SLURM job {job_id} of this run was submitted, and its state cannot be read here "
                      f"({state.note})", where="squeue/sacct",
                      fix=f"run `{resume_command}` where squeue and sacct are on PATH (a login node of the cluster)")


#: What to change when the scheduler, not the trainer, ended a job (FAILED is the trainer's own exit: its log says).
_END_FIXES = {
    "TIMEOUT": "the job reached its time limit: give a longer one (--slurm-arg=--time=..., slurm_args in run.yaml) "
               "or checkpoint more often; `ltx-pipeline resume` continues from the newest checkpoint pair",
    "CANCELLED": "the job was cancelled (scancel, or an administrator); `ltx-pipeline resume` submits it again and "
                 "continues from the newest checkpoint pair",
    "NODE_FAIL": "a node of the job failed; `ltx-pipeline resume` submits it again and continues from the newest "
                 "checkpoint pair",
    "PREEMPTED": "the job was preempted and not requeued; `ltx-pipeline resume` submits it again and continues from "
                 "the newest checkpoint pair",
    "OUT_OF_MEMORY": "a node ran out of host memory: ask for more (--slurm-arg=--mem=...), then `ltx-pipeline resume`",
    "BOOT_FAIL": "the nodes failed to boot; `ltx-pipeline resume` submits it again",
    "DEADLINE": "the job passed its deadline; give a later one (or none), then `ltx-pipeline resume`",
}


def job_end_fix(state: str) -> str | None:
    """How to go on after a job the scheduler ended in ``state``; None when the trainer's log has the answer."""
    return _END_FIXES.get(state)
