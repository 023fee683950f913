"""Benchmark: the engine's own CPU use while it follows a training (share of one core).

Runs a whole workflow on the simulated backend, approved up front, with the time scale chosen so one
training step takes ``--step-seconds`` of wall time (default 1 s, over ``--seconds``, default 60 s; the
trainer logs a Step line every ``--log-every`` steps, default 20 as the real one does; ``--log-every 1``
is the worst case, a Step line each step). It samples the engine process's CPU
time (its children excluded) from the trainer's first log line to its end-of-training statistics,
so the workflow's other phases are not counted. Prints figures; asserts nothing.

    python benchmarks/bench_follow_cpu.py [--seconds 60] [--step-seconds 1.0] [--log-every 20]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil

from ltx_pipeline.cli.demo import write_demo_dataset

ENGINE = [sys.executable, "-c", "from ltx_pipeline.cli import main; main()"]
STEP_TIME_S = 3.0  # the surface's step time; the time scale maps it to --step-seconds of wall time
SURFACE = {
    "gpu": {"name": "NVIDIA H100 80GB HBM3", "memory_mib": 81559, "count": 1},
    # Model load and validation are scaled like steps: kept short so the window is mostly training.
    "load_time_s": 3.0, "validation_time_s": 3.0,
    "points": [{"knobs": {"quantization": None, "optimizer_type": "adamw", "batch_size": 1,
                          "enable_gradient_checkpointing": True}, "step_time_s": STEP_TIME_S, "peak_vram_gb": 60.0}],
}
TRAINER_STARTED = "Simulated trainer"
TRAINING_DONE = "Training Statistics"


def _cpu_seconds(process: psutil.Process) -> float:
    times = process.cpu_times()
    return times.user + times.system


def _log_has(log: Path, marker: str) -> bool:
    try:
        return marker in log.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return False


def _measure(proc: subprocess.Popen[bytes], log: Path) -> tuple[float, float] | None:
    """(wall seconds, engine CPU seconds) from the trainer's first line to its statistics, or None."""
    engine = psutil.Process(proc.pid)
    start: tuple[float, float] | None = None
    while proc.poll() is None:
        try:
            cpu = _cpu_seconds(engine)
        except psutil.NoSuchProcess:
            break
        now = time.monotonic()
        if start is None and _log_has(log, TRAINER_STARTED):
            start = (now, cpu)
        elif start is not None and _log_has(log, TRAINING_DONE):
            return now - start[0], cpu - start[1]
        time.sleep(0.2)
    return None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=60.0, help="wall time the training steps should last")
    parser.add_argument("--step-seconds", type=float, default=1.0, help="wall time of one training step")
    parser.add_argument("--log-every", type=int, default=20, help="steps between two Step lines (the trainer's 20)")
    args = parser.parse_args()
    steps = max(20, round(args.seconds / args.step_seconds))
    scale = args.step_seconds / STEP_TIME_S
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        (root / "surface.yaml").write_text(json.dumps(SURFACE))
        clips = write_demo_dataset(root / "clips")  # real small clips with sound: the probe opens them
        env = {**os.environ, "LTX_SIMULATED_TIME_SCALE": repr(scale),
               "LTX_SIMULATED_STEP_LOG_EVERY": str(args.log_every)}
        proc = subprocess.Popen([*ENGINE, "run", "--workspace", str(root / "ws"), "--run", "bench", "--dataset",
                                 str(clips), "--backend", "simulated", "--surface", str(root / "surface.yaml"),
                                 "--steps", str(steps), "--buckets", "96x64x25", "--approve"],
                                env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            measured = _measure(proc, root / "ws" / "bench" / "logs" / "train.log")
        finally:
            proc.wait()
    if measured is None:
        print("the training never started or never finished; nothing measured")
        return
    wall, cpu = measured
    print(f"following a {wall:.1f} s training of {steps} steps ({steps / wall:.2f} steps/s, a Step line every "
          f"{args.log_every * args.step_seconds:g} s): engine CPU {cpu:.2f} s = {cpu / wall * 100:.2f}% of one core "
          "(parsing, metrics to SQLite, liveness and checkpoint discovery)")


if __name__ == "__main__":
    main()
