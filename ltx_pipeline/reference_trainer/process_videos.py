"""``python -m ltx_pipeline.reference_trainer.process_videos DATASET --resolution-buckets ... --output-dir ...``.

The toy's ``scripts/process_videos.py``, the video half of its ``preprocess`` (NOT LTX-2): the same options
as the trainer's script (``--resolution-buckets``, ``--output-dir`` for the latents, ``--model-path``,
``--video-column`` defaulting to ``media_path``, ``--with-audio`` with ``--audio-output-dir``, ``--overwrite``),
and for every clip exactly the latents (and audio latents) ``preprocess`` writes, byte for byte, under the
same names: skipped clips, their warnings and never overwriting included.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ltx_pipeline.reference_trainer.preprocess import (
    buckets_or_exit,
    check_paths,
    read_metadata,
    toy_encoding,
    video_payloads,
    write_payloads,
)

__all__ = ["main"]


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m ltx_pipeline.reference_trainer.process_videos",
                                     description="Reference video preprocessing (toy VAE, NOT LTX-2).")
    parser.add_argument("dataset_file", type=Path, help=".csv, .json or .jsonl metadata file")
    parser.add_argument("--resolution-buckets", required=True, help='"WxHxF;WxHxF"')
    parser.add_argument("--output-dir", type=Path, required=True, help="where the video latents go")
    parser.add_argument("--model-path", type=Path, required=True, help="reference base .safetensors")
    parser.add_argument("--video-column", default="media_path")
    parser.add_argument("--with-audio", action="store_true", help="also encode each clip's sound")
    parser.add_argument("--audio-output-dir", type=Path, help="where the audio latents go (with --with-audio)")
    parser.add_argument("--overwrite", action="store_true")
    return parser


def main(argv: list[str] | None = None) -> int:
    """Encode every clip's latents; returns the exit code (2 for usage errors)."""
    parser = _parser()
    args = parser.parse_args(argv)
    if args.with_audio and args.audio_output_dir is None:
        parser.error("--audio-output-dir is required when --with-audio is set")
    buckets = buckets_or_exit(parser, args.resolution_buckets)
    check_paths(parser, ("--model-path", args.model_path), ("DATASET_FILE", args.dataset_file))
    rows = read_metadata(args.dataset_file)
    if rows and args.video_column not in rows[0]:
        raise ValueError(f"Column '{args.video_column}' not found in {args.dataset_file}")
    if len(buckets) > 1:
        print("WARNING  Using multiple resolution buckets. Training batch size must be 1.")
    encoding = toy_encoding(args.model_path, args.dataset_file.parent, buckets, "", args.video_column,
                            trigger=None, audio=args.with_audio)
    folders = {"latents": args.output_dir, "audio_latents": args.audio_output_dir}
    counts = {"latents": 0, "audio_latents": 0, "existing": 0, "skipped": 0}
    for row in rows:
        sample = video_payloads(row, encoding)
        if sample is None:
            counts["skipped"] += 1
            continue
        write_payloads(folders, sample[0], sample[1], args.overwrite, counts)
    print(f"✅ Wrote {counts['latents']} latents, {counts['audio_latents']} audio latents to {args.output_dir}; "
          f"kept {counts['existing']} existing files; skipped {counts['skipped']} media files")
    return 0


if __name__ == "__main__":
    sys.exit(main())
