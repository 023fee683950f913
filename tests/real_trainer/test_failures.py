"""What real data and real configs do to the real trainer, and what the engine says about it in one line.

- A clip without sound in an audio mode, and a clip shorter than the bucket (one run): with ``--audio on`` the
  silent clip is left out before preprocessing (issue 33: never dropped in silence by the trainer), and
  preprocessing writes no latents for the short one; the trainer trains on the rest and skips nothing.
- A config the trainer's own ``LtxTrainerConfig`` refuses: refused before any launch, with the trainer's words;
  and the trainer's own exit on that config is classified as a config error naming the field.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from ltx_pipeline.trainer_log import classify_failure
from tests.real_trainer.conftest import NO_STEP_ZERO, THREADS, cli, run_args, write_clips
from tests.real_trainer.environment import TrainerEnvironment

pytestmark = pytest.mark.real_trainer

_FAST = ("--steps", "2", "--checkpoint-interval", "2", "--validation-interval", "2", "--skip-eval", "--approve",
         *NO_STEP_ZERO)


def test_a_silent_clip_and_a_short_clip_are_named_and_the_real_trainer_trains_on_the_rest(
        trainer_env: TrainerEnvironment, trainer_root: Path, tiny_model: dict[str, Any], tmp_path: Path) -> None:
    """One run, two habits of real footage: a clip without sound (t2v trains audio) and a clip of 9 frames
    (the bucket needs 25). ``--audio on`` leaves the first out of the dataset the trainer sees, preprocessing
    writes no latents for the second; the engine names each clip and why, in one line each."""
    dataset = write_clips(tmp_path / "data", 4, audio=[True, True, False, True], frames=[48, 48, 48, 9])
    names = sorted(p.name for p in (tmp_path / "data" / "clips").glob("*.mp4"))
    silent, short = next(n for n in names if n.endswith("-2.mp4")), next(n for n in names if n.endswith("-3.mp4"))
    done = cli(*run_args(tmp_path / "ws", trainer_env, trainer_root, tiny_model, dataset, "--run", "r", "--audio",
                         "on", *_FAST))
    output = done.stdout + done.stderr
    assert done.returncode == 0, output[-4000:]
    assert "Traceback" not in output
    assert any(silent in line and "audio" in line for line in output.splitlines()), output[-4000:]
    assert any(short in line and "9 frames" in line for line in output.splitlines()), output[-4000:]
    log = (tmp_path / "ws" / "r" / "logs" / "train.log").read_text(errors="replace")
    assert "invalid samples" not in log  # the silent clip never reached the trainer: nothing dropped unsaid
    summary = (tmp_path / "ws" / "r" / "outputs" / "run-summary.md").read_text()
    assert "(2 sample(s) trained on, of 3 planned;" in summary  # 3 rows with sound, the 9-frame one not encoded


def _checkout_with_template(trainer_root: Path, folder: Path, edit: tuple[str, str]) -> Path:
    """A copy of the checkout's trainer package (configs and scripts) with one line of t2v_lora.yaml changed."""
    trainer = folder / "packages" / "ltx-trainer"
    shutil.copytree(trainer_root / "packages" / "ltx-trainer" / "configs", trainer / "configs")
    shutil.copytree(trainer_root / "packages" / "ltx-trainer" / "scripts", trainer / "scripts")
    template = trainer / "configs" / "t2v_lora.yaml"
    template.chmod(0o644)
    text = template.read_text()
    assert edit[0] in text
    template.write_text(text.replace(edit[0], edit[1], 1))
    return folder


def test_a_config_the_trainer_refuses_stops_before_launch_in_one_line(
        trainer_env: TrainerEnvironment, trainer_root: Path, tiny_model: dict[str, Any], tmp_path: Path) -> None:
    # A field the plan does not patch (the plan's knobs would overwrite e.g. optimizer_type).
    checkout = _checkout_with_template(trainer_root, tmp_path / "checkout",
                                       ('timestep_sampling_mode: "shifted_logit_normal"',
                                        'timestep_sampling_mode: "logit_normal"'))
    dataset = write_clips(tmp_path / "data", 2)
    done = cli(*run_args(tmp_path / "ws", trainer_env, checkout, tiny_model, dataset, "--run", "r", *_FAST))
    assert done.returncode == 2, done.stdout[-3000:] + done.stderr[-3000:]
    errors = [line for line in done.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "timestep_sampling_mode" in errors[0], done.stderr
    assert "Traceback" not in done.stdout + done.stderr
    assert not (tmp_path / "ws" / "r" / "logs" / "train.log").exists(), "nothing was launched"

    # The trainer's own exit on that config, read by the engine's classifier.
    config = tmp_path / "ws" / "r" / "config.yaml"
    run = subprocess.run([str(trainer_env.python), "scripts/train.py", str(config), "--disable-progress-bars"],
                         cwd=checkout / "packages" / "ltx-trainer", capture_output=True, text=True, timeout=300,
                         env={"COLUMNS": "500", "PATH": "/usr/bin:/bin", **THREADS}, check=False)
    assert run.returncode != 0
    failure = classify_failure(run.returncode, None, run.stdout.splitlines(), run.stderr.splitlines())
    assert failure.kind == "config_error", (failure, run.stderr[-2000:])
    assert "flow_matching.timestep_sampling_mode" in failure.field_paths, failure
