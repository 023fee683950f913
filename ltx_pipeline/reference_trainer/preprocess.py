"""``python -m ltx_pipeline.reference_trainer.preprocess DATASET --resolution-buckets ... --model-path ...``.

The reference trainer's ``process_dataset.py``: builds ``.precomputed/`` (or ``--output-dir``) from
a metadata file (.csv, .json list, .jsonl) with a caption column and a video column, with no Gemma
and a toy VAE. Each clip is read with PyAV (``ltx.media``): its first F frames are resized keeping
the aspect ratio and centre-cropped to the chosen bucket, as the trainer prepares them, and encoded
by the toy VAE (``vae.encode``) into latents [128, F', H/32, W/32]. Audio latents (25 steps per
second: a log-band spectrum of the clip's own sound, ``vae.encode_audio``) are written for media with
an audio track unless ``--skip-audio``; caption features come from the toy text encoder keyed to the
base model (``--model-path``). Bucket choice, skipping of clips shorter than the smallest bucket and
of unreadable files (the real script's ``Skipping video at <path> - has N frames, ...`` and
``Failed to read video at <path>: <why>`` lines), output naming, never
overwriting without ``--overwrite``, atomic ``.pt.tmp.<pid>`` writes and bucket errors (exit 2)
follow facts §6.1-§6.3. Its two halves, ``process_videos`` (latents and their sound) and ``process_captions``
(conditions), are the trainer's split scripts: together they write these same files, byte for byte.
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["Encoding", "buckets_or_exit", "caption_payload", "check_paths", "main", "parse_buckets",
           "read_metadata", "toy_encoding", "video_payloads", "write_payloads"]

CAPTION_COLUMNS = ("caption", "text", "prompt")
VIDEO_COLUMNS = ("video", "media_path", "video_path")


class BucketError(ValueError):
    """A bucket that breaks the VAE's geometry rules (reported as a usage error, exit 2)."""


def parse_buckets(text: str) -> list[tuple[int, int, int]]:
    """``"WxHxF;..."`` -> [(F, H, W), ...]; malformed tokens raise a plain ValueError, as the trainer."""
    buckets = []
    for token in text.split(";"):
        width, height, frames = (int(part) for part in token.split("x"))
        if width % 32 or height % 32:
            raise BucketError(f"Width and height must be multiples of 32x32, got {width}x{height}")
        if frames % 8 != 1:
            raise BucketError(f"Number of frames must be a multiple of 8 plus 1, got {frames}")
        buckets.append((frames, height, width))
    return buckets


def read_metadata(path: Path) -> list[dict]:
    if path.suffix == ".csv":
        with open(path, newline="", encoding="utf-8") as handle:
            return list(csv.DictReader(handle))
    if path.suffix == ".jsonl":
        return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    if path.suffix == ".json":
        return list(json.loads(path.read_text(encoding="utf-8")))
    raise ValueError(f"Unsupported dataset file {path}: use .csv, .json or .jsonl")


def _pick_column(rows: list[dict], forced: str | None, names: tuple[str, ...]) -> str | None:
    keys = set(rows[0]) if rows else set()
    if forced:
        return forced if forced in keys else None
    return next((name for name in names if name in keys), None)


def choose_bucket(buckets: list[tuple[int, int, int]], frames: int, width: int, height: int,
                  ) -> tuple[int, int, int] | None:
    """Closest aspect ratio, then more frames, then larger area, among buckets that fit the clip."""
    fitting = [b for b in buckets if b[0] <= frames]
    if not fitting:
        return None
    aspect = math.log(width / height) if width and height else 0.0
    return min(fitting, key=lambda b: (abs(aspect - math.log(b[2] / b[1])), -b[0], -b[1] * b[2]))


def _output_name(media: Path, dataset_dir: Path) -> Path:
    """As the trainer's ``process_videos._output_relative`` names it: lexically, symlinks not followed (a
    staged ``media/clip_000.mp4`` link gives ``media/clip_000.pt``); outside the folder, the absolute path mirrored."""
    joined = dataset_dir / media  # an absolute media path replaces dataset_dir
    try:
        relative = joined.relative_to(dataset_dir)
    except ValueError:
        relative = Path(*joined.parts[1:]) if joined.is_absolute() else joined
    return relative.with_suffix(".pt")


