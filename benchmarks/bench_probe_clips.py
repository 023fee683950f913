"""Probe speed on real media: read the facts of 200 H.264 clips with PyAV, as the probe does.

Writes 200 distinct mp4 clips (121 frames, 64x64 and 96x64, 24 and 30 fps, half with an AAC tone)
into a temporary folder, then times ``read_clips`` over them, cold (first read after writing) and
warm (a second pass), and prints clips/s and how each clip's frame count was obtained. Prints
figures and asserts nothing.

    python benchmarks/bench_probe_clips.py [--clips 200]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from collections import Counter
from pathlib import Path

from ltx_pipeline.ltx.sample_clips import COLOURS, write_clip
from ltx_pipeline.probing import read_clips


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clips", type=int, default=200)
    args = parser.parse_args()
    colours = sorted(COLOURS)
    with tempfile.TemporaryDirectory(prefix="bench-probe-") as folder:
        started = time.perf_counter()
        clips = []
        for index in range(args.clips):
            path = Path(folder) / f"clip{index:04d}.mp4"
            write_clip(path, 121, 64, 64 if index % 2 else 96, colour=colours[index % len(colours)],
                       background=colours[(index + 3) % len(colours)], fps=24.0 if index % 3 else 30.0,
                       audio=index % 2 == 0, phase=index / args.clips)
            clips.append((index + 1, path))
        print(f"wrote {args.clips} clips in {time.perf_counter() - started:.1f} s")
        for label in ("cold", "warm"):
            started = time.perf_counter()
            report = read_clips(clips)
            seconds = time.perf_counter() - started
            sources = Counter(facts["frames_source"] for facts in report.facts.values())
            print(f"{label}: {len(report.facts)} clips read, {len(report.unreadable)} unreadable, {seconds:.2f} s, "
                  f"{len(clips) / seconds:.0f} clips/s; frame counts from {dict(sources)}")


if __name__ == "__main__":
    main()
