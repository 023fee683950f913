"""Issue 33, done when: an all-silent folder trains video only on every clip to the end with ``--approve``
and no extra option; a half-silent folder stops at the plan gate naming the silent clips and both choices,
and each choice finishes with the samples it promised. Real mp4 files (PyAV, with and without an AAC
track), a folder of clips (captioned by the offline captioner), the reference backend's real training."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from ltx_pipeline.cli import main
from ltx_pipeline.ltx.audio_choice import VIDEO_ONLY_TARGETS
from ltx_pipeline.ltx.config_patch import AUDIO_SENTENCE
from tests.conftest import H100_SMI
from tests.phases.train_helpers import reference_args, store_of, training_registered  # noqa: F401 - fixture

pytestmark = pytest.mark.usefixtures("training_registered")


def clip_folder(root: Path, sound: list[bool]) -> Path:
    """A folder of real 17-frame 64x64 H.264 clips, an AAC tone in those with sound (no metadata)."""
    from ltx_pipeline.ltx.sample_clips import write_clip

    backgrounds = ("blue", "green", "white", "purple")
    for index, has in enumerate(sound):
        write_clip(root / f"{'loud' if has else 'silent'}{index}.mp4", 17, 64, 64, colour="red",
                   background=backgrounds[index % 4], fps=24.0, audio=has, phase=0.0)
    return root


def _outputs(workspace: Path, phase: str, name: str = "r1") -> dict[str, Any]:
    store, _ = store_of(workspace)
    return store.latest_phase_runs(store.get_run(name).id)[phase].outputs


@pytest.fixture(autouse=True)
def _cpu(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LTX_REFERENCE_DEVICE", "cpu")


@pytest.mark.long  # 17 s per run on a 2-core box (2026-12-07): the default suite stays under 6 min
def test_an_all_silent_folder_trains_video_only_on_every_clip_to_the_end(workspace, tmp_path, fake_smi,
                                                                          capsys) -> None:
    folder = clip_folder(tmp_path / "clips", [False, False, False])
    code = main(reference_args(workspace, folder, fake_smi(H100_SMI), "--steps", "2", "--rank", "4"))
    assert code == 0, capsys.readouterr().err
    plan = (workspace / "r1" / "plan.md").read_text()
    assert "**video only** (`--audio auto`): no clip has sound (3 silent)" in plan
    assert "`training_strategy.audio: null`" in plan
    config = yaml.safe_load((workspace / "r1" / "config.yaml").read_text())
    assert config["training_strategy"]["audio"] is None and config["validation"]["generate_audio"] is False
    assert config["lora"]["target_modules"] == list(VIDEO_ONLY_TARGETS)
    assert AUDIO_SENTENCE not in (workspace / "r1" / "config.yaml").read_text()  # no sound asked of a silent run
    records = {r["path"]: r["reason"] for r in _outputs(workspace, "config_patch")["configs"][0]["patches"]}
    assert "video only" in records["training_strategy.audio"]
    summary = (workspace / "r1" / "outputs" / "run-summary.md").read_text()
    assert "(3 sample(s) trained on;" in summary and "Warning" not in summary
    # A video-only run's captions (the eval prompts too) say nothing of sound: it is not trained.
    captions = [row["caption"] for row in json.loads((workspace / "r1" / "dataset" / "dataset.json").read_text())]
    assert len(captions) == 3 and not any("silent" in c or "sound" in c for c in captions), captions


@pytest.mark.long  # 22 s on 2 cores (2026-12-06): in the opt-in long suite, `-m long`
def test_a_half_silent_folder_stops_at_the_plan_gate_and_each_choice_trains_what_it_promised(
        workspace, tmp_path, fake_smi, capsys) -> None:
    folder = clip_folder(tmp_path / "clips", [True, False, True, False])
    args = reference_args(workspace, folder, fake_smi(H100_SMI), "--steps", "2", "--rank", "4", "--holdout", "0")
    code = main(args)
    out = capsys.readouterr()
    assert code != 0 and not (workspace / "r1" / "config.yaml").exists()  # stopped at the plan gate
    said = out.out + out.err
    assert "silent1.mp4" in said and "silent3.mp4" in said and "--audio off" in said and "--audio on" in said
    plan = (workspace / "r1" / "plan.md").read_text()
    assert "Clips without sound (2 of 4): `silent1.mp4`, `silent3.mp4`" in plan and "This blocks approval" in plan

    # --audio on: audio and video on the two clips with sound; the silent ones named as left out.
    assert main([*args, "--audio", "on"]) == 0, capsys.readouterr().err
    plan = (workspace / "r1" / "plan.md").read_text()
    assert "Left out of the dataset the trainer sees (2): `silent1.mp4`, `silent3.mp4`" in plan
    data = _outputs(workspace, "data_check")
    assert data["samples"] == 2 and [Path(p).name for p in data["left_out_silent"]] == ["silent1.mp4", "silent3.mp4"]
    config = yaml.safe_load((workspace / "r1" / "config.yaml").read_text())
    assert config["training_strategy"]["audio"]["is_generated"] is True  # the template's audio branch trains
    summary = (workspace / "r1" / "outputs" / "run-summary.md").read_text()
    assert "(2 sample(s) trained on;" in summary and "Warning" not in summary

    # --audio off (a second run from the same folder: a finished stage is never launched again in its own run):
    # video only on all four clips.
    other = [("r2" if a == "r1" else a) for a in args]
    assert main([*other, "--audio", "off"]) == 0, capsys.readouterr().err
    config = yaml.safe_load((workspace / "r2" / "config.yaml").read_text())
    assert config["training_strategy"]["audio"] is None
    assert _outputs(workspace, "data_check", "r2")["samples"] == 4
    summary = (workspace / "r2" / "outputs" / "run-summary.md").read_text()
    assert "(4 sample(s) trained on;" in summary and "Warning" not in summary
    # Its preprocessing encoded no sound, not even for the two clips that have it (--skip-audio), in its stage as in
    # the sanity set: the audio VAE's time and files would be spent on latents the video-only trainer never reads.
    latents = [p for p in (workspace / "r2" / "dataset").rglob("*.pt") if "latents" in p.parts]
    assert len({p.name for p in latents}) == 4, latents
    assert not [p for p in (workspace / "r2").rglob("*.pt") if "audio_latents" in p.parts]
