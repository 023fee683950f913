"""The data-check rules: each mode's metadata and preprocessed data, clip lengths, the data identity."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from ltx_pipeline.errors import BadDataset
from ltx_pipeline.ltx.buckets import Bucket
from ltx_pipeline.ltx.clip_checks import check_clip_lengths, check_media_facts
from ltx_pipeline.ltx.data_check import Check, check_data_identity, check_metadata, format_checks
from ltx_pipeline.ltx.data_identity import data_identity, identity_changes, model_identity
from ltx_pipeline.ltx.metadata import sample_name
from ltx_pipeline.ltx.modes import MODES, Mode
from ltx_pipeline.ltx.precomputed import inspect_precomputed

try:
    import torch
except ImportError:  # only the .precomputed tests need torch, to write .pt files
    torch = None
needs_torch = pytest.mark.skipif(torch is None, reason="torch is not installed")

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "data_check"
SMALL = Bucket(64, 32, 9)  # latents [128, 2, 1, 2]
MEDIA_EXT = {"video": ".mp4", "reference_video": ".mp4", "audio": ".wav", "reference_audio": ".wav",
             "video_mask": ".mp4", "audio_mask": ".wav"}


def codes(checks: list[Check]) -> list[str]:
    return [check.code for check in checks]


def only(checks: list[Check], code: str) -> Check:
    found = [check for check in checks if check.code == code]
    assert len(found) == 1, format_checks(checks)
    return found[0]


def write_metadata(folder: Path, rows: list[dict[str, str]], name: str = "dataset.json",
                   create_media: bool = True) -> Path:
    """Write a metadata file and (optionally) an empty file for every media path it names."""
    folder.mkdir(parents=True, exist_ok=True)
    for row in rows:
        for column, value in row.items():
            if column != "caption" and value and create_media:
                (folder / value).parent.mkdir(parents=True, exist_ok=True)
                (folder / value).touch()
    target = folder / name
    if name.endswith(".jsonl"):
        target.write_text("".join(json.dumps(row) + "\n" for row in rows))
    else:
        target.write_text(json.dumps(rows))
    return target


def mode_rows(mode: Mode, clips: list[str], drop: str | None = None) -> list[dict[str, str]]:
    rows = []
    for clip in clips:
        row = {"caption": f"a clip called {clip}"}
        for column in mode.columns[1:]:
            row[column] = f"{column}s/{clip}{MEDIA_EXT[column]}"
        row.pop(drop, None)
        rows.append(row)
    return rows


# --- metadata ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("mode", list(MODES.values()), ids=list(MODES))
def test_complete_metadata_passes_for_every_mode(tmp_path: Path, mode: Mode) -> None:
    meta = write_metadata(tmp_path, mode_rows(mode, ["a", "b"]))
    report = check_metadata(meta, mode)
    assert report.checks == [] and report.ok
    assert report.rows == 2
    primary = "video" if mode.video_media else "audio"
    assert report.primary_media() == (f"{primary}s/a{MEDIA_EXT[primary]}", f"{primary}s/b{MEDIA_EXT[primary]}")


@pytest.mark.parametrize(("mode", "column"), [(m, c) for m in MODES.values() for c in m.columns],
                         ids=[f"{m.name}-{c}" for m in MODES.values() for c in m.columns])
def test_missing_required_column_is_named(tmp_path: Path, mode: Mode, column: str) -> None:
    meta = write_metadata(tmp_path, mode_rows(mode, ["a"], drop=column))
    report = check_metadata(meta, mode)
    check = only(report.checks, "missing-column")
    assert check.severity == "error" and not report.ok
    assert f"`{column}`" in check.message and mode.name in check.message
    assert check.path == str(meta)


def test_legacy_column_aliases_are_accepted() -> None:
    report = check_metadata(FIXTURES / "legacy_v2v" / "dataset.csv", MODES["v2v"])
    assert report.checks == []
    assert report.column_map == {"caption": "caption", "video": "media_path", "reference_video": "ref_media_path"}
    assert report.sample_names() == {"clips/a.mp4": "clips/a.pt", "clips/b.mp4": "clips/b.pt"}


def test_missing_media_names_ten_and_counts_the_rest(tmp_path: Path) -> None:
    rows = [{"caption": "x", "video": f"videos/{i:02d}.mp4"} for i in range(13)]
    meta = write_metadata(tmp_path, rows, name="dataset.jsonl", create_media=False)
    (tmp_path / "videos").mkdir()
    (tmp_path / "videos" / "00.mp4").touch()
    check = only(check_metadata(meta, MODES["t2v"]).checks, "missing-media")
    assert check.severity == "error"
    assert check.message.startswith("12 file(s) in `video`")
    assert "videos/01.mp4" in check.message and "videos/10.mp4" in check.message
    assert "videos/11.mp4" not in check.message and "and 2 more" in check.message
    assert str(tmp_path) in (check.fix or "")


def test_duplicates_empty_captions_and_empty_paths_are_reported(tmp_path: Path) -> None:
    rows = [{"caption": "first", "video": "videos/a.mp4"}, {"caption": "", "video": "videos/b.mp4"},
            {"caption": "second", "video": "./videos/a.mp4"}, {"caption": "no clip", "video": " "}]
    report = check_metadata(write_metadata(tmp_path, rows), MODES["t2v"])
    dup = only(report.checks, "duplicate-media")
    assert dup.severity == "warning" and "videos/a.mp4 (x2)" in dup.message and "last row's caption" in dup.message
    empty = only(report.checks, "empty-caption")
    assert empty.severity == "warning" and "videos/b.mp4" in empty.message
    path = only(report.checks, "empty-media-path")
    assert path.severity == "error" and "rows 4" in path.message


def test_caption_in_another_column_needs_a_rename(tmp_path: Path) -> None:
    meta = write_metadata(tmp_path, [{"text": "a cat", "video": "videos/a.mp4"}])
    check = only(check_metadata(meta, MODES["t2v"]).checks, "missing-column")
    assert (check.fix or "").startswith("rename column `text` to `caption` in ")
    assert check_metadata(meta, MODES["t2v"], caption_column="text").checks == []


def test_unreadable_metadata_raises_one_line(tmp_path: Path) -> None:
    bad = tmp_path / "dataset.json"
    bad.write_text('{"caption": "not a list"}')
    with pytest.raises(BadDataset, match="not a list of objects"):
        check_metadata(bad, MODES["t2v"])


def test_sample_names_follow_the_trainer_naming(tmp_path: Path) -> None:
    assert sample_name(tmp_path, "videos/a.mp4") == "videos/a.pt"
    assert sample_name(tmp_path, "/mnt/x/a.mov") == "mnt/x/a.pt"


# --- clip lengths -----------------------------------------------------------------------------------

def test_short_clips_are_named_with_the_three_options() -> None:
    counts = {"/d/a.mp4": 121, "/d/b.mp4": 20, "/d/c.mp4": 48, "/d/d.mp4": None}
    checks = check_clip_lengths(counts, [Bucket(960, 544, 121), Bucket(512, 288, 49)])
    short = only(checks, "short-clip")
    assert short.severity == "warning"
    assert "2 of 3 clip(s)" in short.message and "512x288x49" in short.message
    assert "b.mp4 (20 frames)" in short.message and "c.mp4 (48 frames)" in short.message
    assert "a.mp4" not in short.message
    fix = short.fix or ""
    assert "smaller bucket such as 512x288x17" in fix and "batch_size: 1" in fix and "accept" in fix
    assert only(checks, "unmeasured-clip").severity == "info"


def test_every_clip_short_is_an_error_and_long_clips_pass() -> None:
    assert only(check_clip_lengths({"a.mp4": 10}, [Bucket(512, 288, 49)]), "no-usable-clips").severity == "error"
    assert check_clip_lengths({"a.mp4": 49, "b.mp4": 300}, [Bucket(512, 288, 49)]) == []


# --- data identity ---------------------------------------------------------------------------------

def safetensors(path: Path, metadata: dict[str, str], payload: bytes = bytes(16)) -> Path:
    """A minimal safetensors file: 8-byte header length, a JSON header, then the tensor bytes."""
    header = {"w": {"dtype": "F32", "shape": [2, 2], "data_offsets": [0, 16]}, "__metadata__": metadata}
    raw = json.dumps(header).encode()
    raw += b" " * (-len(raw) % 8)
    path.write_bytes(len(raw).to_bytes(8, "little") + raw + payload)
    return path


def test_model_identity_is_the_content_of_the_header_not_the_path(tmp_path: Path) -> None:
    model = safetensors(tmp_path / "ltx-2.3.safetensors", {"config": "a"})
    ident = model_identity(str(model))
    assert ident["kind"] == "safetensors" and ident["size"] == model.stat().st_size
    assert ident["content"].startswith("sha256:") and ident["path"] == str(model.resolve())
    moved = tmp_path / "elsewhere" / "renamed.safetensors"
    moved.parent.mkdir()
    moved.write_bytes(model.read_bytes())
    assert model_identity(str(moved))["content"] == ident["content"]  # same bytes at another path: same model
    other = safetensors(tmp_path / "ltx-2.5.safetensors", {"config": "b"})
    assert model_identity(str(other))["content"] != ident["content"]
    # Only the header (and the size) is read: the tensor bytes are not hashed.
    safetensors(tmp_path / "same-header.safetensors", {"config": "a"}, payload=b"\x01" * 16)
    assert model_identity(str(tmp_path / "same-header.safetensors"))["content"] == ident["content"]
    plain = tmp_path / "model.bin"
    plain.write_bytes(b"not a safetensors file")
    assert model_identity(str(plain))["kind"] == "file"
    assert model_identity(str(tmp_path / "absent.safetensors"))["kind"] == "missing"
    assert model_identity(None)["kind"] == "missing"


def test_model_identity_cache_is_keyed_by_path_size_and_mtime(tmp_path: Path) -> None:
    model = safetensors(tmp_path / "base.safetensors", {"config": "a"})
    cache: dict[str, Any] = {}
    first = model_identity(str(model), cache)
    entry = cache[str(model.resolve())]
    assert entry["size"] == model.stat().st_size and entry["mtime_ns"] == model.stat().st_mtime_ns
    entry["identity"] = {**first, "content": "sha256:cached"}
    assert model_identity(str(model), cache)["content"] == "sha256:cached"  # unchanged file: header not read
    os.utime(model, ns=(model.stat().st_atime_ns, model.stat().st_mtime_ns + 1_000_000))
    assert model_identity(str(model), cache)["content"] == first["content"]  # touched: read again


def test_text_encoder_folder_identity_is_its_config_and_file_listing(tmp_path: Path) -> None:
    gemma = tmp_path / "gemma"
    gemma.mkdir()
    (gemma / "config.json").write_text('{"model_type": "gemma3"}')
    (gemma / "model.safetensors").write_bytes(b"g" * 5)
    (gemma / ".cache").mkdir()
    (gemma / ".cache" / "download.lock").write_text("x")
    ident = model_identity(str(gemma))
    assert ident["kind"] == "folder" and ident["files"] == [["config.json", 24], ["model.safetensors", 5]]
    (gemma / ".cache" / "download.lock").write_text("changed")
    assert model_identity(str(gemma))["content"] == ident["content"]  # hidden entries do not count
    (gemma / "tokenizer.json").write_text("{}")
    assert model_identity(str(gemma))["content"] != ident["content"]


def test_data_identity_covers_models_buckets_and_flags(tmp_path: Path) -> None:
    model = model_identity(str(safetensors(tmp_path / "a.safetensors", {"config": "a"})))
    other = model_identity(str(safetensors(tmp_path / "b.safetensors", {"config": "b"})))
    gemma = tmp_path / "gemma"
    gemma.mkdir()
    (gemma / "config.json").write_text("{}")
    encoder = model_identity(str(gemma))
    base = data_identity(model, encoder, "64x64x17", trigger=None)
    assert base["digest"].startswith("sha256:")
    assert data_identity(model, encoder, "64x64x17", trigger=None)["digest"] == base["digest"]
    assert identity_changes(base, data_identity(model, encoder, "64x64x17", trigger=None)) == {}
    changed = identity_changes(base, data_identity(other, encoder, "96x64x17", trigger="fx", flags=["--skip-audio"]))
    assert set(changed) == {"model", "buckets", "flags"}
    assert changed["model"].startswith("a.safetensors (") and "-> b.safetensors (" in changed["model"]
    assert changed["buckets"] == "64x64x17 -> 96x64x17"


def test_a_users_data_made_with_another_model_is_refused_with_the_fresh_preprocess_fix(tmp_path: Path) -> None:
    model = model_identity(str(safetensors(tmp_path / "ltx-2.3.safetensors", {"config": "a"})))
    other = model_identity(str(safetensors(tmp_path / "ltx-2.5.safetensors", {"config": "b"})))
    gemma = model_identity(str(tmp_path))
    recorded = data_identity(model, gemma, "64x64x17", trigger=None)
    assert check_data_identity(recorded, data_identity(model, gemma, "64x64x17", trigger=None), "pre") == []
    switched = only(check_data_identity(recorded, data_identity(other, gemma, "64x64x17", trigger=None), "pre"),
                    "data-identity")
    assert switched.severity == "error"
    assert "ltx-2.3.safetensors (" in switched.message and "ltx-2.5.safetensors (" in switched.message
    assert "--fresh-preprocess" in (switched.fix or "") and str(tmp_path / "ltx-2.3.safetensors") in switched.fix
    flags = only(check_data_identity(recorded, data_identity(model, gemma, "64x64x17", trigger="fx"), "pre"),
                 "data-flags")
    assert flags.severity == "warning"
    unproven = only(check_data_identity(None, recorded, "pre"), "data-identity-unproven")
    assert unproven.severity == "warning" and "cannot prove" in unproven.message
    assert "--fresh-preprocess" in (unproven.fix or "")


# --- .precomputed -----------------------------------------------------------------------------------

def torch_load(path: Path) -> Any:
    return torch.load(path, weights_only=True, map_location="cpu")


def sample_for(source: str, bucket: Bucket) -> dict[str, Any]:
    grid = (bucket.latent_frames, bucket.latent_height, bucket.latent_width)
    if source in ("latents", "reference_latents"):
        return {"latents": torch.zeros(128, *grid, dtype=torch.bfloat16), "num_frames": grid[0],
                "height": grid[1], "width": grid[2], "fps": 24.0}
    if source in ("audio_latents", "reference_audio_latents"):
        return {"latents": torch.zeros(8, 5, 16), "num_time_steps": 5, "frequency_bins": 16, "duration": 0.2}
    if source == "conditions":
        return {"video_prompt_embeds": torch.zeros(16, 4), "prompt_attention_mask": torch.ones(16, dtype=torch.bool)}
    if source == "video_masks":
        return {"mask": torch.zeros(*grid)}
    return {"mask": torch.zeros(5)}


def build(root: Path, mode: Mode, names: list[str], bucket: Bucket = SMALL,
          skip: dict[str, set[str]] | None = None) -> Path:
    """A ``.precomputed`` folder for ``mode`` with one file per name in each source, minus ``skip``."""
    for source in mode.precomputed_dirs:
        (root / source).mkdir(parents=True, exist_ok=True)
        for name in names:
            if name not in (skip or {}).get(source, set()):
                target = root / source / f"{name}.pt"
                target.parent.mkdir(parents=True, exist_ok=True)
                torch.save(sample_for(source, bucket), target)
    return root


@needs_torch
@pytest.mark.parametrize("mode", list(MODES.values()), ids=list(MODES))
def test_complete_precomputed_passes_for_every_mode(tmp_path: Path, mode: Mode) -> None:
    root = build(tmp_path / ".precomputed", mode, ["videos/a", "videos/b"])
    report = inspect_precomputed(root, mode, [SMALL], load=torch_load,
                                 metadata_media=["videos/a.mp4", "videos/b.mp4"], metadata_dir=tmp_path)
    assert report.checks == [], format_checks(report.checks)
    assert report.usable_samples == 2
    assert report.counts == dict.fromkeys(mode.precomputed_dirs, 2)
    assert report.stored_bucket == ("64x32x9" if "latents" in mode.precomputed_dirs else None)


@needs_torch
def test_latents_at_another_bucket_stop_with_three_options(tmp_path: Path) -> None:
    root = build(tmp_path / ".precomputed", MODES["t2v"], ["a"], bucket=SMALL)
    report = inspect_precomputed(root, MODES["t2v"], [Bucket(96, 64, 17)], load=torch_load)
    check = only(report.checks, "shape-mismatch")
    assert check.severity == "error" and not report.ok
    assert "64x32x9" in check.message and "96x64x17" in check.message
    fix = check.fix or ""
    assert "reuse it at its resolution" in fix and ".precomputed-v2" in fix and "abort" in fix


@needs_torch
def test_dropped_and_unmatched_clips_are_named(tmp_path: Path) -> None:
    mode = MODES["video-inpaint"]  # latents, video_masks, conditions: no audio gate involved
    root = build(tmp_path / ".precomputed", mode, ["videos/a", "videos/b", "videos/c", "videos/d"],
                 skip={"latents": {"videos/c"}, "conditions": {"videos/b"}, "video_masks": {"videos/d"}})
    media = ["videos/a.mp4", "videos/b.mp4", "videos/c.mp4", "videos/e.mp4"]
    report = inspect_precomputed(root, mode, [SMALL], load=torch_load, metadata_media=media, metadata_dir=tmp_path)
    assert report.usable_samples == 1  # only videos/a has every source
    dropped = [c for c in report.checks if c.code == "dropped-clip"]
    latents = next(c for c in dropped if c.path == str(root / "latents"))
    assert "2 of 4 clip(s)" in latents.message and "videos/c.mp4" in latents.message
    assert "videos/e.mp4" in latents.message and "smaller bucket" in (latents.fix or "")
    assert report.dropped["conditions"] == ("videos/b.mp4", "videos/e.mp4")
    unmatched = {c.path: c.message for c in report.checks if c.code == "unmatched-sample"}
    assert "videos/b.pt" in unmatched[str(root / "conditions")]
    assert "videos/d.pt" in unmatched[str(root / "video_masks")]
    extra = only(report.checks, "extra-samples")
    assert "videos/d.pt" in extra.message


@needs_torch
@pytest.mark.parametrize("state", ["empty", "absent"])
def test_audio_run_without_audio_latents_hits_the_gate(tmp_path: Path, state: str) -> None:
    root = build(tmp_path / ".precomputed", MODES["t2v"], ["a"], skip={"audio_latents": {"a"}})
    if state == "absent":
        (root / "audio_latents").rmdir()
    report = inspect_precomputed(root, MODES["t2v"], [SMALL], load=torch_load)
    gate = only(report.checks, "audio-gate")
    assert gate.severity == "error" and "audio_latents" in gate.message
    assert "missing-subfolder" not in codes(report.checks)


@needs_torch
def test_descends_into_dot_precomputed_and_reports_missing_sources(tmp_path: Path) -> None:
    build(tmp_path / "dataset" / ".precomputed", MODES["v2v"], ["a"], skip={})
    (tmp_path / "dataset" / ".precomputed" / "reference_latents" / "a.pt").unlink()
    (tmp_path / "dataset" / ".precomputed" / "reference_latents").rmdir()
    report = inspect_precomputed(tmp_path / "dataset", MODES["v2v"], [SMALL], load=torch_load)
    assert report.root == str(tmp_path / "dataset" / ".precomputed")
    missing = only(report.checks, "missing-subfolder")
    assert "reference_latents" in missing.message


@needs_torch
def test_legacy_names_and_formats_are_accepted(tmp_path: Path) -> None:
    root = tmp_path / ".precomputed"
    for sub in ("latents", "conditions"):
        (root / sub).mkdir(parents=True)
    legacy_latents = {"latents": torch.zeros(4, 128), "num_frames": 2, "height": 1, "width": 2}  # [seq, C]
    torch.save(legacy_latents, root / "latents" / "latent_1.pt")
    torch.save({"prompt_embeds": torch.zeros(16, 4), "prompt_attention_mask": torch.ones(16)},
               root / "conditions" / "condition_1.pt")
    report = inspect_precomputed(root, MODES["video-outpaint"], [SMALL], load=torch_load)
    assert report.checks == [] and report.usable_samples == 1 and report.stored_bucket == "64x32x9"


@needs_torch
def test_broken_samples_and_leftover_temp_files(tmp_path: Path) -> None:
    root = build(tmp_path / ".precomputed", MODES["video-outpaint"], ["a"])
    (root / "latents" / "a.pt").write_bytes(b"not a torch file")
    torch.save({"text": torch.zeros(3)}, root / "conditions" / "a.pt")
    (root / "latents" / f"b.pt.tmp.{os.getpid()}").write_bytes(b"half")
    report = inspect_precomputed(root, MODES["video-outpaint"], [SMALL], load=torch_load)
    assert report.counts == {"conditions": 1, "latents": 1}
    assert only(report.checks, "unreadable-sample").severity == "error"
    assert "prompt_attention_mask" in only(report.checks, "bad-sample").message
    assert only(report.checks, "unfinished-preprocess").severity == "warning"


@needs_torch
def test_missing_root_is_an_error(tmp_path: Path) -> None:
    report = inspect_precomputed(tmp_path / "nope", MODES["t2v"], [SMALL], load=torch_load)
    assert codes(report.checks) == ["missing-precomputed"]


@needs_torch
def test_a_shape_mismatch_names_the_sample_file_by_its_whole_path(tmp_path: Path) -> None:
    """A clip outside the metadata folder mirrors its absolute path under latents/ (facts §6.2): the
    message names the sample file itself, not ``latents`` glued to the clip's absolute path."""
    root = tmp_path / "overfit" / ".precomputed"
    name = "tmp/data/videos/clip0"  # what /tmp/data/videos/clip0.mp4 becomes
    build(root, MODES["t2v"], [name], bucket=SMALL)
    check = only(inspect_precomputed(root, MODES["t2v"], [Bucket(96, 64, 17)], load=torch_load).checks,
                 "shape-mismatch")
    sample = root / "latents" / "tmp" / "data" / "videos" / "clip0.pt"
    assert f"(sample {sample}:" in check.message
    assert "sample latents" not in check.message


