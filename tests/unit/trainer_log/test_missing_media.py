"""Validation media that does not exist is ``missing_files``, naming the path and its config key (issue 42).

The trainer pre-encodes validation conditioning media in ``ValidationRunner.__init__`` (validation_runner.py):
audio through ``torchaudio.load``, which since torchaudio 2.9 is torchcodec's ``AudioDecoder`` (its messages:
torchaudio ``_torchcodec.py`` "Failed to create AudioDecoder for {uri}: {e}", torchcodec
``SingleStreamDecoder.cpp`` "Could not open input file: {path} {FFmpeg error}"); images through PIL and videos
through PyAV, which raise ``FileNotFoundError: [Errno 2] No such file or directory: '{path}'``.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from ltx_pipeline.trainer_log import ErrorSignal, classify_failure, failure_tail, parse_lines

FIXTURE = (Path(__file__).resolve().parents[2] / "fixtures" / "trainer_logs" / "missing_media"
           / "validation_audio_torchcodec.log")
AUDIO = "/data/voice_clone/validation/conditioning_audio_1.wav"
RUNNER = '  File "/home/alice/LTX-2/packages/ltx-trainer/src/ltx_trainer/validation_runner.py", line {}, in {}'


def _traceback(function: str, line: int, source: str, error: str) -> list[str]:
    return ["Traceback (most recent call last):",
            RUNNER.format(412, "_encode_conditioning_media"),
            "    cached.append(self._encode_sample_conditions(sample, sample_dims, vae_encoder, audio_encoder, "
            "device))",
            RUNNER.format(line, function), f"    {source}", error]


def test_missing_validation_audio_is_missing_files_naming_the_file_and_its_key() -> None:
    failure = classify_failure(1, None, failure_tail(FIXTURE))
    assert failure.kind == "missing_files"
    assert failure.phase == "embedding_precomputation"
    assert failure.evidence.startswith(f"RuntimeError: Failed to create AudioDecoder for {AUDIO}: ")
    assert "No such file or directory" in failure.evidence
    [step] = failure.fix
    assert step.path is None
    assert AUDIO in step.reason
    assert "point validation.samples[].conditions[].audio at an existing file" in step.reason
    assert "ltx-pipeline validate" in step.reason


def test_with_the_config_the_fix_names_the_exact_condition_key() -> None:
    config = {"validation": {"samples": [
        {"prompt": "a", "conditions": [{"type": "first_frame", "image_or_video": "/data/val/first.png"}]},
        {"prompt": "b", "conditions": [{"type": "prefix", "video": "/data/val/lead_in.mp4"},
                                       {"type": "audio_to_video", "audio": AUDIO}]},
    ]}}
    failure = classify_failure(1, None, failure_tail(FIXTURE), config=config)
    assert failure.kind == "missing_files"
    assert f"{AUDIO} does not exist: point validation.samples.1.conditions.1.audio at" in failure.fix[0].reason


def test_an_audio_file_that_exists_but_does_not_decode_is_not_missing_files() -> None:
    corrupt = [line.replace("No such file or directory", "Invalid data found when processing input")
               for line in failure_tail(FIXTURE)]
    assert any("Failed to create AudioDecoder" in line for line in corrupt)
    failure = classify_failure(1, None, corrupt)
    assert failure.kind != "missing_files"
    assert failure.kind == "crash"
    assert "Invalid data found when processing input" in failure.evidence


@pytest.mark.parametrize(("function", "line", "source", "error", "path", "key"), [
    ("_load_first_frame", 1314, "image = open_image_as_srgb(str(media_path))",
     "FileNotFoundError: [Errno 2] No such file or directory: '/data/val/first frame.png'",
     "/data/val/first frame.png", "validation.samples[].conditions[].image_or_video"),
    ("_encode_temporal_condition_media", 548, "video, _ = read_video(video_path, max_frames=max_frames)",
     "av.error.FileNotFoundError: [Errno 2] No such file or directory: '/data/val/lead_in.mp4'",
     "/data/val/lead_in.mp4", "validation.samples[].conditions[].video"),
    ("_load_and_downsample_mask", 1111, "frames, _ = read_video(str(mask_path), max_frames=target_num_frames)",
     "av.error.FileNotFoundError: [Errno 2] No such file or directory: '/data/val/mask.mp4'",
     "/data/val/mask.mp4", "validation.samples[].conditions[].mask"),
    ("_encode_audio", 1079, "waveform, sr = torchaudio.load(audio_path)",  # torchaudio < 2.9, FFmpeg backend
     'RuntimeError: Failed to open the input "/data/val/voice.flac" (No such file or directory).',
     "/data/val/voice.flac", "validation.samples[].conditions[].audio"),
])
def test_other_media_readers_name_the_missing_file_and_the_condition_key(
        function: str, line: int, source: str, error: str, path: str, key: str) -> None:
    failure = classify_failure(1, None, _traceback(function, line, source, error))
    assert failure.kind == "missing_files"
    assert path in failure.evidence
    assert f"{path} does not exist: point {key} at an existing file" in failure.fix[0].reason


def test_torchcodec_video_decoder_message_is_a_missing_file_and_its_signal() -> None:
    error = "RuntimeError: Could not open input file: /data/clips/intro.mp4 No such file or directory"
    assert [e for e in parse_lines([error]) if isinstance(e, ErrorSignal)] == [ErrorSignal("missing_files", error)]
    failure = classify_failure(1, None, ["Traceback (most recent call last):", error])
    assert failure.kind == "missing_files"
    assert failure.fix[0].reason.startswith("/data/clips/intro.mp4 does not exist")
    unreadable = error.replace("No such file or directory", "Invalid data found when processing input")
    assert classify_failure(1, None, ["Traceback (most recent call last):", unreadable]).kind == "crash"


def test_trainer_messages_name_the_path_and_the_key_holding_it() -> None:
    lines = ["FileNotFoundError: Data root directory does not exist: /data/my_concept/.precomputed"]
    generic = classify_failure(1, None, lines)
    assert generic.kind == "missing_files"
    assert generic.fix[0].reason.startswith("/data/my_concept/.precomputed does not exist; check model.model_path")
    config = {"data": {"preprocessed_data_root": "/data/my_concept/.precomputed"}}
    keyed = classify_failure(1, None, lines, config=config).fix[0].reason
    assert "point data.preprocessed_data_root at an existing path, then" in keyed
    assert "remove that condition" not in keyed
