"""The reference preprocessing: trainer layout and formats, determinism, skips, no overwrite, bucket errors."""

from __future__ import annotations

import pytest
import torch
from conftest import write_dataset


@pytest.fixture()
def base(tmp_path):
    from ltx_pipeline.reference_trainer import make_base

    path = tmp_path / "base.safetensors"
    make_base.main([str(path), "--layers", "1", "--text-len", "10", "--text-dim", "16"])
    return path


def _run(dataset, base, *extra):  # noqa: ANN001, ANN002
    from ltx_pipeline.reference_trainer import preprocess

    return preprocess.main([str(dataset), "--model-path", str(base), "--text-encoder-path", str(base.parent), *extra])


def test_writes_the_trainers_layout_and_shapes_and_skips_short_clips(tmp_path, base, capsys):
    dataset = write_dataset(tmp_path / "data", [("a.mp4", 49, True), ("b.mp4", 20, False), ("short.mp4", 9, True)])
    assert _run(dataset, base, "--resolution-buckets", "64x64x17;64x64x49", "--lora-trigger", "TOK") == 0
    out = capsys.readouterr().out
    assert "short.mp4 - has 9 frames, which is less than the minimum required frames (17)" in out
    assert "Using multiple resolution buckets. Training batch size must be 1." in out
    root = tmp_path / "data" / ".precomputed"
    latents = torch.load(root / "latents" / "videos" / "a.pt", weights_only=True)
    assert latents["latents"].shape == (128, 7, 2, 2) and latents["latents"].dtype == torch.bfloat16
    assert (latents["num_frames"], latents["height"], latents["width"], latents["fps"]) == (7, 2, 2, 24.0)
    assert torch.load(root / "latents" / "videos" / "b.pt", weights_only=True)["latents"].shape == (128, 3, 2, 2)
    conditions = torch.load(root / "conditions" / "videos" / "a.pt", weights_only=True)
    assert conditions["video_prompt_embeds"].shape == (10, 16)
    assert conditions["prompt_attention_mask"].tolist() == [False] * 2 + [True] * 8  # left-padded: trigger + 7 words
    audio = torch.load(root / "audio_latents" / "videos" / "a.pt", weights_only=True)
    assert audio["latents"].shape == (8, round(49 / 24 * 25), 16) and audio["frequency_bins"] == 16
    assert not (root / "audio_latents" / "videos" / "b.pt").exists()  # no audio track
    assert not (root / "latents" / "videos" / "short.pt").exists()
    assert not list(root.rglob("*.tmp*"))


def test_is_deterministic_and_never_overwrites_without_the_flag(tmp_path, base):
    dataset = write_dataset(tmp_path / "data", [("a.mp4", 17, False)])
    out_a, out_b = tmp_path / "x", tmp_path / "y"
    assert _run(dataset, base, "--resolution-buckets", "64x64x17", "--output-dir", str(out_a)) == 0
    assert _run(dataset, base, "--resolution-buckets", "64x64x17", "--output-dir", str(out_b)) == 0
    a = torch.load(out_a / "latents" / "videos" / "a.pt", weights_only=True)["latents"]
    assert torch.equal(a, torch.load(out_b / "latents" / "videos" / "a.pt", weights_only=True)["latents"])
    target = out_a / "latents" / "videos" / "a.pt"
    target.write_bytes(b"user data")
    assert _run(dataset, base, "--resolution-buckets", "64x64x17", "--output-dir", str(out_a)) == 0
    assert target.read_bytes() == b"user data"
    assert _run(dataset, base, "--resolution-buckets", "64x64x17", "--output-dir", str(out_a), "--overwrite") == 0
    assert torch.equal(torch.load(target, weights_only=True)["latents"], a)


@pytest.mark.parametrize(("buckets", "message"), [
    ("100x64x17", "Width and height must be multiples of 32x32, got 100x64"),
    ("64x64x16", "Number of frames must be a multiple of 8 plus 1, got 16"),
])
def test_bad_buckets_are_usage_errors_with_exit_2(tmp_path, base, capsys, buckets, message):
    dataset = write_dataset(tmp_path / "data", [("a.mp4", 17, False)])
    with pytest.raises(SystemExit) as exit_info:
        _run(dataset, base, "--resolution-buckets", buckets)
    assert exit_info.value.code == 2
    assert message in capsys.readouterr().err
