"""Benchmark: wall time of `ltx-pipeline status` on a workspace with 20 planned runs.

Builds the workspace with real `run` calls (assumed GPU, the example dataset), then times `status`
and `status --json` as fresh processes, which is what a user pays: interpreter start, imports,
opening and upgrading-check of the store, and rendering. Prints figures; asserts nothing.

    python benchmarks/bench_status.py [--runs 20] [--repeat 7]
"""

from __future__ import annotations

import argparse
import contextlib
import io
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
ENGINE = [sys.executable, "-c", "from ltx_pipeline.cli import main; main()"]


def build_workspace(workspace: Path, runs: int) -> None:
    from ltx_pipeline.cli import main

    dataset = REPO / "workspaces" / "examples" / "clips" / "dataset.json"
    for i in range(runs):
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            code = main(["run", "--workspace", str(workspace), "--dataset", str(dataset), "--run", f"run-{i:02d}",
                         "--assume-gpu", "NVIDIA H100 80GB HBM3,81559", "--steps", str(1000 + i)])
        assert code == 3, f"run {i} exited {code}"


def time_command(args: list[str], repeat: int) -> list[float]:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        subprocess.run([*ENGINE, *args], check=True, capture_output=True)
        times.append(time.perf_counter() - start)
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        workspace = Path(tmp) / "ws"
        build_workspace(workspace, args.runs)
        baseline = time_command(["--help"], args.repeat)
        for label, extra in (("status", []), ("status --json", ["--json"])):
            times = time_command(["status", "--workspace", str(workspace), *extra], args.repeat)
            median = statistics.median(times)
            print(f"{label:14s} {args.runs} runs: median {median * 1000:.0f} ms, min {min(times) * 1000:.0f} ms "
                  f"over {args.repeat} processes; {median / statistics.median(baseline):.2f}x `--help`")
        print(f"{'--help':14s} baseline: median {statistics.median(baseline) * 1000:.0f} ms")


if __name__ == "__main__":
    main()
