"""Issue 33: audio from the data. The choice per clip sound and ``--audio``, the video-only config derived
from the shipped templates, and what run-summary.md says when the trainer skipped samples."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from ltx_pipeline.errors import BadRequest, RunFailed
from ltx_pipeline.ltx.audio_choice import VIDEO_ONLY_TARGETS, decide_audio, trained_mode, video_only_patches
from ltx_pipeline.ltx.config_patch import apply_patches, check_patched, patches_for_stage
from ltx_pipeline.ltx.modes import get_mode
from ltx_pipeline.ltx.trainer_config import data_sources
from ltx_pipeline.reports.summary import render_summary
from ltx_pipeline.request import build_request
from ltx_pipeline.training.samples_used import check_samples_used, samples_used
from tests.unit.test_config_patch import SHIPPED, _real_paths, _recipe


def _facts(*sound: bool) -> dict[str, dict[str, Any]]:
    return {f"/d/clip{i}.mp4": {"kind": "video", "has_audio": has} for i, has in enumerate(sound)}


def test_auto_trains_audio_when_every_clip_has_sound_and_video_only_when_none_has() -> None:
    t2v = get_mode("t2v")
    assert decide_audio(t2v, "auto", _facts(True, True)).trains == "audio+video"
    silent = decide_audio(t2v, "auto", _facts(False, False, False))
    assert silent.trains == "video" and silent.blocker is None and "no clip has sound" in silent.reason
    assert len(silent.silent) == 3 and not silent.left_out


def test_auto_with_some_silent_clips_blocks_naming_them_and_both_choices() -> None:
    plan = decide_audio(get_mode("i2v"), "auto", _facts(True, False, True, False))
    assert plan.blocker and "clip1.mp4" in plan.blocker and "clip3.mp4" in plan.blocker
    assert "--audio off" in plan.blocker and "--audio on" in plan.blocker
    text = "\n".join(plan.plan_lines("--workspace w --run r"))
    assert "This blocks approval" in text and "`clip1.mp4`" in text and "--audio off" in text
    assert "Trains: **not decided yet**" in text  # never the template's default shown as the choice


def test_on_leaves_the_silent_clips_out_and_off_keeps_every_clip_video_only() -> None:
    on = decide_audio(get_mode("t2v"), "on", _facts(True, False))
    assert on.trains == "audio+video" and on.left_out == ("/d/clip1.mp4",) and on.blocker is None
    off = decide_audio(get_mode("t2v"), "off", _facts(True, False))
    assert off.trains == "video" and not off.left_out
    assert decide_audio(get_mode("t2v"), "on", _facts(False, False)).blocker  # nothing would train


def test_audio_cannot_be_forced_on_a_mode_that_trains_fixed_modalities() -> None:
    with pytest.raises(BadRequest) as caught:
        build_request({"dataset": "d.json", "mode": "v2v", "audio": "off"})
    assert "--audio off applies only to" in caught.value.what
    assert build_request({"dataset": "d.json", "mode": "v2v"}).audio == "auto"
    assert decide_audio(get_mode("av2av"), "auto", _facts(False)).trains == "as-mode"


def test_a_video_only_run_reads_no_audio_latents() -> None:
    mode = trained_mode(get_mode("t2v"), {"trains": "video"})
    assert "audio_latents" not in mode.precomputed_dirs and not mode.audio_run
    assert trained_mode(get_mode("t2v"), {"trains": "audio+video"}).audio_run


@pytest.mark.skipif(not SHIPPED.is_dir(), reason="shared ltx2-configs are not present")
@pytest.mark.parametrize(("name", "mode"), [("t2v_lora.yaml", "t2v"), ("i2v_lora.yaml", "i2v")])
def test_video_only_config_derived_from_the_shipped_template(name: str, mode: str, tmp_path: Path) -> None:
    template = (SHIPPED / name).read_text(encoding="utf-8")
    recipe = _recipe(mode)
    patches = patches_for_stage(recipe, 1, mode=mode, paths=_real_paths(tmp_path, yaml.safe_load(template)),
                                trigger="zxq", wandb=False, previous_stage_weights=None)
    patched, records = apply_patches(template, [*patches, *video_only_patches("lora")])
    view = yaml.safe_load(patched)
    assert view["training_strategy"]["audio"] is None
    assert view["training_strategy"]["video"]["is_generated"] is True
    assert view["validation"]["generate_audio"] is False
    assert view["lora"]["target_modules"] == list(VIDEO_ONLY_TARGETS)
    assert set(data_sources(view)) == {"latents", "conditions"}  # no sample needs audio latents
    assert check_patched(patched, relaxed_paths=False) == []
    reasons = {r.path: r.reason for r in records}
    assert all("video only" in reasons[p] for p in ("training_strategy.audio", "validation.generate_audio",
                                                    "lora.target_modules"))
    assert "# Optimization Configuration" in patched  # the next section's header survives the replaced block
    if mode == "i2v":
        assert view["training_strategy"]["video"]["conditions"][0]["type"] == "first_frame"


def _summary_facts(tmp_path: Path, log: Path) -> dict[str, Any]:
    config = tmp_path / "config.yaml"
    config.write_text("seed: 42\n")
    stage = {"stage": 1, "final_step": 60, "final_checkpoint": str(tmp_path / "w.safetensors"), "log": str(log),
             "step_time_s": 0.4, "steps_per_second": 2.0, "peak_gpu_memory_gb": 61.3, "on_gpu": True,
             "logged_steps": 3, "config": str(config), "launch": "python -m trainer config.yaml"}
    stage["samples_used"] = samples_used(log, tmp_path / ".precomputed")
    return {"run": "r1", "run_root": str(tmp_path), "gpus": "H100", "request": {"backend": "ltx", "mode": "t2v",
            "dataset": "d.json"}, "mode_title": "t2v", "samples": 4, "data_stages": [{"buckets": "64x64x17"}],
            "stages": [stage], "seed": 42, "model_path": "m", "text_encoder_path": "t", "trainer_commit": None}


def test_run_summary_says_the_samples_the_trainer_used_not_the_plans_count(tmp_path: Path) -> None:
    """Issue 33: 4 clips, 3 silent, `Skipped 3 invalid samples from 4 total`: the summary said 4 sample(s)."""
    log = tmp_path / "train.log"
    log.write_text("INFO Skipped 3 invalid samples from 4 total\n")
    facts = _summary_facts(tmp_path, log)
    text = render_summary(facts)
    assert "4 sample(s);" not in text
    assert "1 sample(s) trained on, of 4 planned" in text
    assert "**Warning: stage 1 trained on 1 of 4 sample(s)**" in text and str(log) in text
    with pytest.raises(RunFailed) as caught:
        check_samples_used(facts["stages"], facts["samples"])
    assert "--audio off" in (caught.value.fix or "") and caught.value.where == str(log)
    check_samples_used(facts["stages"], facts["samples"], agreed=3)  # skips the plan announced do not fail


def test_with_no_skip_line_the_latent_files_are_the_count(tmp_path: Path) -> None:
    log = tmp_path / "train.log"
    log.write_text("INFO Step 1/2 loss 0.5\n")
    for name in ("a", "b", "c"):
        path = tmp_path / ".precomputed" / "latents" / f"{name}.pt"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"")
    facts = _summary_facts(tmp_path, log)
    assert "3 sample(s) trained on, of 4 planned" in render_summary(facts)
    check_samples_used(facts["stages"], 3)  # nothing skipped by the trainer: no failure


def test_a_mode_that_reads_the_clips_sound_names_silent_clips_before_approval_and_on_leaves_them_out() -> None:
    """a2v and v2a train on the clips' sound whatever is asked: no silent clip may be dropped unsaid."""
    blocked = decide_audio(get_mode("v2a"), "auto", _facts(True, False))
    assert blocked.blocker and "clip1.mp4" in blocked.blocker and "--audio on" in blocked.blocker
    on = decide_audio(get_mode("a2v"), "on", _facts(True, False))
    assert on.blocker is None and on.left_out == ("/d/clip1.mp4",) and on.trains == "as-mode"
    assert decide_audio(get_mode("a2v"), "on", _facts(False)).blocker  # nothing would be left to train on
    assert build_request({"dataset": "d.json", "mode": "a2v", "audio": "on"}).audio == "on"
    with pytest.raises(BadRequest) as caught:
        build_request({"dataset": "d.json", "mode": "v2a", "audio": "off"})
    assert "trains on the clips' sound" in caught.value.what
    assert decide_audio(get_mode("v2v"), "auto", _facts(False)).blocker is None  # reads no sound


def test_a_small_measured_peak_reads_in_mib_not_as_zero_gb(tmp_path: Path) -> None:
    """The toy's unscaled peak (under 1 MiB) read ``0.00 GB`` in run-summary.md, as if nothing was measured."""
    log = tmp_path / "train.log"
    log.write_text("INFO Step 1/2 loss 0.5\n")
    facts = _summary_facts(tmp_path, log)
    facts["stages"][0]["peak_gpu_memory_gb"] = 866620 / 1024**3
    text = render_summary(facts)
    assert "| 0.8 MiB |" in text and "0.00 GiB" not in text
    facts["stages"][0]["peak_gpu_memory_gb"] = 61.3
    assert "| 61.30 GiB |" in render_summary(facts)
