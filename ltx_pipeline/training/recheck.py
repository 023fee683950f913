"""Right before a stage launches: what may have changed since the validate phase, checked again.

Owns ``recheck``: a chained stage's warm-start weights exist, the GPUs of this machine are free when the
backend needs a GPU (a SLURM job's GPUs are on its nodes, not here), and W&B credentials resolve when the
config logs to W&B. Each refusal names what to do before ``ltx-pipeline resume``.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

from ltx_pipeline.errors import BadInput, Refused, RunFailed
from ltx_pipeline.probing import wandb_credentials_resolve
from ltx_pipeline.probing.gpus import cuda_present
from ltx_pipeline.probing.nvidia_smi import nvidia_smi_command
from ltx_pipeline.training.stage import TrainingStage

__all__ = ["check_gpus_free", "recheck"]

_BUSY_MIB = 1024  # more than an idle CUDA context: someone else's model or a leftover trainer


def recheck(stage: TrainingStage) -> None:
    """Refuse the launch on what changed since validate.

    Raises:
        RunFailed: a chained stage's warm-start weights are missing.
        Refused: a GPU is busy (``check_gpus_free``).
        BadInput: W&B is on and no credentials resolve.
    """
    ctx, config = stage.ctx, stage.view()
    warm = config.model.load_checkpoint
    if stage.index > 1 and config.checkpoints.no_resume and warm and not Path(warm).exists():
        raise RunFailed(f"Stage {stage.index} warm-starts from {warm}, which does not exist",
                        where=str(stage.config), fix="let the previous stage finish (`ltx-pipeline resume`)")
    if ctx.backend.capabilities.needs_gpu and not ctx.request.slurm:  # a job's GPUs are on its nodes, not here
        if cuda_present():
            check_gpus_free(ctx.request.nvidia_smi)
        else:  # nothing to be busy; and the user should know the real trainer will not see the assumed GPU
            ctx.warn("No NVIDIA GPU on this machine: the trainer runs on the CPU (the plan's GPU was assumed "
                     "with --assume-gpu); expect it to be slow, and no GPU memory figure in its statistics.")
    if config.wandb.enabled and not wandb_credentials_resolve():
        raise BadInput("wandb.enabled is true but no W&B credentials resolve", where=str(stage.config),
                       fix="run `wandb login` (or export WANDB_API_KEY), or set wandb.enabled: false")


def check_gpus_free(executable: str | None) -> None:
    """Refuse to launch while another process holds GPU memory (more than a CUDA context's worth).

    Raises:
        Refused: a GPU is busy, named with its memory in use.
    """
    exe = nvidia_smi_command(executable)
    try:
        done = subprocess.run([exe, "--query-gpu=index,memory.used", "--format=csv,noheader,nounits"],  # noqa: S603
                              capture_output=True, text=True, timeout=20, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise Refused(f"Cannot check that the GPUs are free: {exc}", where=exe,
                      fix="make nvidia-smi work (or pass --nvidia-smi), then `ltx-pipeline resume`") from None
    busy = []
    for line in done.stdout.splitlines():
        fields = [f.strip() for f in line.split(",")]
        if len(fields) == 2 and fields[1].isdigit() and int(fields[1]) > _BUSY_MIB:
            busy.append(f"GPU {fields[0]} has {fields[1]} MiB in use")
    if done.returncode != 0 or busy:
        raise Refused("The GPUs are not free: " + ("; ".join(busy) or done.stderr.strip()[:200]), where=exe,
                      fix="stop the other processes on them (see nvidia-smi), then `ltx-pipeline resume`")