def _facts(fps: float, width: int, height: int, has_audio: bool) -> dict:
    return {"kind": "video", "fps": fps, "width": width, "height": height, "has_audio": has_audio}


def test_media_facts_report_the_fps_and_size_spread_and_leave_sound_to_the_plan() -> None:
    facts = {"/d/a.mp4": _facts(24.0, 640, 360, True), "/d/b.mp4": _facts(30.0, 640, 360, False),
             "/d/c.mp4": _facts(24.0, 1280, 720, True)}
    checks = {c.code: c for c in check_media_facts(facts)}
    assert "24 fps (2), 30 fps (1)" in checks["media-spread"].message
    assert "640x360 (2), 1280x720 (1)" in checks["media-spread"].message
    # Silent clips are decided before approval (ltx.audio_choice), not warned about after the gates.
    assert set(checks) == {"media-spread"}


def test_usable_rows_leave_out_the_clips_each_stage_skips_across_generated_datasets(tmp_path) -> None:
    """The count batch sizes and ranks are judged on: rows less the clips shorter than a stage's smallest bucket
    (preprocessing skips them), the fewest over the stages; unmeasured clips count as kept. Compared with a direct
    count over generated frame counts, buckets and stages."""
    import random

    from ltx_pipeline.ltx.buckets import Bucket
    from ltx_pipeline.ltx.clip_checks import usable_rows

    rng = random.Random(7)
    for _ in range(200):
        media = [f"media/c{i}.mp4" for i in range(rng.randint(0, 9))]
        counts = {str(tmp_path / m): rng.choice([None, 1, 9, 17, 25, 33, 49]) for m in media}
        stages = [[Bucket(64, 64, rng.choice([9, 17, 25, 33])) for _ in range(rng.randint(1, 3))]
                  for _ in range(rng.randint(1, 3))]
        expected = min(sum(1 for m in media if counts[str(tmp_path / m)] is None
                           or counts[str(tmp_path / m)] >= min(b.frames for b in stage)) for stage in stages)
        assert usable_rows(len(media), media, tmp_path, counts, stages) == expected
