"""plan.md, run-summary.md, status and the dashboard say the same about audio for every ``--audio`` choice (#43, 4).

On main a video-only run (``--audio off``) said "Goal: Train a LoRA for text-to-video (+audio)", "Generates: video +
audio" in plan.md and "Purpose: t2v lora (text-to-video (+audio))" in run-summary.md, while it trained video only.
Here each choice is driven to the end on real mp4 clips (an AAC tone in those with sound; the simulated trainer, so
it is quick), and each of the four places is read for what the run generates; the trainer config is the witness
(``validation.generate_audio``, ``training_strategy.audio``), never the words themselves.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml
from starlette.testclient import TestClient

from ltx_pipeline.cli import main
from ltx_pipeline.ltx.modes import UNDECIDED
from ltx_pipeline.ui.app import create_app
from ltx_pipeline.workspace import Workspace
from tests.phases.test_audio_from_data import clip_folder
from tests.phases.train_helpers import simulated_args


def _plan_words(plan: str) -> tuple[str, str]:
    goal = re.search(r"\(generates: ([^)]+\)?)\) on the dataset", plan)
    mode_line = re.search(r"^- Generates: (.+)$", plan, re.M)
    assert goal and mode_line, plan[:600]
    return goal.group(1), mode_line.group(1)


def _status(workspace: Path, capsys: pytest.CaptureFixture[str]) -> tuple[dict[str, object], str]:
    capsys.readouterr()
    assert main(["status", "--workspace", str(workspace), "--json"]) in (0, 3)
    run = json.loads(capsys.readouterr().out)["runs"][0]
    assert main(["status", "--workspace", str(workspace), "--run", "r1"]) in (0, 3)
    return run, capsys.readouterr().out


def _dashboard(workspace: Path) -> object:
    client = TestClient(create_app(Workspace.at(workspace), None), base_url="http://127.0.0.1:8188")
    return client.get("/api/runs/r1").json()["run"]["generates"]


@pytest.mark.parametrize(("sound", "choice"), [
    ([True, True], "auto"), ([True, True], "off"), ([False, False], "auto"), ([True, False], "on")])
def test_the_four_places_agree_with_what_trained(workspace: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                 sound: list[bool], choice: str) -> None:
    folder = clip_folder(tmp_path / "clips", sound)
    code = main(simulated_args(workspace, folder, "--audio", choice, "--steps", "4", "--skip-eval", "--autotune", "off",
                                 "--buckets", "64x64x17"))
    assert code == 0, capsys.readouterr().err
    config = yaml.safe_load((workspace / "r1" / "config.yaml").read_text())
    trained = "video + audio" if config["validation"].get("generate_audio", True) else "video"  # the trainer's default
    assert (config["training_strategy"].get("audio") is None) == (trained == "video")

    plan = (workspace / "r1" / "plan.md").read_text()
    assert _plan_words(plan) == (trained, trained)
    summary = (workspace / "r1" / "outputs" / "run-summary.md").read_text()
    assert f"- Generates: {trained} (`--audio {choice}`)" in summary
    assert "(+audio)" not in plan + summary
    run, text = _status(workspace, capsys)
    assert run["generates"] == trained
    assert f"generates: {trained} (mode t2v, --audio {choice})" in text
    assert _dashboard(workspace) == trained
    if trained == "video":  # a video-only run's validation prompts promise no sound
        prompts = " ".join(s["prompt"] for s in config["validation"]["samples"])
        assert not re.search(r"\b(audio|sounds?|noise)\b", prompts, re.IGNORECASE), prompts


def test_an_undecided_choice_is_undecided_everywhere(workspace: Path, tmp_path: Path,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    """Half the clips silent and ``--audio auto``: the plan waits for the choice, and nothing claims one."""
    folder = clip_folder(tmp_path / "clips", [True, False])
    args = [a for a in simulated_args(workspace, folder, "--steps", "4", "--buckets", "64x64x17") if a != "--approve"]
    assert main(args) == 3
    assert _plan_words((workspace / "r1" / "plan.md").read_text()) == (UNDECIDED, UNDECIDED)
    run, text = _status(workspace, capsys)
    assert run["generates"] == UNDECIDED and f"generates: {UNDECIDED}" in text
    assert _dashboard(workspace) == UNDECIDED
