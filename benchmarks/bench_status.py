"""Benchmark: wall time of `ltx-pipeline status` on a workspace of 20 runs, one of them training.

Builds the workspace with real `run` calls (assumed GPU, the example dataset; the last run goes on to
train on the simulated backend, detached and slowed so it is still training while `status` is timed),
then times `status`, `status --json`, `--help` and `run --help` as fresh processes, which is what a user pays:
interpreter start, imports, reading the store, the live-training section and rendering. Prints
figures (and the machine's core count); asserts nothing.

    python benchmarks/bench_status.py [--runs 20] [--repeat 7]
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
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
    for i in range(runs - 1):
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            code = main(["run", "--workspace", str(workspace), "--dataset", str(dataset), "--run", f"run-{i:02d}",
                         "--assume-gpu", "NVIDIA H100 80GB HBM3,81559", "--steps", str(1000 + i)])
        assert code == 3, f"run {i} exited {code}"
    # The last run trains (simulated: 0.2 s a step for 4000 steps) detached while status is timed; its
    # clips have sound, as the default mode needs.
    from ltx_pipeline.cli.demo import write_demo_dataset

    clips = write_demo_dataset(workspace.parent / "clips")
    env = {**os.environ, "LTX_SIMULATED_TIME_SCALE": "0.1"}
    subprocess.run([*ENGINE, "run", "--workspace", str(workspace), "--dataset", str(clips), "--run", "training",
                    "--backend", "simulated", "--surface", str(REPO / "benchmarks" / "surfaces" / "h100_80gb.yaml"),
                    "--steps", "4000", "--buckets", "96x64x25", "--approve", "--detach"],
                   check=True, capture_output=True, env=env)


def stop_training(workspace: Path) -> None:
    subprocess.run([*ENGINE, "stop", "--workspace", str(workspace), "--run", "training", "--interrupt-timeout", "5"],
                   capture_output=True)


def time_command(args: list[str], repeat: int) -> list[float]:
    # As installed: bytecode is cached (a PYTHONDONTWRITEBYTECODE in this shell would make every run
    # compile the package from source), and one untimed run writes it first.
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    subprocess.run([*ENGINE, *args], check=True, capture_output=True, env=env)
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        subprocess.run([*ENGINE, *args], check=True, capture_output=True, env=env)
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
        try:
            print(f"{os.cpu_count()} cores; {args.runs} runs, one of them training")
            baseline = time_command(["--help"], args.repeat)
            for label, extra in (("status", []), ("status --json", ["--json"])):
                times = time_command(["status", "--workspace", str(workspace), *extra], args.repeat)
                median = statistics.median(times)
                print(f"{label:14s} median {median * 1000:.0f} ms, min {min(times) * 1000:.0f} ms over {args.repeat} "
                      f"processes; {median / statistics.median(baseline):.2f}x `--help`")
            help_median, help_min = statistics.median(baseline) * 1000, min(baseline) * 1000
            print(f"{'--help':14s} median {help_median:.0f} ms, min {help_min:.0f} ms")
            # The longest help (choices, defaults and panels of every request option); the goal is under 0.2 s.
            run_help = time_command(["run", "--help"], args.repeat)
            print(f"{'run --help':14s} median {statistics.median(run_help) * 1000:.0f} ms, "
                  f"min {min(run_help) * 1000:.0f} ms")
        finally:
            stop_training(workspace)


if __name__ == "__main__":
    main()
