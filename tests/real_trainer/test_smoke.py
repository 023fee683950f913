"""``ltx-pipeline smoke`` against the unmodified trainer checkout: it passes, and it names a missing module."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.real_trainer.conftest import cli
from tests.real_trainer.environment import TrainerEnvironment

pytestmark = pytest.mark.real_trainer


def test_smoke_passes_against_the_unmodified_checkout(trainer_env: TrainerEnvironment, trainer_root: Path,
                                                       tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    done = cli("smoke", "--workspace", str(workspace), "--trainer-root", str(trainer_root),
               "--trainer-python", str(trainer_env.python))
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    for step in ("environment", "tiny model", "clips", "preprocess", "config", "train"):
        assert any(line.strip().startswith(f"ok  {step}") for line in lines), (step, done.stdout)
    assert "PASS in" in done.stdout
    assert "lora_weights_step_00002.safetensors" in done.stdout
    assert "with sound" in done.stdout  # t2v generates audio: the validation sample has a sound track
    records = list((workspace / "smoke").glob("*.json"))
    assert len(records) == 1 and json.loads(records[0].read_text())["passed"] is True
    assert not list((workspace / "smoke").glob("scratch-*")), "the scratch folder is removed without --keep"


def _environment_lacking(trainer_env: TrainerEnvironment, folder: Path, missing: str) -> Path:
    """A venv holding everything of the trainer's environment but one distribution (linked, not copied)."""
    base = subprocess.run([str(trainer_env.python), "-c", "import sys; print(sys.base_prefix)"], capture_output=True,
                          text=True, check=True).stdout.strip()
    subprocess.run([str(Path(base) / "bin" / "python3"), "-m", "venv", "--without-pip", str(folder)], check=True)
    version = f"python{sys.version_info.major}.{sys.version_info.minor}"
    source = next(trainer_env.root.joinpath("venv", "lib").glob("python3*/site-packages"))
    target = next(folder.joinpath("lib").glob("python3*/site-packages"))
    assert source.parent.name == version or source.parent.name.startswith("python3")
    for entry in source.iterdir():
        if entry.name.lower() == missing or entry.name.lower().startswith(f"{missing}-"):
            continue
        (target / entry.name).symlink_to(entry)
    return folder / "bin" / "python"


def test_smoke_names_the_missing_module_and_its_fix(trainer_env: TrainerEnvironment, trainer_root: Path,
                                                    tmp_path: Path) -> None:
    python = _environment_lacking(trainer_env, tmp_path / "env-without-pandas", "pandas")
    done = cli("smoke", "--workspace", str(tmp_path / "ws"), "--trainer-root", str(trainer_root),
               "--trainer-python", str(python))
    assert done.returncode == 1, done.stdout + done.stderr
    assert "FAIL at environment" in done.stdout, done.stdout
    assert "module 'pandas' is not installed" in done.stdout
    assert "(imported at " in done.stdout and "/scripts/process_" in done.stdout  # where the trainer imports it
    assert f"{python} -m pip install pandas" in done.stdout
    assert "Traceback" not in done.stdout + done.stderr
    record = json.loads(next((tmp_path / "ws" / "smoke").glob("*.json")).read_text())
    assert record["passed"] is False and record["failed_step"] == "environment"
