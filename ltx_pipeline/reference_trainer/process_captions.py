"""``python -m ltx_pipeline.reference_trainer.process_captions DATASET --output-dir ... --model-path ...``.

The toy's ``scripts/process_captions.py``, the text half of its ``preprocess`` (NOT LTX-2): the same options
as the trainer's script (``--output-dir`` for the conditions, ``--model-path``, ``--text-encoder-path``,
``--caption-column`` defaulting to ``caption``, ``--media-column`` defaulting to ``media_path``,
``--lora-trigger``, ``--overwrite``), and for every row exactly the conditions file ``preprocess`` writes,
byte for byte, named after the row's media. As the trainer's script, it reads no media: a row whose clip
the video half skips still gets its conditions.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ltx_pipeline.reference_trainer.preprocess import (
    caption_payload,
    check_paths,
    read_metadata,
    toy_encoding,
    write_payloads,
)

__all__ = ["main"]


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m ltx_pipeline.reference_trainer.process_captions",
                                     description="Reference caption preprocessing (toy text encoder, NOT LTX-2).")
    parser.add_argument("dataset_file", type=Path, help=".csv, .json or .jsonl metadata file")
    parser.add_argument("--output-dir", type=Path, required=True, help="where the conditions go")
    parser.add_argument("--model-path", type=Path, required=True, help="reference base .safetensors")
    parser.add_argument("--text-encoder-path", type=Path, required=True, help="must exist (unused by the toy)")
    parser.add_argument("--caption-column", default="caption")
    parser.add_argument("--media-column", default="media_path", help="names each output after this column")
    parser.add_argument("--lora-trigger")
    parser.add_argument("--overwrite", action="store_true")
    return parser


def main(argv: list[str] | None = None) -> int:
    """Encode every row's caption; returns the exit code (2 for usage errors)."""
    parser = _parser()
    args = parser.parse_args(argv)
    check_paths(parser, ("--model-path", args.model_path), ("--text-encoder-path", args.text_encoder_path),
                ("DATASET_FILE", args.dataset_file))
    rows = read_metadata(args.dataset_file)
    for row in rows:
        for column in (args.caption_column, args.media_column):
            if column not in row:
                raise ValueError(f"Key '{column}' not found in entry: {row}")  # as the trainer's script
    encoding = toy_encoding(args.model_path, args.dataset_file.parent, [], args.caption_column, args.media_column,
                            trigger=args.lora_trigger, audio=False)
    counts = {"conditions": 0, "existing": 0}
    for row in rows:
        name, payload = caption_payload(row, encoding)
        write_payloads({"conditions": args.output_dir}, name, {"conditions": payload}, args.overwrite, counts)
    print(f"✅ Wrote {counts['conditions']} conditions to {args.output_dir}; kept {counts['existing']} existing files")
    return 0


if __name__ == "__main__":
    sys.exit(main())
