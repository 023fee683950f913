"""Scene detection measured on footage with known cuts: which PySceneDetect detector, at which settings.

Writes a labelled corpus (``ltx_pipeline.scenes.footage``: textured worlds filmed by a panning
camera, moving objects, sensor noise) into a temporary folder as H.264 mp4s, in four kinds:

- ``hard``: shots of different worlds joined by straight cuts (some shots pan fast);
- ``alike``: the same, every world in the same colours (another angle of the same place);
- ``colour``: the same world, the camera carrying on, cut to another colour grade (hue turned, luma kept);
- ``motion``: one shot each, no cut: fast pans, fast objects, flashes (every cut found is a false one);
- ``flash``: one shot each, no cut: an ordinary camera move with three flashes (overexposed for 2 frames);
- ``still``: one shot each, no cut: a still camera, four big objects crossing it fast;
- ``dissolve``: shots faded into each other over 8-24 frames (scored apart: a dissolve is not a hard cut).

Each video is decoded once through ``scenes.detect.scan_cuts`` (what ``detect_scenes`` runs) and every
detector sees the same frames. A found cut matches a true one within 2 frames (a dissolve: within half its
length + 2). Prints, per detector, precision and recall per kind, false cuts on motion, the share of
hard and alike videos whose scene count is exact, and F1 over every kind but dissolve; asserts nothing.

    python benchmarks/bench_scene_detection.py [--videos 6] [--width 192 --height 108] [--seed 0]

``--parallel`` times the scan the plan runs (``scan_videos``, ``DETECTOR`` only) instead, three ways: serially
in this process as before #46 (a new swscale context per frame, FFmpeg's decoder threads), serially with one
scaler for all frames (``workers=1``), and on every usable core (``scenes.parallel``); over the corpus (a pool
over videos), then over one long 1280x720 video (``--long-seconds``, 0: none; split into segments). It checks
that the three give the same records and prints wall time, CPU seconds (this process and its workers) and
their ratio, the cores each used:

    python benchmarks/bench_scene_detection.py --parallel [--videos 6] [--long-seconds 120] [--repeat 2]
        [--footage DIR]
"""

from __future__ import annotations

import argparse
import os
import random
import resource
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ltx_pipeline.scenes import detect
from ltx_pipeline.scenes.detect import DETECTOR, DetectorSpec, scan_cuts
from ltx_pipeline.scenes.footage import Shot, long_shots, true_cuts, write_footage, write_long_footage
from ltx_pipeline.scenes.parallel import usable_cores
from ltx_pipeline.scenes.scan import scan_videos

FPS = 24.0
KINDS = ("hard", "alike", "colour", "motion", "flash", "still", "dissolve")
NO_CUT = ("motion", "flash", "still")
DETECTORS = [
    *(DetectorSpec("content", t, 15) for t in (10.0, 15.0, 20.0, 27.0, 35.0)),
    *(DetectorSpec("content", t, 8, 5, 0.3) for t in (20.0, 27.0)),
    *(DetectorSpec("adaptive", t, 15) for t in (2.0, 3.0, 4.0, 5.0)),
    *(DetectorSpec("adaptive", t, 8) for t in (3.0, 4.0)),
    *(DetectorSpec("adaptive", t, 8, 5) for t in (2.0, 3.0)),
    *(DetectorSpec("adaptive", t, 8, 5, c) for t in (2.0, 2.5, 3.0) for c in (0.3, 0.5)),
    *(DetectorSpec("histogram", t, 15) for t in (0.05, 0.1)),
    DetectorSpec("histogram", 0.05, 8, 5, 0.3),
    *(DetectorSpec("hash", t, 15) for t in (0.35, 0.45)),
]


@dataclass
class Score:
    found: dict[str, list[int]] = field(default_factory=lambda: {k: [0, 0, 0] for k in KINDS})  # tp, fp, fn
    exact: int = 0


