"""Every environment variable ltx-pipeline reads or sets, by name, in one place.

The bottom floor of the house (beside ``errors``): any room may import it, it imports nothing.
Code names a variable only through these constants, so a rename is one edit and ``grep`` finds
every reader; ``tests/unit/test_env_names.py`` checks that no other module spells an ``LTX_`` name.
Each comment says what the variable does and who reads it.
"""

from __future__ import annotations

__all__ = [
    "HEARTBEAT_ENV",
    "HOST_ID_ENV",
    "LATENT_CACHE_ENV",
    "LTX2_ROOT_ENV",
    "MODELS_DIR_ENV",
    "NVIDIA_SMI_ENV",
    "QUEUE_POLL_ENV",
    "REFERENCE_CAPACITY_ENV",
    "REFERENCE_DEVICE_ENV",
    "REFERENCE_LOG_EVERY_ENV",
    "REFERENCE_SCALE_ENV",
    "SIMULATED_STEP_LOG_EVERY_ENV",
    "SIMULATED_TIME_SCALE_ENV",
    "SLURM_POLL_ENV",
    "STALL_SECONDS_ENV",
    "STORE_ENV",
    "UI_TOKEN_ENV",
    "WORKSPACE_ENV",
]

# The workspace folder when --workspace is not given (workspace.py; tests point it at a tmp dir).
WORKSPACE_ENV = "LTX_PIPELINE_WORKSPACE"
# The store's URL or SQLite path, overriding <workspace>/ltx-pipeline.db (store/location.py, cli --store,
# the process supervisor and SLURM job scripts, which inherit it).
STORE_ENV = "LTX_PIPELINE_STORE"
# The latent cache runs fill and assemble their .precomputed from (preprocessing/cache_plan.py): a folder, e.g.
# one a team shares, instead of <workspace>/cache/latents; "off" preprocesses every stage whole, as before the cache.
LATENT_CACHE_ENV = "LTX_PIPELINE_LATENT_CACHE"
# The nvidia-smi executable to use instead of the one on PATH (probing/gpus.py; tests replay captured output).
NVIDIA_SMI_ENV = "LTX_PIPELINE_NVIDIA_SMI"
# The dashboard's token (cli/ui.py, as --token): from the environment it stays out of `ps`, where other local users
# would see a command-line token.
UI_TOKEN_ENV = "LTX_PIPELINE_UI_TOKEN"
# Seconds without a trainer log line before a training is called stalled (training/follow.py, status/live.py).
STALL_SECONDS_ENV = "LTX_PIPELINE_STALL_SECONDS"
# Seconds between a supervisor's heartbeats in the store (engine/processes.py, engine/supervise.py).
HEARTBEAT_ENV = "LTX_PIPELINE_HEARTBEAT_S"
# This machine's name in the process journal instead of its hostname (engine/processes.py, engine/supervise.py;
# tests fake a second host).
HOST_ID_ENV = "LTX_PIPELINE_HOST_ID"
# Seconds between a queued run's looks at the GPU leases (gpus/claim.py; default 2, tests shorten it).
QUEUE_POLL_ENV = "LTX_PIPELINE_QUEUE_POLL_S"
# Seconds between squeue/sacct polls of a SLURM job (slurm/queue.py).
SLURM_POLL_ENV = "LTX_PIPELINE_SLURM_POLL_S"
# A folder of model files searched before the usual places (probing/models.py; an input of probe's fingerprint).
MODELS_DIR_ENV = "LTX_MODELS_DIR"
# The LTX-2 checkout when --trainer-root is not given (probing/trainer_checkout.py, backends, cli config tools).
LTX2_ROOT_ENV = "LTX2_ROOT"
# Steps between the reference trainer's log lines (reference_trainer/loop.py; the demo and autotune trials lower it).
REFERENCE_LOG_EVERY_ENV = "LTX_REFERENCE_LOG_EVERY"
# Force the reference trainer's torch device, e.g. "cpu" (reference_trainer/trainer.py).
REFERENCE_DEVICE_ENV = "LTX_REFERENCE_DEVICE"
# The simulated device capacity in MiB the reference trainer runs out of memory at (backends/reference.py sets
# it, reference_trainer/memory.py reads it).
REFERENCE_CAPACITY_ENV = "LTX_REFERENCE_DEVICE_CAPACITY_MIB"
# Scale of the reference trainer's simulated memory use (backends/reference.py sets, reference_trainer/memory.py
# reads).
REFERENCE_SCALE_ENV = "LTX_REFERENCE_MEMORY_SCALE"
# Real seconds per simulated second of the simulated trainer, 0 for no waiting (backends/simulated_trainer.py).
SIMULATED_TIME_SCALE_ENV = "LTX_SIMULATED_TIME_SCALE"
# Steps between the simulated trainer's log lines (backends/simulated_trainer.py).
SIMULATED_STEP_LOG_EVERY_ENV = "LTX_SIMULATED_STEP_LOG_EVERY"
