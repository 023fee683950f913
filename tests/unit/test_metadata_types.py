"""Metadata with wrong types (a number as a caption, a list as a media path) is refused before the
plan with exit 2, every bad cell named, and nothing of the run written (#33).

JSON and JSONL hold types; in a CSV every cell is text, so a number-like caption there is a caption.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ltx_pipeline.cli import main
from ltx_pipeline.ltx.data_check import check_metadata
from ltx_pipeline.ltx.modes import get_mode
from tests.conftest import H100_SMI, mp4_bytes

ROWS = [
    {"caption": 7, "video": "videos/a.mp4"},
    {"caption": "a red fox", "video": ["videos/b.mp4", "videos/c.mp4"]},
    {"caption": "a grey wolf", "video": "videos/c.mp4"},
]
NAMED = ("row 1 `caption` is a number (7), must be text",
         'row 2 `video` is a list (["videos/b.mp4", "videos/c.mp4"]), must be a media path as text')


def _dataset(root: Path, name: str, text: str) -> Path:
    (root / "videos").mkdir(parents=True, exist_ok=True)
    for clip in ("a", "b", "c"):
        (root / "videos" / f"{clip}.mp4").write_bytes(mp4_bytes())
    path = root / name
    path.write_text(text)
    return path


def _refused(tmp_path: Path, dataset: Path, smi: str, capsys: pytest.CaptureFixture[str]) -> str:
    workspace = tmp_path / "ws"
    code = main(["run", "--workspace", str(workspace), "--run", "r1", "--dataset", str(dataset), "--nvidia-smi", smi,
                 "--approve"])
    captured = capsys.readouterr()
    lines = [line for line in captured.err.splitlines() if line.strip()]
    assert code == 2, captured.out + captured.err
    assert len(lines) == 1 and "Traceback" not in captured.err, lines
    runs = [p.name for p in workspace.iterdir() if p.is_dir()] if workspace.exists() else []
    assert runs == [], f"a run folder was written: {runs}"
    assert main(["status", "--workspace", str(workspace), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["runs"] == []
    return lines[0]


def test_json_metadata_with_a_number_caption_and_a_list_media_path_is_refused_before_the_plan(
        tmp_path: Path, fake_smi, capsys: pytest.CaptureFixture[str]) -> None:
    dataset = _dataset(tmp_path / "data", "dataset.json", json.dumps(ROWS))
    line = _refused(tmp_path, dataset, fake_smi(H100_SMI), capsys)
    assert line.startswith("error: 2 cell(s) of dataset.json have the wrong type: "), line
    assert all(cell in line for cell in NAMED), line
    assert f"({dataset})" in line and "Fix: write each caption and media path as a JSON string" in line


def test_jsonl_metadata_with_a_number_caption_and_a_list_media_path_is_refused_before_the_plan(
        tmp_path: Path, fake_smi, capsys: pytest.CaptureFixture[str]) -> None:
    dataset = _dataset(tmp_path / "data", "dataset.jsonl", "\n".join(json.dumps(row) for row in ROWS) + "\n")
    line = _refused(tmp_path, dataset, fake_smi(H100_SMI), capsys)
    assert line.startswith("error: 2 cell(s) of dataset.jsonl have the wrong type: "), line
    assert all(cell in line for cell in NAMED), line


def test_every_wrong_cell_is_named_with_its_row_column_type_and_what_it_must_be(tmp_path: Path) -> None:
    rows = [{"caption": True, "media_path": {"path": "videos/a.mp4"}}, {"caption": 2.5, "media_path": None},
            {"caption": None, "media_path": "videos/c.mp4"}]
    report = check_metadata(_dataset(tmp_path, "rows.json", json.dumps(rows)), get_mode("t2v"))
    wrong = [check for check in report.checks if check.code == "wrong-type"]
    assert len(wrong) == 1 and wrong[0].severity == "error"
    assert wrong[0].message == (
        "3 cell(s) of rows.json have the wrong type: row 1 `caption` is a boolean (true), must be text; "
        'row 1 `media_path` is an object ({"path": "videos/a.mp4"}), must be a media path as text; '
        "row 2 `caption` is a number (2.5), must be text")
    # A null is no value, not a wrong type: it stays an empty path (error) or an empty caption (warning).
    codes = {check.code: check.message for check in report.checks}
    assert "(rows 2)" in codes["empty-media-path"] and "row 1" not in codes["empty-media-path"]
    assert codes["empty-caption"].startswith("1 row(s) have an empty `caption`: videos/c.mp4")


def test_a_number_like_caption_in_csv_is_text_and_is_planned(tmp_path: Path, fake_smi,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    dataset = _dataset(tmp_path / "data", "dataset.csv", "caption,video\n7,videos/a.mp4\n1e3,videos/b.mp4\n")
    assert not [c for c in check_metadata(dataset, get_mode("t2v")).checks if c.code == "wrong-type"]
    code = main(["run", "--workspace", str(tmp_path / "ws"), "--run", "r1", "--dataset", str(dataset),
                 "--nvidia-smi", fake_smi(H100_SMI), "--buckets", "64x64x17"])
    assert code == 3, capsys.readouterr().err  # planned, stopped at the approval gate
