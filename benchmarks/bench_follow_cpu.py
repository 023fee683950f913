"""Benchmark: the engine's own CPU use while it follows a training (share of one core).

Runs a whole workflow on the simulated backend (its trainer sleeps a scaled fraction of the surface's
step times, so the training lasts about `--seconds`), approved up front, and samples the engine
process's CPU time (its children excluded) while `logs/train.log` is being written. Prints figures;
asserts nothing.

    python benchmarks/bench_follow_cpu.py [--seconds 30]
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

ENGINE = [sys.executable, "-c", "from ltx_pipeline.cli import main; main()"]
SURFACE = {
    "gpu": {"name": "NVIDIA H100 80GB HBM3", "memory_mib": 81559, "count": 1},
    "load_time_s": 60, "validation_time_s": 20,
    "points": [{"knobs": {"quantization": None, "optimizer_type": "adamw", "batch_size": 1,
                          "enable_gradient_checkpointing": True}, "step_time_s": 3.0, "peak_vram_gb": 60.0}],
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=30.0, help="wall time the training should last")
    args = parser.parse_args()
    steps = 600
    scale = args.seconds / (steps * SURFACE["points"][0]["step_time_s"])
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        (root / "surface.yaml").write_text(json.dumps(SURFACE))
        (root / "data" / "videos").mkdir(parents=True)
        (root / "data" / "videos" / "a.mp4").write_bytes(b"x")
        (root / "data" / "dataset.json").write_text(json.dumps([{"caption": "a fox", "video": "videos/a.mp4"}]))
        env = {**os.environ, "LTX_SIMULATED_TIME_SCALE": repr(scale)}
        proc = subprocess.Popen([*ENGINE, "run", "--workspace", str(root / "ws"), "--run", "bench", "--dataset",
                                 str(root / "data" / "dataset.json"), "--backend", "simulated", "--surface",
                                 str(root / "surface.yaml"), "--steps", str(steps), "--approve"],
                                env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        engine = psutil.Process(proc.pid)
        log = root / "ws" / "bench" / "logs" / "train.log"
        start_wall = start_cpu = None
        cpu = 0.0
        while proc.poll() is None:
            try:
                times = engine.cpu_times()
                cpu = times.user + times.system
            except psutil.NoSuchProcess:
                break
            if start_wall is None and log.exists():
                start_wall, start_cpu = time.monotonic(), cpu
            time.sleep(0.2)
        end_wall = time.monotonic()
        if start_wall is None:
            print("the training never started; nothing measured")
            return
        wall = end_wall - start_wall
        share = (cpu - start_cpu) / wall if wall > 0 else float("nan")
        print(f"following a {wall:.1f} s training: engine CPU {cpu - start_cpu:.2f} s = {share * 100:.1f}% of one "
              "core (parsing, metrics to SQLite, liveness and checkpoint discovery)")


if __name__ == "__main__":
    main()
