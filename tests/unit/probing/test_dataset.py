"""Dataset probing: each kind of dataset path, each bad input, and clip frame counting."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest

from ltx_pipeline.errors import BadDataset
from ltx_pipeline.probing.dataset import classify_dataset, media_files, media_rows, read_clips

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "datasets"
PREPARED = FIXTURES / "prepared"


def make_tree(root: Path, tree: dict[str, str | bytes]) -> Path:
    """Create files under ``root`` from ``{relative path: content}``; a trailing '/' makes a folder."""
    for rel, content in tree.items():
        target = root / rel
        if rel.endswith("/"):
            target.mkdir(parents=True, exist_ok=True)
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            target.write_bytes(content)
        else:
            target.write_text(content)
    return root


def bad(path: Path) -> str:
    with pytest.raises(BadDataset) as info:
        classify_dataset(path)
    text = str(info.value)
    assert "\n" not in text and "Fix:" in text
    return text


def test_json_metadata():
    info = classify_dataset(PREPARED / "dataset.json")
    assert info.kind == "metadata"
    meta = info.metadata
    assert meta.format == "json" and meta.rows == 3
    assert meta.columns == ("caption", "video")
    assert meta.caption_column == "caption"
    assert meta.empty_captions == 1
    (video,) = meta.media_columns
    assert (video.column, video.rows_with_path, video.missing) == ("video", 3, 1)
    assert video.missing_examples == ("videos/missing.mp4",)
    assert meta.precomputed is None
    assert any("videos/missing.mp4" in w and str(PREPARED) in w for w in info.warnings)
    assert any("1 row(s) have an empty caption" in w for w in info.warnings)
    finding = info.to_finding()
    assert finding.status == "warning" and "3 rows" in finding.detail and "1 media files missing" in finding.detail
    json.dumps(info.to_dict())


def test_jsonl_metadata_with_audio_and_blank_lines():
    info = classify_dataset(PREPARED / "dataset.jsonl")
    meta = info.metadata
    assert meta.format == "jsonl" and meta.rows == 2
    columns = {col.column: col for col in meta.media_columns}
    assert set(columns) == {"video", "audio"}
    assert columns["video"].missing == 0
    assert (columns["audio"].missing, columns["audio"].missing_examples) == (1, ("audio/b.wav",))


def test_csv_metadata_reports_text_caption_and_legacy_alias():
    info = classify_dataset(PREPARED / "dataset.csv")
    meta = info.metadata
    assert meta.format == "csv" and meta.rows == 2
    assert meta.columns == ("text", "media_path")
    assert meta.caption_column == "text"
    assert [c.column for c in meta.media_columns] == ["media_path"]
    assert meta.media_columns[0].missing == 0
    joined = " ".join(info.warnings)
    assert "rename column `text` to `caption` in dataset.csv" in joined
    assert "`media_path` is a legacy alias of `video`" in joined


def test_metadata_with_every_media_column_and_absolute_paths(tmp_path):
    clip = make_tree(tmp_path / "elsewhere", {"x.mp4": "v"}) / "x.mp4"
    rows = [{"caption": "c", "video": str(clip), "reference_video": "ref/r.mp4", "reference_audio": "",
             "video_mask": "m.mp4", "audio_mask": None, "ref_media_path": "ref/r.mp4", "audio": "a.wav"}]
    make_tree(tmp_path / "d", {"dataset.json": json.dumps(rows), "ref/r.mp4": "v", "a.wav": "a"})
    meta = classify_dataset(tmp_path / "d" / "dataset.json").metadata
    columns = {c.column: c for c in meta.media_columns}
    assert list(columns) == ["video", "audio", "reference_video", "ref_media_path", "reference_audio",
                             "video_mask", "audio_mask"]
    assert columns["video"].missing == 0  # absolute path kept as is
    assert columns["reference_audio"].rows_with_path == 0
    assert columns["video_mask"].missing == 1


def test_metadata_without_caption_or_media_column(tmp_path):
    make_tree(tmp_path, {"d.json": json.dumps([{"file": "a.mp4"}])})
    info = classify_dataset(tmp_path / "d.json")
    assert info.metadata.caption_column is None
    joined = " ".join(info.warnings)
    assert "No caption column" in joined and "No `video` or `audio` column" in joined


def test_missing_examples_capped_at_ten(tmp_path):
    rows = [{"caption": "c", "video": f"v/{i}.mp4"} for i in range(25)]
    make_tree(tmp_path, {"d.json": json.dumps(rows)})
    (video,) = classify_dataset(tmp_path / "d.json").metadata.media_columns
    assert video.missing == 25 and len(video.missing_examples) == 10


def test_precomputed_beside_metadata(tmp_path):
    make_tree(tmp_path, {
        "dataset.json": json.dumps([{"caption": "c", "video": "a.mp4"}, {"caption": "d", "video": "b.mp4"}]),
        "a.mp4": "v", "b.mp4": "v",
        ".precomputed/latents/a.pt": "x", ".precomputed/latents/b.pt": "x",
        ".precomputed/conditions/a.pt": "x",
    })
    info = classify_dataset(tmp_path / "dataset.json")
    assert info.metadata.precomputed.subfolders == {"conditions": 1, "latents": 2}
    assert any("different numbers of samples" in w for w in info.warnings)


def test_videos_folder_counts_kinds_and_skips_hidden():
    info = classify_dataset(FIXTURES / "raw_clips")
    assert info.kind == "videos_folder"
    media = info.media
    assert (media.videos, media.images, media.audio) == (3, 1, 0)
    assert media.by_extension == {".jpg": 1, ".mov": 1, ".mp4": 1, ".webm": 1}
    assert info.warnings == ()
    assert info.to_finding().status == "ok"
    assert [p.name for p in media_files(FIXTURES / "raw_clips")] == ["a.mp4", "b.MOV", "c.webm", "still.jpg"]


def test_folder_with_metadata_points_at_it():
    info = classify_dataset(PREPARED)
    assert info.kind == "videos_folder"
    assert info.media.metadata_files == ("dataset.csv", "dataset.json", "dataset.jsonl")
    assert (info.media.videos, info.media.audio) == (2, 1)
    assert any("dataset.json" in w and "--dataset" in w for w in info.warnings)


@pytest.mark.parametrize("target", [".precomputed", "."])
def test_precomputed_folder(tmp_path, target):
    make_tree(tmp_path, {
        ".precomputed/latents/videos/a.pt": "x", ".precomputed/latents/videos/b.pt": "x",
        ".precomputed/conditions/videos/a.pt": "x", ".precomputed/conditions/videos/b.pt": "x",
        ".precomputed/audio_latents/": "", "videos/a.mp4": "v",
    })
    info = classify_dataset(tmp_path / target)
    assert info.kind == "precomputed"
    assert info.precomputed.subfolders == {"audio_latents": 0, "conditions": 2, "latents": 2}
    assert info.precomputed.path == str((tmp_path / ".precomputed").absolute())
    assert info.warnings == ()
    if target == ".":
        assert info.media.videos == 1


def test_precomputed_with_leftovers_and_nothing_finished(tmp_path):
    make_tree(tmp_path, {".precomputed/latents/a.pt.tmp.123": "x"})
    info = classify_dataset(tmp_path / ".precomputed")
    assert info.precomputed.leftover_tmp_files == 1
    joined = " ".join(info.warnings)
    assert "holds no .pt files" in joined and "interrupted" in joined


def test_prior_run_lists_complete_pairs_highest_first(tmp_path):
    make_tree(tmp_path, {
        "training_config.yaml": "x: 1\n",
        "checkpoints/lora_weights_step_00500.safetensors": "w",
        "checkpoints/training_state_step_00500.pt": "s",
        "checkpoints/lora_weights_step_02000.safetensors": "w",
        "checkpoints/training_state_step_02000.pt": "s",
        "checkpoints/lora_weights_step_01000.safetensors": "w",
        "checkpoints/training_state_step_01500.pt": "s",
        "samples/step_000500_1.mp4": "v",
    })
    info = classify_dataset(tmp_path)
    assert info.kind == "prior_run"
    run = info.prior_run
    assert [c.step for c in run.checkpoints] == [2000, 500]
    assert run.checkpoints[0].weights.endswith("lora_weights_step_02000.safetensors")
    assert run.checkpoints[0].training_state.endswith("training_state_step_02000.pt")
    assert run.checkpoints[0].training_mode == "lora"
    assert run.weights_without_state == (1000,) and run.state_without_weights == (1500,)
    assert run.has_training_config
    finding = info.to_finding()
    assert finding.status == "warning" and "latest step 2000" in finding.detail
    assert "resume" in finding.next_step


def test_prior_run_full_mode_under_outputs(tmp_path):
    make_tree(tmp_path, {
        "outputs/checkpoints/model_weights_step_00100.safetensors": "w",
        "outputs/checkpoints/training_state_step_00100.pt": "s",
    })
    run = classify_dataset(tmp_path).prior_run
    assert [(c.step, c.training_mode) for c in run.checkpoints] == [(100, "full")]
    assert not run.has_training_config


def test_prior_run_with_only_state_files(tmp_path):
    make_tree(tmp_path, {"checkpoints/training_state_step_02000.pt": "s"})
    info = classify_dataset(tmp_path)
    assert info.kind == "prior_run" and info.prior_run.checkpoints == ()
    assert "No complete checkpoint" in info.warnings[0]


# ---- bad inputs: one line each -------------------------------------------------------------------

def test_missing_path(tmp_path):
    assert "does not exist" in bad(tmp_path / "nope")


def test_unsupported_extension(tmp_path):
    make_tree(tmp_path, {"data.txt": "x"})
    assert "Unsupported dataset file type '.txt'" in bad(tmp_path / "data.txt")


def test_single_video_file_is_a_dataset_the_prepare_phase_splits(tmp_path):
    make_tree(tmp_path, {"long.mp4": "x"})
    info = classify_dataset(tmp_path / "long.mp4")
    assert (info.kind, info.media.videos) == ("video_file", 1)


def test_empty_folder(tmp_path):
    (tmp_path / "empty").mkdir()
    assert "holds no media" in bad(tmp_path / "empty")


def test_folder_with_only_non_media(tmp_path):
    make_tree(tmp_path, {"notes.txt": "x", ".hidden/a.mp4": "v"})
    assert "holds no media" in bad(tmp_path)


@pytest.mark.parametrize(
    ("name", "content", "expected"),
    [
        ("d.json", '[{"caption": "a",\n  "video": }]', "Malformed JSON at line 2 column 12"),
        ("d.json", "", "Malformed JSON at line 1 column 1"),
        ("d.json", '{"caption": "a"}', "not a list of objects"),
        ("d.json", '["a", "b"]', "not a list of objects"),
        ("d.json", "[]", "has no rows"),
        ("d.jsonl", '{"caption": "a"}\n{"caption": \n', "JSONL line 2 is not valid JSON"),
        ("d.jsonl", '{"caption": "a"}\n\n[1, 2]\n', "JSONL line 3 is not a JSON object"),
        ("d.jsonl", "\n\n", "has no rows"),
        ("d.csv", "", "no header row"),
        ("d.csv", "caption,video\n", "has no rows"),
        ("d.csv", "videos/a.mp4,A fox\nvideos/b.mp4,A wave\n", "no header row (its first row holds a media path)"),
        ("d.csv", "caption,video\nA fox, running,videos/a.mp4\n", "CSV line 2 has more fields than the header"),
        ("d.csv", 'caption,video\n"A fox\n', "Malformed CSV"),
    ],
)
def test_bad_metadata(tmp_path, name, content, expected):
    make_tree(tmp_path, {name: content})
    text = bad(tmp_path / name)
    assert expected in text
    assert str(tmp_path / name) in text


def test_metadata_not_utf8(tmp_path):
    make_tree(tmp_path, {"d.csv": b"caption,video\n\xff\xfe bad,a.mp4\n"})
    assert "not UTF-8" in bad(tmp_path / "d.csv")


@pytest.mark.skipif(os.name != "posix" or os.geteuid() == 0, reason="root reads files whatever their mode")
def test_unreadable_metadata(tmp_path):
    target = make_tree(tmp_path, {"d.json": "[]"}) / "d.json"
    target.chmod(0)
    try:
        assert "Cannot read metadata file" in bad(target)
    finally:
        target.chmod(stat.S_IRUSR | stat.S_IWUSR)


# ---- media listing and frame counts --------------------------------------------------------------

def test_media_files_from_metadata():
    assert media_files(PREPARED / "dataset.json") == [
        PREPARED / "videos/a.mp4", PREPARED / "videos/b.mp4", PREPARED / "videos/missing.mp4"]
    assert [p.name for p in media_files(PREPARED / "dataset.csv")] == ["a.mp4", "b.mp4"]


def test_read_clips_reports_facts_and_names_unreadable_files_with_their_rows(tmp_path):
    from ltx_pipeline.ltx.sample_clips import write_clip

    write_clip(tmp_path / "v" / "a.mp4", 25, 64, 96, fps=30.0, audio=True)
    write_clip(tmp_path / "v" / "b.mp4", 9, 64, 64)
    good = (tmp_path / "v" / "a.mp4").read_bytes()
    (tmp_path / "v" / "cut.mp4").write_bytes(good[: len(good) // 2])  # truncated mid-stream
    (tmp_path / "v" / "junk.mp4").write_bytes(b"not a video at all" * 10)
    make_tree(tmp_path, {"v/still.png": "i"})
    from PIL import Image

    Image.new("RGB", (40, 30), (255, 0, 0)).save(tmp_path / "v" / "still.png")
    rows = [{"caption": "c", "video": f"v/{name}"} for name in ("a.mp4", "b.mp4", "cut.mp4", "junk.mp4", "gone.mp4",
                                                               "still.png")]
    metadata = tmp_path / "dataset.json"
    metadata.write_text(json.dumps(rows))
    listed = media_rows(metadata)
    assert [row for row, _ in listed] == [1, 2, 3, 4, 5, 6]
    report = read_clips(listed)
    facts = report.facts
    a = facts[str(tmp_path / "v" / "a.mp4")]
    assert (a["frames"], a["fps"], a["width"], a["height"], a["has_audio"]) == (25, 30.0, 96, 64, True)
    assert facts[str(tmp_path / "v" / "b.mp4")]["frames"] == 9
    assert facts[str(tmp_path / "v" / "still.png")]["frames"] == 1
    assert {Path(p).name: v["row"] for p, v in report.unreadable.items()} == {"cut.mp4": 3, "junk.mp4": 4,
                                                                              "gone.mp4": 5}
    assert "no such file" in report.unreadable[str(tmp_path / "v" / "gone.mp4")]["reason"]
    spread = report.spread()
    assert spread["fps"] == {24.0: 1, 30.0: 1} and spread["with_audio"] == 1
    assert report.to_dict()["min_frames"] == 1


def test_unreadable_metadata_message(tmp_path, monkeypatch):
    """The same path as a chmod-000 file, for runs as root: a read error becomes one line."""
    target = make_tree(tmp_path, {"d.json": "[]"}) / "d.json"

    def refuse(self: Path) -> bytes:
        raise PermissionError(13, "Permission denied", str(self))

    monkeypatch.setattr(Path, "read_bytes", refuse)
    text = bad(target)
    assert "Cannot read metadata file: Permission denied" in text and str(target) in text
