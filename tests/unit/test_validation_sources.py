"""Validation conditions from the user's rows: which row, which column, what is derived, and the geometry fit."""

from __future__ import annotations

import wave
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ltx_pipeline.errors import BadDataset
from ltx_pipeline.ltx.condition_geometry import Geometry, fit_training_condition, fit_validation_condition
from ltx_pipeline.ltx.modes import MODES
from ltx_pipeline.ltx.sample_clips import write_clip
from ltx_pipeline.ltx.validation_sources import Candidate, choose_sources, plan_lines
from ltx_pipeline.validation_media import materialize_samples

FIRST_FRAME = [[{"type": "first_frame", "image_or_video": "/path/to/conditioning_image_1.png"}],
               [{"type": "first_frame", "image_or_video": "/path/to/conditioning_image_2.png"}]]
A2V = [[{"type": "audio_to_video", "audio": "/path/to/conditioning_audio_1.wav"}]]


def _clip(name: str, *, sound: bool | None = True, held_out: bool = False, row: int | None = 0,
          **columns: str) -> Candidate:
    return Candidate(f"/data/{name}", row, held_out, {"video": f"/data/{name}", **columns}, sound, f"caption {name}")


def test_held_out_rows_come_first_then_dataset_order() -> None:
    rows = [_clip("a.mp4", row=0), _clip("b.mp4", row=1), _clip("h.mp4", row=0, held_out=True)]
    chosen = choose_sources(FIRST_FRAME, rows, video_media=True)
    assert [s.source for s in chosen.samples] == ["/data/h.mp4", "/data/a.mp4"]
    assert chosen.samples[0].held_out and "held-out" in chosen.samples[0].why
    first = chosen.samples[0].conditions[0]
    assert (first.field, first.column, first.derive, first.file) == ("image_or_video", "video", "first_frame_png",
                                                                      "/data/h.mp4")
    assert chosen.blocker is None


def test_a_clip_without_sound_never_gives_an_audio_condition() -> None:
    rows = [_clip("silent.mp4", sound=False), _clip("loud.mp4", sound=True, row=1)]
    chosen = choose_sources(A2V, rows, video_media=True)
    assert [s.source for s in chosen.samples] == ["/data/loud.mp4"]
    assert chosen.samples[0].conditions[0].derive == "sound_wav"


def test_silent_data_for_an_audio_condition_blocks_and_offers_both_ways_out() -> None:
    chosen = choose_sources(A2V, [_clip("silent.mp4", sound=False)], video_media=True)
    assert chosen.blocker is not None and not chosen.samples
    assert "--validation-media without" in chosen.blocker and "--validation-media none" in chosen.blocker
    assert "its clip has no sound" in chosen.blocker
    without = choose_sources(A2V, [_clip("silent.mp4", sound=False)], video_media=True, choice="without")
    assert without.blocker is None and without.dropped == ("audio_to_video",)
    none = choose_sources(A2V, [_clip("silent.mp4", sound=False)], video_media=True, choice="none")
    assert none.validation_off and none.blocker is None
    assert "--validation-media none" in plan_lines(none, "--run r")[2]


def test_the_preferred_rows_are_taken_in_the_plans_order() -> None:
    rows = [_clip("a.mp4", row=0), _clip("b.mp4", row=1), _clip("c.mp4", row=2)]
    chosen = choose_sources(FIRST_FRAME, rows, video_media=True, prefer=["/data/c.mp4", "/data/a.mp4"])
    assert [s.source for s in chosen.samples] == ["/data/c.mp4", "/data/a.mp4"]


def test_a_reference_mode_needs_the_rows_reference_column() -> None:
    shapes = [[{"type": "reference", "video": "/path/to/reference_video_1.mp4", "downscale_factor": 1}]]
    no_reference = choose_sources(shapes, [_clip("a.mp4")], video_media=True)
    assert no_reference.blocker is not None and "reference_video" in no_reference.blocker
    chosen = choose_sources(shapes, [_clip("a.mp4", reference_video="/data/ref.mp4")], video_media=True)
    assert chosen.samples[0].conditions[0].file == "/data/ref.mp4"


