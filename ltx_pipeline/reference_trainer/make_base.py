"""Entry point: ``python -m ltx_pipeline.reference_trainer.make_base OUT.safetensors [options]``.

Creates the reference trainer's frozen base weights from a seed (same seed and sizes, same
bytes), with the architecture in the safetensors metadata. Refuses to overwrite an existing file
unless ``--overwrite``. Not LTX-2 weights: a toy model for the reference trainer only.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

__all__ = ["main"]


def main(argv: list[str] | None = None) -> int:
    """Parse options and write the base file; returns the exit code."""
    parser = argparse.ArgumentParser(prog="python -m ltx_pipeline.reference_trainer.make_base",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("output", type=Path, help="the .safetensors file to create")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--dim", type=int, default=64, help="video hidden size")
    parser.add_argument("--audio-dim", type=int, default=32, help="audio hidden size")
    parser.add_argument("--heads", type=int, default=4)
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--ff-mult", type=int, default=4)
    parser.add_argument("--text-dim", type=int, default=64, help="caption feature size D")
    parser.add_argument("--text-len", type=int, default=32, help="caption token count (LTX-2: 1024)")
    parser.add_argument("--overwrite", action="store_true")
    args = parser.parse_args(argv)
    if args.output.suffix != ".safetensors":
        parser.error(f"the output must end in .safetensors, got {args.output}")
    if args.dim % args.heads or args.audio_dim % args.heads:
        parser.error("--dim and --audio-dim must be multiples of --heads")
    if args.output.exists() and not args.overwrite:
        print(f"{args.output} already exists; pass --overwrite to replace it", file=sys.stderr)
        return 1
    from ltx_pipeline.reference_trainer.model import ToyArchitecture, create_base

    arch = ToyArchitecture(dim=args.dim, heads=args.heads, layers=args.layers, ff_mult=args.ff_mult,
                           audio_dim=args.audio_dim, text_dim=args.text_dim, text_len=args.text_len,
                           seed=args.seed)
    create_base(args.output, arch)
    print(f"Wrote reference toy base model (not LTX-2) to {args.output}: {arch}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