def corpus(kind: str, rng: random.Random, seed: int) -> list[Shot]:
    """One video's shots of ``kind``, drawn from ``rng``; world seeds start at ``seed``."""
    def pan(fast: bool = False) -> tuple[float, float]:
        speed = rng.uniform(6, 14) if fast else rng.uniform(0.3, 3)
        return (rng.choice((-1, 1)) * speed, rng.uniform(-1, 1) * speed / 3)

    if kind == "still":
        return [Shot(rng.randint(200, 260), seed, pan=(0.0, 0.0), objects=4, object_speed=rng.uniform(6, 12))]
    if kind == "flash":
        return [Shot(rng.randint(200, 260), seed, pan=pan(), object_speed=rng.uniform(1, 4),
                     flashes=tuple(sorted(rng.sample(range(20, 190), 3))))]
    if kind == "motion":
        flashes = tuple(sorted(rng.sample(range(20, 260), 3)))
        return [Shot(rng.randint(240, 300), seed, pan=pan(True), objects=3, object_speed=rng.uniform(5, 10),
                     flashes=flashes)]
    count = rng.randint(4, 6)
    if kind == "colour":
        grades = [0.0]
        for _ in range(count - 1):
            grades.append(grades[-1] + rng.choice((-1, 1)) * rng.uniform(60, 180))
        return [Shot(rng.randint(30, 110), seed, grade=grade, pan=pan(), continues=bool(n)) for n, grade in
                enumerate(grades)]
    return [Shot(rng.randint(30, 110), seed + n, pan=pan(fast=rng.random() < 0.25), object_speed=rng.uniform(1, 5),
                 dissolve=rng.randint(8, 24) if kind == "dissolve" and n else 0,
                 palette=seed if kind == "alike" else None) for n in range(count)]


