"""Run one of the trainer's preprocessing scripts as a CPU rank; ``accelerate launch`` starts one per rank.

Usage (under ``accelerate launch --multi_gpu --num_processes N``, with no GPU visible):
``python cpu_ranks.py scripts/process_dataset.py ARGS...``.

Why: the trainer's scripts shard on a bare ``accelerate.PartialState()``, and accelerate (1.16) joins a process
group on a machine with no accelerator only when ``PartialState(cpu=True)`` is asked for; a bare one there sees
one process, so every rank encodes every row (``Rank 0/1: processing 4 of 4 items``, twice). This script asks
for it first (gloo, from the launcher's ``LOCAL_RANK``/``WORLD_SIZE``), then runs the script unchanged as
``__main__``: its own ``PartialState()`` shares that state, so rank r takes rows r, r + N, ... as on GPUs.
Standalone: it imports nothing from ltx_pipeline. With a GPU the engine starts the script directly.
"""

from __future__ import annotations

import runpy
import sys
from pathlib import Path


def main() -> None:
    if len(sys.argv) < 2:
        sys.exit("cpu_ranks.py: give the trainer script to run, then its arguments")
    from accelerate import PartialState

    PartialState(cpu=True)
    script = Path(sys.argv[1]).resolve()
    sys.argv = [str(script), *sys.argv[2:]]
    sys.path.insert(0, str(script.parent))  # the scripts import their siblings (process_videos, ...)
    runpy.run_path(str(script), run_name="__main__")


if __name__ == "__main__":
    main()
