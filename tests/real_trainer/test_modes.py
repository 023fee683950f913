"""Issue 42, done when: every mode the trainer ships trains on the real trainer, validated on the user's own media.

For each of the 14 modes beside t2v (t2v is ``test_full_run``'s), a dataset with every column the mode reads
(``ltx.sample_datasets``: clips with a tone, WAVs, references, masks) goes through the public CLI on the
official trainer: ``run --mode M --steps 4 --validation-interval 4``. The run finishes; the step-4 validation
sample decodes (frames, or audio samples for the audio-only modes); a checkpoint is saved; every conditioning
medium of the validation samples is a file of the dataset or one derived from it into the run, never a
template placeholder; and plan.md names the row each sample's media came from.
"""

from __future__ import annotations

import re
import wave
from pathlib import Path
from typing import Any

import pytest
import yaml

from ltx_pipeline.ltx.modes import MODES
from ltx_pipeline.ltx.sample_datasets import write_mode_dataset
from tests.real_trainer.conftest import NO_STEP_ZERO, cli, run_args
from tests.real_trainer.environment import TrainerEnvironment

pytestmark = pytest.mark.real_trainer

_MEDIA_FIELDS = ("image_or_video", "video", "audio", "mask")


def _decodes(sample: Path) -> int:
    """Frames of an mp4, or audio frames of a WAV; 0 when it holds none."""
    if sample.suffix == ".wav":
        with wave.open(str(sample)) as track:
            return track.getnframes()
    import av

    with av.open(str(sample)) as container:
        return sum(1 for _ in container.decode(video=0))


# Named one by one (t2v is test_full_run's): a mode added to MODES without a real-trainer run fails the check below.
OTHER_MODES = ("i2v", "video-extend", "video-suffix", "a2v", "v2a", "v2v", "video-inpaint", "video-outpaint", "t2a",
               "audio-extend", "audio-suffix", "audio-inpaint", "a2a", "av2av")


def test_every_mode_but_t2v_is_named_here() -> None:
    assert set(OTHER_MODES) == set(MODES) - {"t2v"}


@pytest.mark.parametrize("mode", OTHER_MODES)
def test_every_mode_trains_with_validation_conditions_from_the_dataset(
        mode: str, trainer_env: TrainerEnvironment, trainer_root: Path, tiny_model: dict[str, Any],
        tmp_path: Path) -> None:
    dataset = write_mode_dataset(tmp_path / "data", mode, count=3)
    workspace = tmp_path / "ws"
    args = run_args(workspace, trainer_env, trainer_root, tiny_model, dataset, "--run", "r", "--steps", "4",
                    "--checkpoint-interval", "4", "--validation-interval", "4", "--skip-eval", "--approve",
                    *NO_STEP_ZERO)
    args[args.index("--mode") + 1] = mode
    done = cli(*args)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    run = workspace / "r"
    assert (run / "outputs" / "checkpoints" / "lora_weights_step_00004.safetensors").is_file()
    samples = sorted((run / "outputs" / "samples").glob("step_000004_*.*"))
    assert samples, sorted(p.name for p in (run / "outputs" / "samples").iterdir())
    assert all(_decodes(sample) > 0 for sample in samples), samples

    config = yaml.safe_load((run / "config.yaml").read_text())
    media = [str(condition[key]) for sample in config["validation"]["samples"]
             for condition in sample.get("conditions") or [] for key in _MEDIA_FIELDS if key in condition]
    if mode == "t2a":  # its template's samples are prompts alone (as t2v's)
        assert not media and "## Validation samples" not in (run / "plan.md").read_text(encoding="utf-8")
        return
    assert media, "every mode but t2v and t2a validates with conditioning media"
    allowed = (str(tmp_path / "data") + "/", str(run / "validation") + "/")
    assert all(path.startswith(allowed) and Path(path).is_file() for path in media), media
    plan = (run / "plan.md").read_text(encoding="utf-8")
    section = plan.split("## Validation samples", 1)[1].split("\n## ", 1)[0]
    named = re.findall(r"- Sample \d+: row (\d+) `([^`]+)`", section)
    assert len(named) == len(config["validation"]["samples"]), section
    assert all(name in {Path(p).name for p in (tmp_path / "data").rglob("*")} for _, name in named), named