def _save(payload: dict, path: Path) -> None:
    import torch

    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f"{path.name}.tmp.{os.getpid()}")
    with open(tmp, "wb") as handle:
        torch.save(payload, handle)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(tmp, path)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m ltx_pipeline.reference_trainer.preprocess",
                                     description="Reference preprocessing (toy encoders, NOT LTX-2).")
    parser.add_argument("dataset_path", type=Path, help=".csv, .json or .jsonl metadata file")
    parser.add_argument("--resolution-buckets", help='"WxHxF;WxHxF"')
    parser.add_argument("--model-path", type=Path, required=True, help="reference base .safetensors")
    parser.add_argument("--text-encoder-path", type=Path, required=True, help="must exist (unused by the toy)")
    parser.add_argument("--output-dir", type=Path)
    parser.add_argument("--caption-column")
    parser.add_argument("--video-column")
    parser.add_argument("--lora-trigger")
    parser.add_argument("--skip-audio", action="store_true")
    parser.add_argument("--overwrite", action="store_true")
    return parser


def main(argv: list[str] | None = None) -> int:
    """Preprocess the dataset; returns the exit code (2 for usage errors)."""
    parser = _parser()
    args = parser.parse_args(argv)
    buckets = buckets_or_exit(parser, args.resolution_buckets)
    check_paths(parser, ("--model-path", args.model_path), ("--text-encoder-path", args.text_encoder_path),
                ("DATASET_PATH", args.dataset_path))
    rows = read_metadata(args.dataset_path)
    caption_col, video_col = _columns(rows, args, buckets)
    dataset = toy_encoding(args.model_path, args.dataset_path.parent, buckets, caption_col, video_col,
                           trigger=args.lora_trigger, audio=not args.skip_audio)
    out = args.output_dir or dataset.dir / ".precomputed"
    print(f"Reference preprocessing (toy encoders from {args.model_path}, NOT LTX-2): {len(rows)} media files, "
          f"buckets {args.resolution_buckets} -> {out}")
    counts = {"latents": 0, "conditions": 0, "audio_latents": 0, "existing": 0, "skipped": 0}
    for row in rows:
        sample = video_payloads(row, dataset)
        if sample is None:
            counts["skipped"] += 1
            continue
        name, targets = sample
        targets = {"latents": targets["latents"], "conditions": caption_payload(row, dataset)[1],
                   **{k: v for k, v in targets.items() if k != "latents"}}
        write_payloads({folder: out / folder for folder in targets}, name, targets, args.overwrite, counts)
    print(f"✅ Wrote {counts['latents']} latents, {counts['conditions']} conditions, "
          f"{counts['audio_latents']} audio latents to {out}; kept {counts['existing']} existing files; "
          f"skipped {counts['skipped']} media files")
    return 0


def buckets_or_exit(parser: argparse.ArgumentParser, text: str | None) -> list[tuple[int, int, int]]:
    """The parsed buckets; a bucket breaking the VAE's rules is a usage error (exit 2), as typer's BadParameter."""
    try:
        return parse_buckets(text) if text else []
    except BucketError as error:
        parser.error(f"Invalid value for '--resolution-buckets': {error}")


def check_paths(parser: argparse.ArgumentParser, *named: tuple[str, Path]) -> None:
    """A usage error (exit 2) for the first path that does not exist."""
    for option, path in named:
        if not path.exists():
            parser.error(f"{option} does not exist: {path}")


def write_payloads(folders: dict[str, Path], name: Path, targets: dict[str, dict], overwrite: bool,
                   counts: dict[str, int]) -> None:
    """Save each payload as ``folders[folder] / name``, keeping an existing file unless ``overwrite``."""
    for folder, payload in targets.items():
        path = folders[folder] / name
        if path.exists() and not overwrite:
            counts["existing"] += 1
            continue
        _save(payload, path)
        counts[folder] += 1


