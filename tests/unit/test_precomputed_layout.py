"""Which files the trainer's preprocessing writes for a row, and which of its scripts writes each (#44)."""

from __future__ import annotations

from pathlib import Path

import pytest

from ltx_pipeline.errors import BadDataset
from ltx_pipeline.ltx.modes import MODES
from ltx_pipeline.ltx.precomputed_layout import PlannedOutput, dataset_roles, row_outputs, script_for

BASE = Path("/data/set")
VIDEO_ROW = {"caption": "a cat", "video": "videos/a.mp4"}


def _paths(outputs: tuple[PlannedOutput, ...]) -> dict[str, str]:
    return {output.path: output.script for output in outputs}


@pytest.mark.parametrize("mode", [m for m in MODES.values() if m.columns == ("caption", "video")])
def test_a_video_mode_writes_conditions_latents_and_the_clips_sound(mode) -> None:  # noqa: ANN001
    with_sound = row_outputs(mode, VIDEO_ROW, BASE, extract_audio=True)
    assert _paths(with_sound) == {"conditions/videos/a.pt": "captions", "latents/videos/a.pt": "videos",
                                  "audio_latents/videos/a.pt": "videos"}
    # Training reads audio latents only in audio runs; preprocessing writes them all the same.
    assert {o.folder for o in with_sound if o.trained} == set(mode.precomputed_dirs)
    silent = row_outputs(mode, VIDEO_ROW, BASE, extract_audio=False)  # --skip-audio, or a clip with no track
    assert _paths(silent) == {"conditions/videos/a.pt": "captions", "latents/videos/a.pt": "videos"}


@pytest.mark.parametrize("mode", [m for m in MODES.values() if m.columns == ("caption", "audio")])
def test_an_audio_mode_encodes_its_audio_files_which_only_process_dataset_does(mode) -> None:  # noqa: ANN001
    row = {"caption": "rain", "audio": "sounds/r.wav"}
    for extract in (True, False):  # no video to take sound from: the audio column is encoded either way
        outputs = row_outputs(mode, row, BASE, extract_audio=extract)
        assert _paths(outputs) == {"conditions/sounds/r.pt": "captions", "audio_latents/sounds/r.pt": "dataset"}
        assert all(o.trained for o in outputs)


def test_reference_and_mask_modes_name_every_file_after_the_target_video() -> None:
    row = {"caption": "c", "video": "v/t.mp4", "reference_video": "refs/r.mp4"}
    assert _paths(row_outputs(MODES["v2v"], row, BASE, extract_audio=False)) == {
        "conditions/v/t.pt": "captions", "latents/v/t.pt": "videos", "reference_latents/v/t.pt": "dataset"}
    inpaint = {"caption": "c", "video": "v/t.mp4", "video_mask": "masks/m.mp4"}
    assert _paths(row_outputs(MODES["video-inpaint"], inpaint, BASE, extract_audio=True)) == {
        "conditions/v/t.pt": "captions", "latents/v/t.pt": "videos", "audio_latents/v/t.pt": "videos",
        "video_masks/v/t.pt": "dataset"}
    av = {"caption": "c", "video": "v/t.mp4", "reference_video": "r/v.mp4", "reference_audio": "r/a.wav"}
    outputs = row_outputs(MODES["av2av"], av, BASE, extract_audio=True)
    assert _paths(outputs) == {"conditions/v/t.pt": "captions", "latents/v/t.pt": "videos",
                               "reference_latents/v/t.pt": "dataset", "audio_latents/v/t.pt": "videos",
                               "reference_audio_latents/v/t.pt": "dataset"}
    assert all(o.trained for o in outputs)


def test_audio_only_references_and_masks_are_named_after_their_own_or_the_audio_file() -> None:
    """Without a video, reference audio is named after the reference file (the a2a quirk ``link_reference_audio``
    repairs), audio masks after the audio."""
    a2a = {"caption": "c", "audio": "a/t.wav", "reference_audio": "a/r.wav"}
    assert _paths(row_outputs(MODES["a2a"], a2a, BASE, extract_audio=True)) == {
        "conditions/a/t.pt": "captions", "audio_latents/a/t.pt": "dataset", "reference_audio_latents/a/r.pt": "dataset"}
    inpaint = {"caption": "c", "audio": "a/t.wav", "audio_mask": "m/t.wav"}
    assert _paths(row_outputs(MODES["audio-inpaint"], inpaint, BASE, extract_audio=False)) == {
        "conditions/a/t.pt": "captions", "audio_latents/a/t.pt": "dataset", "audio_masks/a/t.pt": "dataset"}


def test_legacy_columns_absolute_paths_and_overrides_name_as_the_trainer() -> None:
    legacy = {"caption": "c", "media_path": " /mnt/x/a.mov ", "ref_media_path": "r.mp4"}
    assert dataset_roles(legacy) == {"caption": "caption", "video": "media_path", "reference_video": "ref_media_path"}
    assert _paths(row_outputs(MODES["v2v"], legacy, BASE, extract_audio=False)) == {
        "conditions/mnt/x/a.pt": "captions", "latents/mnt/x/a.pt": "videos", "reference_latents/mnt/x/a.pt": "dataset"}
    columns = ["text", "clip", "caption", "video"]
    assert dataset_roles(columns, video_column="clip", caption_column="text") == {"caption": "text", "video": "clip"}
    assert dataset_roles(columns, video_column="absent") == {"caption": "caption", "video": "video"}


def test_a_row_without_what_its_roles_need_is_one_clear_line() -> None:
    with pytest.raises(BadDataset, match="no 'video' value"):
        row_outputs(MODES["t2v"], {"caption": "c", "video": " "}, BASE, extract_audio=False)
    with pytest.raises(BadDataset, match="lack a caption or a video/audio column"):
        row_outputs(MODES["t2v"], {"video": "a.mp4"}, BASE, extract_audio=False)


def test_the_script_for_a_rows_missing_files() -> None:
    outputs = row_outputs(MODES["t2v"], VIDEO_ROW, BASE, extract_audio=True)
    by_folder = {o.folder: o for o in outputs}
    assert script_for([]) is None
    assert script_for([by_folder["conditions"]]) == "captions"  # a caption edit: text only
    assert script_for([by_folder["latents"], by_folder["audio_latents"]]) == "videos"  # another bucket
    assert script_for(outputs) == "dataset"  # a new clip
    reference = row_outputs(MODES["v2v"], {**VIDEO_ROW, "reference_video": "r.mp4"}, BASE, extract_audio=False)
    assert script_for([o for o in reference if o.folder != "conditions"]) == "dataset"  # no split script makes refs
