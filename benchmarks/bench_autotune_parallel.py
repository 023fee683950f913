"""Wall time of a reference-backend autotune sweep, one trial at a time vs ``--autotune-parallel 2``.

Four GPUs are assumed (``--assume-gpu "Toy GPU,32768,4"``); the toy trainer really trains each trial on
the CPU, its memory scaled to GPU-sized figures (as tests/phases/test_autotune.py does), so the sweep
prunes and fits as on a 32 GiB card. Prints, for each sweep, the autotune phase's wall time (which includes
preprocessing the sanity set, the same in both), the sweep's own (first trial's start to last trial's end),
its trials with their GPUs and start/end, and both winners. A benchmark: it asserts nothing.

The default is a realistic LoRA sweep (8 clips, effective batch 4: 8 trials); ``--clips 4 --effective-batch 1
--memory-scale 22500`` is the smallest (3 trials), where two slots can save at most one trial's time.

    python benchmarks/bench_autotune_parallel.py [--clips 8] [--effective-batch 4] [--memory-scale 15000]
                                                  [--repeat N]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clips", type=int, default=8)
    parser.add_argument("--effective-batch", type=int, default=4)
    parser.add_argument("--memory-scale", type=float, default=15000.0)
    parser.add_argument("--repeat", type=int, default=1, help="pairs of sweeps to run; the ratios of each and "
                        "their median are printed (two trainings on shared cores vary from run to run)")
    args = parser.parse_args()
    pairs = [_pair(args) for _ in range(max(1, args.repeat))]
    if len(pairs) == 1:
        print(json.dumps(pairs[0], indent=1, default=str))
        return
    for key in ("phase_wall_ratio", "sweep_wall_ratio"):
        ratios = [pair[key] for pair in pairs]
        print(f"{key}: {', '.join(f'{r:.3f}' for r in ratios)}; median {statistics.median(ratios):.3f}")
    print(f"same winner: {sum(pair['same_winner'] for pair in pairs)} of {len(pairs)}")


def _pair(args: argparse.Namespace) -> dict[str, Any]:
    """One sequential sweep and one with two trials at once, on the same dataset, and their figures."""
    from tests.phases.parallel_helpers import sweep
    from tests.reference_trainer.conftest import write_dataset

    with tempfile.TemporaryDirectory(prefix="bench-autotune-parallel-") as tmp:
        dataset = write_dataset(Path(tmp) / "data", [(f"clip{i}.mp4", 17, True) for i in range(args.clips)])
        figures = {}
        for parallel in (1, 2):
            started = time.monotonic()
            figures[parallel] = sweep(Path(tmp) / f"ws{parallel}", dataset, parallel,
                                      effective_batch=args.effective_batch, memory_scale=args.memory_scale)
            figures[parallel]["command_seconds"] = round(time.monotonic() - started, 1)
        one, two = figures[1], figures[2]
        for figure in (one, two):
            figure["trial_count"] = len(figure.pop("outputs").get("trials", []))
        return {"sequential": one, "parallel_2": two, "same_winner": one["winner"] == two["winner"],
                "phase_wall_ratio": round(two["seconds"] / one["seconds"], 3),
                "sweep_wall_ratio": round(two["sweep_seconds"] / one["sweep_seconds"], 3)}


if __name__ == "__main__":
    main()