def _columns(rows: list[dict], args: argparse.Namespace, buckets: list[tuple[int, int, int]]) -> tuple[str, str]:
    """The caption and media columns to read; a dataset the trainer's script refuses raises as it does."""
    caption_col = _pick_column(rows, args.caption_column, CAPTION_COLUMNS)
    video_col = _pick_column(rows, args.video_column, VIDEO_COLUMNS)
    if caption_col is None:
        raise ValueError(f"No caption column found in {args.dataset_path}; use --caption-column")
    if video_col is None:
        raise ValueError(f"No media column found in {args.dataset_path}; use --video-column")
    if not buckets:
        raise ValueError("--resolution-buckets is required when the dataset has a video column.")
    if len(buckets) > 1:
        print("WARNING  Using multiple resolution buckets. Training batch size must be 1.")
    return caption_col, video_col


@dataclass(frozen=True)
class Encoding:
    """What every row is encoded with: the metadata's folder, the buckets, its columns, the toy model, the
    trigger prepended to captions and whether a clip's sound is encoded."""

    dir: Path
    buckets: list[tuple[int, int, int]]
    caption_col: str
    video_col: str
    arch: Any
    salt: Any
    trigger: str | None
    audio: bool


def toy_encoding(model_path: Path, folder: Path, buckets: list[tuple[int, int, int]], caption_col: str,
                 video_col: str, *, trigger: str | None, audio: bool) -> Encoding:
    """The ``Encoding`` of the toy base model at ``model_path``."""
    from ltx_pipeline.reference_trainer.data import caption_salt
    from ltx_pipeline.reference_trainer.model import read_architecture

    arch = read_architecture(model_path)
    return Encoding(folder, buckets, caption_col, video_col, arch, caption_salt(arch), trigger, audio)


def caption_payload(row: dict, dataset: Encoding) -> tuple[Path, dict]:
    """One row's conditions file name (after its media, as ``process_captions.py``) and its payload."""
    from ltx_pipeline.reference_trainer.data import encode_caption

    caption = str(row[dataset.caption_col])
    if dataset.trigger:
        caption = f"{dataset.trigger.strip()} {caption}"
    embeds, mask = encode_caption(caption, dataset.arch.text_len, dataset.arch.text_dim, dataset.salt)
    payload = {"video_prompt_embeds": embeds, "prompt_attention_mask": mask, "audio_prompt_embeds": embeds.clone()}
    return _output_name(Path(row[dataset.video_col]), dataset.dir), payload


def video_payloads(row: dict, dataset: Encoding) -> tuple[Path, dict[str, dict]] | None:
    """One row's output name and its latents (and audio latents); None, said as the trainer says it, for a
    skipped file."""
    import torch

    from ltx_pipeline.ltx.media import BadMedia, decode_audio, decode_video, read_media_info
    from ltx_pipeline.reference_trainer.vae import AUDIO_RATE, encode, encode_audio

    media = Path(row[dataset.video_col])
    source = media if media.is_absolute() else dataset.dir / media
    try:
        info = read_media_info(source)
        bucket = choose_bucket(dataset.buckets, info.frames or 0, info.width, info.height)
        pixels = None if bucket is None else decode_video(source, bucket[0], bucket[1], bucket[2])
    except BadMedia as error:
        print(f"WARNING  Failed to read video at {source}: {error.reason}")
        return None
    if bucket is None or pixels is None:
        print(f"WARNING  Skipping video at {source} - has {info.frames} frames, which is less than the minimum "
              f"required frames ({min(b[0] for b in dataset.buckets)})")
        return None
    frames, height, width = bucket
    latent_shape = (128, (frames - 1) // 8 + 1, height // 32, width // 32)  # encode's grid
    targets = {"latents": {"latents": encode(pixels).to(torch.bfloat16), "num_frames": latent_shape[1],
                           "height": latent_shape[2], "width": latent_shape[3], "fps": info.fps or 24.0}}
    if info.has_audio and dataset.audio:
        duration = frames / (info.fps or 24.0)
        steps = max(1, round(duration * 25))
        try:
            sound = decode_audio(source, AUDIO_RATE, duration)
        except BadMedia as error:
            print(f"WARNING  Failed to read audio at {source}: {error.reason}")
            return None
        targets["audio_latents"] = {
            "latents": encode_audio(sound, steps),
            "num_time_steps": steps, "frequency_bins": 16, "duration": duration}
    return _output_name(media, dataset.dir), targets


if __name__ == "__main__":
    sys.exit(main())
