"""Training on a SLURM cluster (``--slurm``): the per-stage sbatch script, its submission, its job id.

``script`` renders the script from a frozen description (pure); ``submit`` writes it into
``<run>/slurm/`` and submits it with ``sbatch --parsable``. The job's state is read by
``ltx_pipeline.slurm.queue`` (squeue, sacct), which ``status`` uses too.
"""

from ltx_pipeline.slurm.script import SlurmJob, node_log_pattern, render_script, slurm_path_problem
from ltx_pipeline.slurm.submit import (
    check_paths,
    job_end_fix,
    require_queue,
    sbatch_argv,
    script_path,
    stage_job,
    submit_script,
    write_script,
)

__all__ = ["SlurmJob", "check_paths", "job_end_fix", "node_log_pattern", "render_script", "require_queue",
           "sbatch_argv", "script_path", "slurm_path_problem", "stage_job", "submit_script", "write_script"]