@pytest.mark.parametrize("mode", sorted(MODES))
def test_every_template_condition_field_with_media_is_filled(mode: str) -> None:
    """No template condition field that names a file is left out of the choice (13 of 15 templates have one)."""
    from ltx_pipeline.ltx.validation_sources import condition_needs

    shipped = Path(__file__).resolve().parents[3] / "shared" / "ltx2-src" / "packages" / "ltx-trainer" / "configs"
    if not shipped.is_dir():
        pytest.skip("../shared/ltx2-src is absent: the shipped templates cannot be read")
    from ltx_pipeline.validation_media import template_samples

    samples, _ = template_samples(shipped / MODES[mode].config)
    for sample in samples:
        for condition in sample.get("conditions") or []:
            media = {k for k, v in condition.items() if isinstance(v, str) and "/path/to/" in v}
            assert media == set(condition_needs(condition, video_media=MODES[mode].video_media)), (mode, condition)


TEMPLATE = Geometry(960, 544, 89)


@given(frames=st.integers(1, 40).map(lambda k: 8 * k + 1), boundary=st.integers(1, 11),
       kind=st.sampled_from(["prefix", "suffix"]))
def test_a_fitted_boundary_leaves_every_bucket_something_to_generate_and_validation_matches_it(
        frames: int, boundary: int, kind: str) -> None:
    smallest = Geometry(64, 64, frames)
    trained = fit_training_condition({"type": kind, "temporal_boundary": boundary}, smallest, TEMPLATE)
    fitted = trained["temporal_boundary"]
    assert 1 <= fitted and (fitted < smallest.latent_frames or smallest.latent_frames == 1)
    shipped = {"type": kind, "video": "v.mp4", "num_frames": 57 if kind == "prefix" else 64}
    validation = fit_validation_condition(shipped, smallest, TEMPLATE, [trained])
    # As the templates' comments match them: (N - 1) * 8 + 1 frames for a prefix, N * 8 for a suffix.
    assert validation["num_frames"] == ((fitted - 1) * 8 + 1 if kind == "prefix" else fitted * 8)
    assert validation["num_frames"] < frames or frames == 9


def test_the_shipped_boundaries_at_the_templates_size_are_kept() -> None:
    for kind, frames in (("prefix", 57), ("suffix", 64)):
        trained = fit_training_condition({"type": kind, "temporal_boundary": 8}, TEMPLATE, TEMPLATE)
        assert trained["temporal_boundary"] == 8
        shipped = {"type": kind, "video": "v.mp4", "num_frames": frames}
        assert fit_validation_condition(shipped, TEMPLATE, TEMPLATE, [trained])["num_frames"] == frames


@given(frames=st.integers(1, 40).map(lambda k: 8 * k + 1), kind=st.sampled_from(["prefix", "suffix"]))
def test_a_fitted_audio_duration_is_shorter_than_the_render(frames: int, kind: str) -> None:
    shipped = {"type": kind, "audio": "a.wav", "duration": 1.0}
    fitted = fit_validation_condition(shipped, Geometry(64, 64, frames), TEMPLATE)
    assert 0 < fitted["duration"] < frames / 24.0 and fitted["duration"] <= 1.0
    assert fit_validation_condition(shipped, TEMPLATE, TEMPLATE)["duration"] == 1.0  # the template's own size


@given(width=st.integers(1, 40).map(lambda k: 32 * k), height=st.integers(1, 40).map(lambda k: 32 * k))
def test_a_fitted_spatial_region_stays_inside_the_frame_on_the_grid(width: int, height: int) -> None:
    smallest = Geometry(width, height, 25)
    trained = fit_training_condition({"type": "spatial_crop", "spatial_region": [0, 0, 288, 576]}, smallest,
                                     TEMPLATE)
    y1, x1, y2, x2 = trained["spatial_region"]
    assert all(v % 32 == 0 for v in (y1, x1, y2, x2))
    assert 0 <= y1 < y2 <= height and 0 <= x1 < x2 <= width
    validation = fit_validation_condition({"type": "spatial_crop", "video": "v.mp4", "spatial_region": [0, 0, 1, 1]},
                                          smallest, TEMPLATE, [trained])
    assert validation["spatial_region"] == trained["spatial_region"]  # validation crops what training crops


