"""Unusable requests are refused with one line and exit 2 before any run exists, never planned (#13)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ltx_pipeline.cli import main
from tests.conftest import H100_SMI, mp4_bytes


def _metadata(root: Path, name: str, content: object) -> Path:
    (root / "videos").mkdir(parents=True, exist_ok=True)
    (root / "videos" / "a.mp4").write_bytes(mp4_bytes())
    path = root / name
    path.write_text(json.dumps(content))
    return path


GOOD = [{"caption": "a red fox", "video": "videos/a.mp4"}]
CASES = {
    "empty buckets": (GOOD, ["--buckets", ""], "buckets is empty"),
    "empty run name": (GOOD, ["--run", ""], "Run name '' is not allowed"),
    "reserved run name": (GOOD, ["--run", "CON"], "reserved on Windows"),
    "reserved run name with extension": (GOOD, ["--run", "lpt1.final"], "reserved on Windows"),
    "no caption column": ([{"video": "videos/a.mp4"}], [], "needs column `caption`"),
    "no media column": ([{"caption": "a red fox"}], [], "needs column `video` or `media_path`"),
    "top level is an object": ({"caption": "a red fox", "video": "videos/a.mp4"}, [],
                               "JSON metadata is not a list of objects"),
}


@pytest.mark.parametrize("case", list(CASES))
def test_bad_request_exits_2_with_one_line_and_writes_no_run(case: str, tmp_path: Path, fake_smi,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    content, extra, expected = CASES[case]
    dataset = _metadata(tmp_path / "data", "dataset.json", content)
    workspace = tmp_path / "ws"
    code = main(["run", "--workspace", str(workspace), "--dataset", str(dataset), "--nvidia-smi",
                 fake_smi(H100_SMI), "--approve", *extra])
    captured = capsys.readouterr()
    lines = [line for line in captured.err.splitlines() if line.strip()]
    assert code == 2, captured.out + captured.err
    assert len(lines) == 1 and expected in lines[0] and "Fix:" in lines[0], lines
    assert "Traceback" not in captured.err
    runs = [p.name for p in workspace.iterdir() if p.is_dir()] if workspace.exists() else []
    assert runs == [], f"a run folder was written: {runs}"
    code = main(["status", "--workspace", str(workspace), "--json"])
    report = json.loads(capsys.readouterr().out)
    assert code == 0 and report["runs"] == []


def test_a_metadata_change_in_run_yaml_is_refused_before_the_run_changes(tmp_path: Path, fake_smi,
                                                                          capsys: pytest.CaptureFixture[str]) -> None:
    good = _metadata(tmp_path / "data", "dataset.json", GOOD)
    bad = _metadata(tmp_path / "data", "nocaption.json", [{"video": "videos/a.mp4"}])
    workspace = tmp_path / "ws"
    base = ["--workspace", str(workspace), "--run", "r1", "--nvidia-smi", fake_smi(H100_SMI)]
    assert main(["run", "--dataset", str(good), *base]) == 3
    request_before = (workspace / "r1" / "run.yaml").read_text()
    capsys.readouterr()
    assert main(["run", "--dataset", str(bad), *base]) == 2
    assert "needs column `caption`" in capsys.readouterr().err
    assert (workspace / "r1" / "run.yaml").read_text() == request_before


def test_every_problem_of_a_request_is_reported_together(tmp_path: Path, fake_smi,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    """A run name, two options and the metadata's columns, all wrong: one report, one line each."""
    dataset = _metadata(tmp_path / "data", "dataset.json", [{"video": "videos/a.mp4"}])
    workspace = tmp_path / "ws"
    code = main(["run", "--workspace", str(workspace), "--dataset", str(dataset), "--nvidia-smi",
                 fake_smi(H100_SMI), "--run", "CON", "--buckets", "", "--rank", "1", "--approve"])
    captured = capsys.readouterr()
    lines = [line for line in captured.err.splitlines() if line.strip()]
    assert code == 2 and "Traceback" not in captured.err
    assert lines[0] == "error: 4 problems in the request:"
    for line, expected in zip(lines[1:], ("reserved on Windows", "buckets is empty", "(--rank)",
                                          "needs column `caption`"), strict=True):
        assert line.startswith("- ") and expected in line and "Fix:" in line, line
    assert not (workspace / "CON").exists()


def test_every_problem_of_an_edited_run_yaml_is_reported_together(tmp_path: Path, fake_smi,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    """A user edits run.yaml (a rank below 2, a headroom over 0.5, a metadata file without
    captions) and resumes: one report with a line for each, and run.yaml is left as the user wrote it."""
    good = _metadata(tmp_path / "data", "dataset.json", GOOD)
    bad = _metadata(tmp_path / "data", "nocaption.json", [{"video": "videos/a.mp4"}])
    workspace = tmp_path / "ws"
    assert main(["run", "--workspace", str(workspace), "--run", "r1", "--dataset", str(good), "--nvidia-smi",
                 fake_smi(H100_SMI)]) == 3
    request_file = workspace / "r1" / "run.yaml"
    edited = request_file.read_text().replace(f"dataset: {good}", f"dataset: {bad}") + "rank: 1\nheadroom: 0.9\n"
    assert f"dataset: {bad}" in edited
    request_file.write_text(edited)
    capsys.readouterr()
    assert main(["resume", "--workspace", str(workspace), "--run", "r1"]) == 2
    lines = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert lines[0] == "error: 3 problems in the request:", lines
    assert any("rank" in line for line in lines[1:]) and any("headroom" in line for line in lines[1:])
    assert any("needs column `caption`" in line for line in lines[1:])
    assert request_file.read_text() == edited


def test_a_folder_of_clips_is_planned_with_its_captioner_as_a_blocker_when_none_can_run(
        tmp_path: Path, fake_smi, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """A folder of clips is planned (the prepare phase will caption it); on the ltx backend with no trainer
    checkout the captioner cannot run, so approval is refused (exit 4) with the command that fixes it."""
    monkeypatch.delenv("LTX2_ROOT", raising=False)
    folder = tmp_path / "clips"
    folder.mkdir()
    for name in ("a.mp4", "b.mp4"):
        (folder / name).write_bytes(mp4_bytes())
    workspace = tmp_path / "ws"
    code = main(["run", "--workspace", str(workspace), "--run", "r1", "--dataset", str(folder), "--nvidia-smi",
                 fake_smi(H100_SMI), "--approve"])
    lines = [line for line in capsys.readouterr().err.splitlines() if line.startswith("error:")]
    assert code == 4 and len(lines) == 1 and "Captioner qwen_omni" in lines[0]
    plan = (workspace / "r1" / "plan.md").read_text()
    assert "## Data preparation" in plan and "caption 2 clip(s) with qwen_omni" in plan
    assert not (workspace / "r1" / "dataset").exists()  # nothing prepared before approval
