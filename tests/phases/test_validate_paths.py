"""Issue 42: a run whose config names a missing or placeholder validation image stops at validate, before
any preprocessing, through the real CLI on the reference backend.

The run goes up to config_patch, the user edits the run's ``config.yaml`` (there is no other seam for a
config value), and ``resume`` runs validate on it: exit 2 naming the key and value, and no preprocessing
process was started (the store's launch records of kind ``preprocess``, ``logs/preprocess.log``, the
``.precomputed`` folder: all none).
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

import phases
from ltx_pipeline.cli import main
from tests.conftest import H100_SMI
from tests.phases.train_helpers import mp4_clips, reference_args, resume, store_of

IMAGE = "validation.samples[0].conditions[0].image_or_video"


@pytest.fixture
def patched_run(workspace: Path, tmp_path: Path, fake_smi, monkeypatch: pytest.MonkeyPatch, capsys) -> Path:
    """A reference run driven up to config_patch; returns its config.yaml (validate has not run)."""
    full = phases.PHASES
    names = [p.name for p in full]
    monkeypatch.setattr(phases, "PHASES", full[: names.index("config_patch") + 1])
    args = reference_args(workspace, mp4_clips(tmp_path / "data", n=2), fake_smi(H100_SMI), "--steps", "4",
                          "--rank", "4", "--autotune", "off")
    assert main(args) == 0, capsys.readouterr().err
    capsys.readouterr()
    monkeypatch.setattr(phases, "PHASES", full)
    return workspace / "r1" / "config.yaml"


def give_first_sample_an_image(config: Path, image: str) -> None:
    """What a user does by hand: a first-frame condition on the first validation sample."""
    data = yaml.safe_load(config.read_text())
    data["validation"]["samples"][0]["conditions"] = [{"type": "first_frame", "image_or_video": image}]
    config.write_text(yaml.safe_dump(data, sort_keys=False))


def preprocessing_started(workspace: Path) -> int:
    """Every sign of a preprocessing launch: its recorded processes, its log, its output folder."""
    store, run = store_of(workspace)
    launched = len(store.processes(run.id, "preprocess"))
    log = workspace / "r1" / "logs" / "preprocess.log"
    outputs = list((workspace / "r1").rglob(".precomputed*"))
    return launched + int(log.exists()) + len(outputs)


@pytest.mark.parametrize("image", ["missing", "/path/to/conditioning_image_1.png"])
def test_a_bad_validation_image_stops_the_run_at_validate_before_preprocessing(patched_run, workspace, tmp_path,
                                                                              capsys, image) -> None:
    value = str(tmp_path / "nope.png") if image == "missing" else image
    give_first_sample_an_image(patched_run, value)
    assert resume(workspace) == 2
    err = capsys.readouterr().err
    [line] = err.splitlines()
    assert line.startswith("error: 1 config problem(s), first: stage 1: error [")
    assert f"{IMAGE} = {value!r}" in line and "Fix:" in line
    assert ("does not exist" if image == "missing" else "is a template placeholder") in line
    assert "- stage 1: error [" in (workspace / "r1" / "validate.md").read_text()
    store, run = store_of(workspace)
    rows = store.latest_phase_runs(run.id)
    assert rows["validate"].status == "failed"
    assert "autotune" not in rows and "train" not in rows
    assert preprocessing_started(workspace) == 0


@pytest.mark.long  # the control (25 s): once the config is right again, the same run preprocesses and trains
def test_the_refused_run_preprocesses_once_its_config_is_right(patched_run, workspace, tmp_path, capsys) -> None:
    written = patched_run.read_text()
    give_first_sample_an_image(patched_run, str(tmp_path / "nope.png"))
    assert resume(workspace) == 2
    assert preprocessing_started(workspace) == 0
    patched_run.write_text(written)
    assert resume(workspace) == 0, capsys.readouterr().err
    store, run = store_of(workspace)
    assert len(store.processes(run.id, "preprocess")) == 1
    assert (workspace / "r1" / "logs" / "preprocess.log").is_file()
