"""``ltx-pipeline smoke --mode``: one mode as before, several (or ``all``) sharing one environment check and model.

The trainer is replaced at the smoke's own seam (``prepare_smoke`` / ``run_mode``); what is checked is the
command: which modes run, what is printed, each mode's record and the exit code.
"""

from __future__ import annotations

import json
import stat
from pathlib import Path
from typing import Any

import pytest

from ltx_pipeline import smoke as smoke_steps
from ltx_pipeline.cli import main
from ltx_pipeline.ltx.modes import MODES, Mode
from ltx_pipeline.smoke import SmokeFailed, SmokeResult, SmokeStep
from ltx_pipeline.smoke.run import Report
from tests.conftest import make_tree

TRAINER = "packages/ltx-trainer"
Capsys = pytest.CaptureFixture[str]
Calls = dict[str, list[str]]  # prepare: scratch folders; modes: modes run; fail: what fails


@pytest.fixture
def checkout(tmp_path: Path) -> list[str]:
    """A checkout and an interpreter that pass the file checks; the options that name them."""
    root = tmp_path / "LTX-2"
    make_tree(root, {f"{TRAINER}/configs/t2v_lora.yaml": "model: {}\n", f"{TRAINER}/scripts/train.py": "",
                     f"{TRAINER}/scripts/process_dataset.py": "", f"{TRAINER}/src/ltx_trainer/__init__.py": ""})
    python = tmp_path / "env" / "bin" / "python"
    python.parent.mkdir(parents=True)
    python.write_text("#!/bin/sh\n")
    python.chmod(python.stat().st_mode | stat.S_IXUSR)
    return ["--trainer-root", str(root), "--trainer-python", str(python)]


@pytest.fixture
def trainer(monkeypatch: pytest.MonkeyPatch) -> dict[str, list[str]]:
    """The smoke's trainer steps replaced: the shared ones count their calls, a mode named in ``fail`` fails."""
    calls: dict[str, list[str]] = {"prepare": [], "modes": [], "fail": []}

    def prepare(backend: object, scratch: Path, *, on_step: Report | None = None) -> SmokeResult:
        calls["prepare"].append(str(scratch))
        if "environment" in calls["fail"]:
            raise SmokeFailed("environment", "module 'pandas' is not installed", "pip install pandas")
        step = SmokeStep("environment", "fine", 1.0)
        if on_step:
            on_step(step)
        return SmokeResult([step], {"ltx-trainer": "1.2.0"}, False, {"checkpoint": "m"})

    def run_mode(backend: object, mode: Mode, scratch: Path, shared: SmokeResult, *,
                 on_step: Report | None = None) -> SmokeResult:
        calls["modes"].append(mode.name)
        if mode.name in calls["fail"]:
            raise SmokeFailed("train", f"{mode.name} broke", "read the log")
        step = SmokeStep("train", f"{mode.name} trained", 2.0)
        if on_step:
            on_step(step)
        return SmokeResult([step])

    monkeypatch.setattr(smoke_steps, "prepare_smoke", prepare)
    monkeypatch.setattr(smoke_steps, "run_mode", run_mode)
    return calls


def _smoke(capsys: pytest.CaptureFixture[str], workspace: Path, checkout: list[str], *args: str
           ) -> tuple[int, str, str]:
    code = main(["smoke", "--workspace", str(workspace), *checkout, *args])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def _records(workspace: Path) -> dict[str, dict[str, Any]]:
    found = [json.loads(p.read_text()) for p in (workspace / "smoke").glob("*.json")]
    return {r["mode"]: r for r in found}


def test_an_unknown_mode_is_refused_naming_every_mode(
        capsys: Capsys, workspace: Path, checkout: list[str], trainer: Calls) -> None:
    code, out, err = _smoke(capsys, workspace, checkout, "--mode", "t2x")
    assert code == 2 and out == ""
    assert "knows no mode 't2x'" in err and "a2a" in err and "av2av" in err and trainer["prepare"] == []


def test_one_mode_prints_as_before_and_records_it(
        capsys: Capsys, workspace: Path, checkout: list[str], trainer: Calls) -> None:
    code, out, _ = _smoke(capsys, workspace, checkout, "--mode", "a2a")
    assert code == 0 and trainer["modes"] == ["a2a"]
    assert "mode a2a:" in out and "  ok  train" in out and "a2a trained" in out
    assert out.splitlines()[-1].startswith("PASS in ") and "every mode" not in out
    assert list(_records(workspace)) == ["a2a"] and _records(workspace)["a2a"]["passed"] is True


def test_all_modes_share_one_environment_check_and_each_gets_its_record(
        capsys: Capsys, workspace: Path, checkout: list[str], trainer: Calls) -> None:
    code, out, _ = _smoke(capsys, workspace, checkout, "--mode", "all", "--mode", "t2v")
    assert code == 0
    assert len(trainer["prepare"]) == 1 and trainer["modes"] == list(MODES)  # t2v once, in its place
    assert len({Path(p).name for p in trainer["prepare"]}) == 1
    assert f"every mode asked ({len(MODES)})" in out and out.count("    PASS ") == len(MODES)
    records = _records(workspace)
    assert set(records) == set(MODES) and all(r["passed"] for r in records.values())


def test_a_failing_mode_fails_the_command_and_only_its_record(
        capsys: Capsys, workspace: Path, checkout: list[str], trainer: Calls) -> None:
    trainer["fail"].append("a2a")
    code, out, _ = _smoke(capsys, workspace, checkout, "--mode", "t2a", "--mode", "a2a")
    assert code == 1
    assert "    FAIL a2a at train after" in out and "\nFAIL a2a at train: a2a broke" in out
    assert "  fix: read the log" in out
    assert out.splitlines()[-1].startswith("FAIL in ") and out.splitlines()[-1].endswith("1 of 2 modes failed (a2a).")
    records = _records(workspace)
    assert records["t2a"]["passed"] is True and records["a2a"]["failed_step"] == "train"


def test_a_shared_step_that_fails_fails_every_mode_and_is_said_once(
        capsys: Capsys, workspace: Path, checkout: list[str], trainer: Calls) -> None:
    trainer["fail"].append("environment")
    code, out, _ = _smoke(capsys, workspace, checkout, "--mode", "i2v", "--mode", "v2a", "--json")
    assert code == 1 and trainer["modes"] == []
    body = json.loads(out)
    assert body["passed"] is False and [m["mode"] for m in body["modes"]] == ["i2v", "v2a"]
    assert {m["failed_step"] for m in body["modes"]} == {"environment"}
    code, out, _ = _smoke(capsys, workspace, checkout, "--mode", "i2v", "--mode", "v2a")
    assert out.count("module 'pandas' is not installed") == 1 and "FAIL i2v, v2a at environment" in out
