"""``ltx-pipeline smoke`` against the unmodified trainer checkout: it passes in every mode, and names a missing module.

t2v runs alone (the single-mode output, as a user sees it); three more modes run in one command, which shares the
environment check and tiny model between them (about 25 s saved per mode): a first frame written as a PNG (i2v), a
clip's sound written as a stereo WAV (a2v), an audio-only IC-LoRA whose reference latents are linked (a2a). The
suite's time budget keeps the other eleven out of it (a mask column taken as it is, video-inpaint's way, left this
suite for its budget on 2026-12-07): every mode, video-inpaint included, is trained on the real trainer through
``run`` by ``test_modes.py``, from the same dataset writer and validation sources as smoke's, and
``ltx-pipeline smoke --mode all`` passed all 15 here (README, "The real trainer").
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from ltx_pipeline.ltx.modes import MODES
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
    for step in ("environment", "tiny model", "data", "preprocess", "config", "train"):
        assert any(line.strip().startswith(f"ok  {step}") for line in lines), (step, done.stdout)
    assert "PASS in" in done.stdout
    assert "lora_weights_step_00002.safetensors" in done.stdout
    assert "with sound" in done.stdout  # t2v generates audio: the validation sample has a sound track
    records = list((workspace / "smoke").glob("*.json"))
    assert len(records) == 1 and json.loads(records[0].read_text())["passed"] is True
    assert not list((workspace / "smoke").glob("scratch-*")), "the scratch folder is removed without --keep"


SMOKE_MODES_IN_SUITE = ("i2v", "a2v", "a2a")


def test_smoke_passes_three_more_modes_sharing_one_environment_check(trainer_env: TrainerEnvironment,
                                                                    trainer_root: Path, tmp_path: Path) -> None:
    modes = list(SMOKE_MODES_IN_SUITE)
    workspace = tmp_path / "ws"
    done = cli("smoke", "--workspace", str(workspace), "--trainer-root", str(trainer_root),
               "--trainer-python", str(trainer_env.python), "--keep", *(arg for m in modes for arg in ("--mode", m)))
    failed = [m for m in modes if f"    PASS {m} in " not in done.stdout]
    assert done.returncode == 0 and not failed, (failed, done.stdout[-6000:] + done.stderr[-2000:])
    assert done.stdout.count("  ok  environment") == 1 and done.stdout.count("  ok  tiny model") == 1
    blocks = _mode_blocks(done.stdout)
    for name in modes:
        train = next(line for line in blocks[name].splitlines() if line.strip().startswith("ok  train"))
        if not MODES[name].video_media:  # the audio-only modes render a WAV
            assert "WAV decodes" in train, (name, train)
        else:
            assert "frames decode" in train, (name, train)
            assert "with sound" in train or not MODES[name].generates_audio, (name, train)
    assert "linked 2 reference-audio latent(s)" in blocks["a2a"]
    scratch = Path(done.stdout.split("Scratch kept at ")[1].strip().rstrip("."))
    for name in modes:  # every validation medium is a file of the smoke's data or derived into its scratch
        config = yaml.safe_load((scratch / name / "config.yaml").read_text())
        media = [str(c[key]) for sample in config["validation"]["samples"] for c in sample.get("conditions") or []
                 for key in ("image_or_video", "video", "audio", "mask") if key in c]
        assert all(Path(m).is_file() and Path(m).is_relative_to(scratch / name) for m in media), (name, media)
    records = [json.loads(p.read_text()) for p in (workspace / "smoke").glob("*.json")]
    assert sorted(r["mode"] for r in records) == sorted(modes) and all(r["passed"] for r in records)


def _mode_blocks(stdout: str) -> dict[str, str]:
    """Each mode's own lines of a several-mode smoke: from its ``  name:`` line to the next."""
    blocks: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in stdout.splitlines():
        if line.startswith("  ") and not line.startswith("   ") and line.endswith(":"):
            current = blocks.setdefault(line.strip().rstrip(":"), [])
        elif current is not None:
            current.append(line)
    return {name: "\n".join(lines) for name, lines in blocks.items()}


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
