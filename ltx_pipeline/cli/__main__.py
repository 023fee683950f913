"""``python -m ltx_pipeline.cli``: the console script by the interpreter's own path (a SLURM job's command)."""

from ltx_pipeline.cli import main

main()