def match(found: list[int], truth: list[int], slack: list[int]) -> tuple[int, int, int]:
    """Greedy one-to-one matching within each true cut's slack: (true positives, false positives, misses)."""
    left = sorted(found)
    hits = 0
    for cut, tolerance in zip(truth, slack, strict=True):
        near = [f for f in left if abs(f - cut) <= tolerance]
        if near:
            left.remove(min(near, key=lambda f: abs(f - cut)))
            hits += 1
    return hits, len(left), len(truth) - hits


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--videos", type=int, default=6, help="videos of each kind")
    parser.add_argument("--width", type=int, default=192)
    parser.add_argument("--height", type=int, default=108)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--parallel", action="store_true", help="time the serial and the parallel scan instead")
    parser.add_argument("--long-seconds", type=float, default=120.0, help="--parallel: a 720p video this long")
    parser.add_argument("--repeat", type=int, default=2, help="--parallel: runs of each, the fastest counted")
    parser.add_argument("--footage", help="--parallel: keep the footage in this folder, and reuse it")
    args = parser.parse_args()
    if args.parallel:
        timed(args)
        return
    rng = random.Random(args.seed)
    scores = {spec: Score() for spec in DETECTORS}
    frames = cuts = 0
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="bench-scenes-") as folder:
        for kind in KINDS:
            for number in range(args.videos):
                shots = corpus(kind, rng, seed=1 + 100 * (KINDS.index(kind) * args.videos + number))
                truth = true_cuts(shots)
                slack = [2 + shot.dissolve // 2 for shot in shots[1:]]
                video = write_footage(Path(folder) / f"{kind}-{number}.mp4", shots, width=args.width,
                                      height=args.height, fps=FPS)
                _, total, found = scan_cuts(video, DETECTORS)
                frames, cuts = frames + total, cuts + len(truth)
                for spec, detected in zip(DETECTORS, found, strict=True):
                    tp, fp, fn = match(detected, truth, slack)
                    tally = scores[spec].found[kind]
                    tally[0], tally[1], tally[2] = tally[0] + tp, tally[1] + fp, tally[2] + fn
                    scores[spec].exact += kind in ("hard", "alike") and len(detected) == len(truth)
    elapsed = time.perf_counter() - started
    print(f"{args.videos} videos of each kind, {frames} frames ({frames / FPS:.0f} s at {FPS:g} fps), {cuts} true "
          f"cuts, {args.width}x{args.height}; {elapsed:.0f} s in all (writing the corpus included)")
    print("P/R = precision/recall; motion, flash, still = false cuts in the videos without a cut; exact = hard "
          "and alike videos whose scene count is right; F1 over all kinds but dissolve")
    header = (f"{'detector':<46} {'hard P/R':>11} {'alike P/R':>11} {'colour P/R':>11} {'motion':>6} {'flash':>5} "
              f"{'still':>5} {'dissolve P/R':>12} {'exact':>6} {'F1':>5}")
    print(header)
    print("-" * len(header))
    for spec in DETECTORS:
        score = scores[spec]
        cells = {kind: _pr(*score.found[kind]) for kind in KINDS}
        scored = ("hard", "alike", "colour", *NO_CUT)
        tp, fp, fn = (sum(score.found[k][i] for k in scored) for i in range(3))
        f1 = 2 * tp / max(1, 2 * tp + fp + fn)
        chosen = " <- chosen" if spec == DETECTOR else ""
        print(f"{spec.label:<46} {cells['hard']:>11} {cells['alike']:>11} {cells['colour']:>11} "
              f"{score.found['motion'][1]:>6} {score.found['flash'][1]:>5} {score.found['still'][1]:>5} "
              f"{cells['dissolve']:>12} {score.exact:>3}/{2 * args.videos:<2} {f1:>5.2f}{chosen}")


def write_corpus(folder: Path, args: argparse.Namespace) -> list[Path]:
    """The scoring corpus (every kind, ``--videos`` of each), as the scoring mode writes it."""
    rng = random.Random(args.seed)
    videos = []
    for kind in KINDS:
        for number in range(args.videos):
            shots = corpus(kind, rng, seed=1 + 100 * (KINDS.index(kind) * args.videos + number))
            video = folder / f"{kind}-{number}-{args.width}x{args.height}-seed{args.seed}.mp4"
            videos.append(video if video.exists() else write_footage(video, shots, width=args.width,
                                                                     height=args.height, fps=FPS))
    return videos


def clock(videos: list[Path], mode: str) -> tuple[float, float, dict[str, dict[str, Any]]]:
    """Wall seconds, CPU seconds (this process and the workers it waited for) and the records of one scan."""
    def cpu() -> float:
        own, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
        return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime

    shared = detect._scaler
    if mode == "before":  # the scan as it was before #46: a new swscale context for every frame
        detect._scaler = lambda width, height: lambda frame: frame.to_ndarray(width=width, height=height,
                                                                              format="bgr24")
    wall, used = time.perf_counter(), cpu()
    try:
        found = scan_videos(videos, workers=None if mode == "parallel" else 1)
    finally:
        detect._scaler = shared
    return time.perf_counter() - wall, cpu() - used, found


def timed(args: argparse.Namespace) -> None:
    """Serial against parallel on the corpus, then on one long 720p video."""
    print(f"{usable_cores()} usable core(s), load average {os.getloadavg()[0]:.1f} at the start")
    with tempfile.TemporaryDirectory(prefix="bench-scenes-") as scratch:
        folder = Path(args.footage or scratch)
        folder.mkdir(parents=True, exist_ok=True)
        started = time.perf_counter()
        sets = {"corpus": write_corpus(folder, args)}
        if args.long_seconds > 0:
            long = folder / f"long-{args.long_seconds:g}s-720p.mp4"
            if not long.exists():
                write_long_footage(long, long_shots(args.long_seconds))
            sets[f"{args.long_seconds:g} s of 1280x720"] = [long]
        print(f"footage ready in {time.perf_counter() - started:.0f} s")
        for name, videos in sets.items():
            compare(name, videos, args.repeat)


MODES = {"before": "serial, as before #46", "serial": "serial, one scaler", "parallel": "every core"}


def compare(name: str, videos: list[Path], repeat: int) -> None:
    """The fastest of ``repeat`` runs of each mode, interleaved (a shared machine's load moves), cuts checked."""
    runs: dict[str, list[tuple[float, float]]] = {mode: [] for mode in MODES}
    results: dict[str, dict[str, dict[str, Any]]] = {}
    for _ in range(repeat):
        for mode in MODES:
            wall, cpu, results[mode] = clock(videos, mode)
            runs[mode].append((wall, cpu))
    frames = sum(int(record.get("frames", 0)) for record in results["before"].values())
    same = results["before"] == results["serial"] == results["parallel"]
    print(f"{name}: {len(videos)} video(s), {frames} frames; cuts identical in the three modes: {same}")
    best = {mode: min(times) for mode, times in runs.items()}
    for mode, (wall, cpu) in best.items():
        every = ", ".join(f"{w:.1f}" for w, _ in runs[mode])
        print(f"  {MODES[mode]:<22} {wall:6.1f} s wall, {cpu:6.1f} CPU s ({cpu / wall:.2f} cores), "
              f"{frames / wall:5.0f} frames/s   (every run: {every} s)")
    before, serial, parallel = (best[mode][0] for mode in MODES)
    print(f"  speed-up: every core over one scaler {serial / parallel:.2f}x, over before #46 {before / parallel:.2f}x; "
          f"load average {os.getloadavg()[0]:.1f} now")


def _pr(tp: int, fp: int, fn: int) -> str:
    precision = tp / (tp + fp) if tp + fp else 1.0
    recall = tp / (tp + fn) if tp + fn else 1.0
    return f"{precision:.2f}/{recall:.2f}"


if __name__ == "__main__":
    main()
