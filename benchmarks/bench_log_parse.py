"""Throughput of follow + parse + accumulate over a large trainer log.

Generates an N-line log (default 1,000,000) in the trainer's Rich layout into a temporary directory:
mostly Step lines (some wrapped at 80 columns), with validation, checkpoint, retention and W&B lines
mixed in. It then reads it with ``LogFollower.read_text`` (8 MB blocks), feeds each block to
``LogParser.feed_text`` and folds the events into ``TrainingProgress``, as the engine's follower
does, and prints lines per second (and the per-line path, ``read_new`` + ``feed_lines``, for
comparison). It asserts nothing about time.

Usage: ``python benchmarks/bench_log_parse.py [--lines N]``
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

from ltx_pipeline.trainer_log import LogFollower, LogParser, TrainingProgress

WIDTH = 200


def _rich(msg: str, loc: str = "trainer.py:311", level: str = "INFO") -> str:
    head = f"{level:<8} {msg}"
    return head + " " * max(1, WIDTH - len(head) - len(loc)) + loc + "\n"


def generate(path: Path, lines: int) -> int:
    """Write about ``lines`` physical lines; returns the exact count written."""
    written = 0
    step = 0
    total = lines * 20
    chunk: list[str] = [_rich("🚀 Starting training...", "trainer.py:190"),
                        "wandb: 🚀 View run at https://wandb.ai/team/project/runs/abc123\n"]
    with open(path, "w", encoding="utf-8") as handle:
        while written + len(chunk) < lines:
            step += 20
            if step % 1000 == 0:
                chunk.append(_rich(f"🎥 Validation samples for step {step} saved in samples",
                                   "validation_runner.py:612"))
                chunk.append(_rich(f"💾 Lora weights for step {step} saved in "
                                   f"checkpoints/lora_weights_step_{step:05d}.safetensors", "trainer.py:963"))
                chunk.append("INFO     Removed old checkpoint:                                  trainer.py:995\n")
                chunk.append("         /home/user/outputs/run/checkpoints/lora_weights_step_00               \n")
                chunk.append("         100.safetensors                                                        \n")
            loss = 0.3 + (step % 97) / 1000
            if step % 60 == 0:
                # 80-column wrapping, as when COLUMNS is not set.
                head = f"INFO     Step {step}/{total} - Loss: {loss:.4f}, LR: 1.00e-04, Time/Step:"
                chunk.append(head + " " * max(1, 80 - len(head) - 14) + "trainer.py:311\n")
                chunk.append("         3.46s, Total Time: 2h 5m                                               \n")
            else:
                chunk.append(_rich(f"Step {step}/{total} - Loss: {loss:.4f}, LR: 1.00e-04, "
                                   f"Time/Step: 3.4{step % 10}s, Total Time: 2h 5m"))
            if len(chunk) >= 10_000:
                handle.writelines(chunk)
                written += len(chunk)
                chunk = []
        handle.writelines(chunk)
        written += len(chunk)
    return written


def run(path: Path, *, per_line: bool = False) -> tuple[int, int, float]:
    """Follow, parse and accumulate the whole file; returns (lines, events, seconds)."""
    follower = LogFollower(path)
    parser = LogParser()
    progress = TrainingProgress()
    lines = events = 0
    start = time.perf_counter()
    while True:
        if per_line:
            batch, _offset = follower.read_new()
            if not batch:
                break
            lines += len(batch)
            new = parser.feed_lines(batch)
        else:
            text, _offset = follower.read_text()
            if not text:
                break
            lines += text.count("\n")
            new = parser.feed_text(text)
        events += len(new)
        progress.feed(new)
    tail = parser.flush()
    progress.feed(tail)
    events += len(tail)
    elapsed = time.perf_counter() - start
    if progress.last_step is None:
        raise SystemExit("benchmark log produced no step events: the parser or the generator is broken")
    return lines, events, elapsed


def main() -> None:
    """Parse arguments, generate the log, measure and print the throughput."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lines", type=int, default=1_000_000, help="physical lines to generate")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "train.log"
        generated = generate(path, args.lines)
        size_mb = path.stat().st_size / 1e6
        lines, events, elapsed = run(path)
        _, line_events, line_elapsed = run(path, per_line=True)
    if line_events != events:
        raise SystemExit(f"the block and line paths disagree: {events} vs {line_events} events")
    print(f"generated {generated:,} lines ({size_mb:.1f} MB), {os.cpu_count()} cores")
    print(f"follow+parse+accumulate: {lines:,} lines, {events:,} events in {elapsed:.2f}s "
          f"= {lines / elapsed:,.0f} lines/s")
    print(f"per-line path (read_new + feed_lines): {lines / line_elapsed:,.0f} lines/s; "
          f"block path is {line_elapsed / elapsed:.2f}x faster")


if __name__ == "__main__":
    main()
