"""Generate cost surfaces autotune has never seen, from the model the shipped surfaces document.

The model (see the header of ``benchmarks/surfaces/h100_80gb.yaml``): weights by quantization, LoRA
optimizer states by rank and optimizer, a fixed overhead, activations per 1k tokens (with or without
checkpointing) times the batch; the validation peak is the weights, the overhead and the validation
activations (plus the optimizer states on the standard config; the low-VRAM config offloads them);
micro-step time from tokens, a GPU speed factor and a factor per knob. A point whose training peak
exceeds the capacity is left out (it runs out of memory). GPUs, buckets, ranks and effective batches
are drawn with a seed, so the set is reproducible.

    python benchmarks/generate_surfaces.py OUT_DIR [--count 12] [--seed 7]
    for f in OUT_DIR/*.yaml; do ltx-pipeline bench autotune --surface "$f" --prior --json; done
"""

from __future__ import annotations

import argparse
import itertools
import random
from pathlib import Path

import yaml

GPUS = [("NVIDIA GeForce RTX 5090", 32607, 1.15), ("NVIDIA RTX A6000", 49140, 1.9), ("NVIDIA L40S", 46068, 1.35),
        ("NVIDIA A40", 46068, 2.1), ("NVIDIA A100-SXM4-80GB", 81920, 1.4), ("NVIDIA H100 80GB HBM3", 81559, 1.0),
        ("NVIDIA H200", 143771, 0.95), ("NVIDIA RTX PRO 6000 Blackwell", 97887, 1.05)]
BUCKETS = ["512x512x49", "768x448x89", "960x544x49", "960x544x89", "960x544x121", "1280x704x49"]


def tokens(bucket: str) -> float:
    width, height, frames = (int(v) for v in bucket.split("x"))
    return (width // 32) * (height // 32) * ((frames - 1) // 8 + 1) / 1000


def surface(rng: random.Random) -> tuple[dict, str]:
    """One surface, and the bucket its numbers are for (the bench plans the tier's default bucket; the
    simulated trainer reads the points whatever the bucket, so the bucket only sets the figures)."""
    name, memory_mib, speed = rng.choice(GPUS)
    capacity = memory_mib / 1024
    low_vram = capacity < 70
    bucket, rank = rng.choice(BUCKETS), rng.choice([16, 32, 64])
    effective = rng.choice([1, 2, 4])
    k = tokens(bucket)
    states = {"adamw8bit": 0.3 * rank / 16, "adamw": 1.2 * rank / 16}
    weights = {"int8-quanto": 21.5, None: 41.0}
    quantizations = ["int8-quanto", None] if low_vram else [None]
    optimizers = ["adamw8bit", "adamw"] if low_vram else ["adamw"]
    checkpointing = [True] if low_vram else [True, False]
    batches = [b for b in (1, 2, 4) if effective % b == 0]
    points = []
    for quant, optimizer, ckpt, batch in itertools.product(quantizations, optimizers, checkpointing, batches):
        activations = (0.7 if ckpt else 10.0) * k * batch
        peak = weights[quant] + states[optimizer] + 2.0 + activations
        if peak > capacity:
            continue  # runs out of memory at its first training step
        validation = weights[quant] + 2.0 + 1.1 * k + (0 if low_vram else states[optimizer])
        step = 0.33 * k * speed * (1.2 if quant else 1.0) * (1.03 if optimizer == "adamw8bit" else 1.0) \
            * (1.25 if ckpt else 1.0) * batch ** 0.2
        points.append({"knobs": {"quantization": quant, "optimizer_type": optimizer, "batch_size": batch,
                                 "enable_gradient_checkpointing": ckpt},
                       "step_time_s": round(step, 3), "peak_vram_gb": round(peak, 2),
                       "validation_peak_vram_gb": round(validation, 2)})
    return {"gpu": {"name": name, "memory_mib": memory_mib, "count": 1},
            "load_time_s": rng.choice([60, 90, 120, 180]), "validation_time_s": rng.choice([20, 30, 45, 60]),
            "per_gpu_batch": effective, "points": points}, bucket


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--count", type=int, default=12)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    args.out.mkdir(parents=True, exist_ok=True)
    made = 0
    while made < args.count:
        data, bucket = surface(rng)
        if not data["points"]:
            continue  # nothing fits at all: not a sweep worth benchmarking
        made += 1
        path = args.out / f"generated_{made:02d}.yaml"
        path.write_text(yaml.safe_dump(data, sort_keys=False))
        print(f"{path}: {data['gpu']['name']}, figures for {bucket}, E={data['per_gpu_batch']}, "
              f"{len(data['points'])} fitting point(s)")


if __name__ == "__main__":
    main()