def test_materialized_media_are_written_into_the_run_never_beside_the_clip(tmp_path: Path) -> None:
    clip = write_clip(tmp_path / "data" / "clip.mp4", 25, 64, 64, audio=True)
    rows = [Candidate(str(clip), 0, False, {"video": str(clip)}, True, "a red square")]
    shapes = [[{"type": "first_frame", "image_or_video": "x"}, {"type": "audio_to_video", "audio": "y"}]]
    chosen = choose_sources(shapes, rows, video_media=True)
    run = tmp_path / "ws" / "run"
    built = materialize_samples(chosen, [{"prompt": "p", "conditions": shapes[0]}], {str(clip): "a red square"},
                                smallest=Geometry(64, 64, 25), template_geometry=TEMPLATE, trigger="TOK",
                                out_dir=run / "validation", workspace=tmp_path / "ws")
    sample = built.samples[0]
    assert sample["prompt"] == "TOK a red square"
    image, sound = sample["conditions"][0]["image_or_video"], sample["conditions"][1]["audio"]
    assert Path(image).parent == run / "validation" and Path(sound).parent == run / "validation"
    assert sorted(p.name for p in (tmp_path / "data").iterdir()) == ["clip.mp4"]
    from PIL import Image

    with Image.open(image) as picture:
        assert picture.size == (64, 64)
    with wave.open(sound) as track:
        assert track.getnframes() > 0.9 * track.getframerate()  # about 1 s of the clip's tone
        assert track.getnchannels() == 2  # the trainer's audio VAE takes stereo; the clip's tone is mono


def test_a_silent_clip_chosen_for_its_sound_fails_naming_it(tmp_path: Path) -> None:
    clip = write_clip(tmp_path / "clip.mp4", 25, 64, 64, audio=False)
    rows = [Candidate(str(clip), 0, False, {"video": str(clip)}, None, "c")]  # sound unknown to the plan
    chosen = choose_sources(A2V, rows, video_media=True)
    with pytest.raises(BadDataset) as caught:
        materialize_samples(chosen, [{"prompt": "p", "conditions": A2V[0]}], {str(clip): "c"},
                            smallest=Geometry(64, 64, 25), template_geometry=TEMPLATE, trigger=None,
                            out_dir=tmp_path / "v", workspace=tmp_path)
    assert "no sound track" in caught.value.what and caught.value.where == str(clip)


def test_the_readme_mode_table_says_what_the_code_chooses() -> None:
    """Each mode's row of the README table: its template, columns and condition sources, as the code has them."""
    from ltx_pipeline.ltx.validation_sources import condition_needs
    from ltx_pipeline.validation_media import template_samples

    root = Path(__file__).resolve().parents[2]
    shipped = root.parent / "shared" / "ltx2-src" / "packages" / "ltx-trainer" / "configs"
    if not shipped.is_dir():
        pytest.skip("../shared/ltx2-src is absent: the shipped templates cannot be read")
    readme = (root / "README.md").read_text(encoding="utf-8")
    for name, mode in MODES.items():
        samples, _ = template_samples(shipped / mode.config)
        needs = {f"`{c['type']}.{f}`": need.words() for s in samples for c in s.get("conditions") or []
                 for f, need in condition_needs(c, video_media=mode.video_media).items()}
        where = "; ".join(f"{k}: {v}" for k, v in needs.items()) or "none: the template's prompts"
        columns = ", ".join(f"`{c}`" for c in mode.columns)
        assert f"| {name} | `{mode.config}` | {columns} | {where} |" in readme, name


def test_silent_clips_in_an_audio_mode_block_once_not_twice(workspace: Path, tmp_path: Path) -> None:
    """a2v on silent clips: the audio choice blocks the run; validation's need for sound is not a second blocker."""
    from ltx_pipeline.cli import main

    trainer = Path(__file__).resolve().parents[3] / "shared" / "ltx2-src"
    if not (trainer / "packages" / "ltx-trainer" / "configs" / "a2v_lora.yaml").is_file():
        pytest.skip("../shared/ltx2-src is absent: the a2v template cannot be read")
    clips = tmp_path / "clips"
    for index in range(2):
        write_clip(clips / f"c{index}.mp4", 30, 64, 64, audio=False)
    code = main(["run", "--workspace", str(workspace), "--run", "r", "--dataset", str(clips), "--mode", "a2v",
                 "--backend", "ltx", "--trainer-root", str(trainer), "--assume-gpu", "NVIDIA H100 80GB HBM3,81559",
                 "--buckets", "64x64x25",
                 "--autotune", "off", "--captioner", "offline"])
    assert code == 3  # stopped at the approval gate
    plan = (workspace / "r" / "plan.md").read_text(encoding="utf-8")
    assert "have none" in plan.split("## Audio", 1)[1].split("\n## ", 1)[0]
    section = plan.split("## Validation samples", 1)[1].split("\n## ", 1)[0]
    assert "audio_to_video.audio" in section and "blocks approval" not in section
