"""Issue 42: a trainer config naming a placeholder, missing or unreadable path is refused, every key named.

The checker (``ltx.config_paths``) over configs built in a temp folder, then ``validate_stage`` on the
reference backend: the validate phase's relaxed pass excuses only the folder the pipeline preprocesses
into, and each unusable path is one problem, not repeated by the schema or the launch rules.
"""

from __future__ import annotations

import copy
import os
from pathlib import Path
from typing import Any

import pytest
import yaml

from ltx_pipeline.backends.reference import ReferenceBackend
from ltx_pipeline.errors import EXIT_BAD_INPUT, BadConfig
from ltx_pipeline.ltx.config_paths import path_checks, unusable_paths_error
from ltx_pipeline.training.validation import LaunchTarget, validate_stage

IMAGE = "validation.samples[0].conditions[0].image_or_video"


@pytest.fixture
def files(tmp_path: Path) -> dict[str, Path]:
    """A model file, a text-encoder folder, a preprocessed root and one conditioning image, all real."""
    paths = {"model": tmp_path / "models" / "base.safetensors", "encoder": tmp_path / "models" / "gemma",
             "root": tmp_path / "data" / ".precomputed", "image": tmp_path / "media" / "first.png",
             "video": tmp_path / "media" / "ref.mp4"}
    for name in ("encoder", "root"):
        paths[name].mkdir(parents=True)
    for sub in ("latents", "audio_latents", "conditions"):
        (paths["root"] / sub).mkdir()
    for name in ("model", "image", "video"):
        paths[name].parent.mkdir(parents=True, exist_ok=True)
        paths[name].write_bytes(b"0")
    return paths


@pytest.fixture
def clean(files: dict[str, Path], tmp_path: Path) -> dict[str, Any]:
    return {
        "model": {"model_path": str(files["model"]), "text_encoder_path": str(files["encoder"]),
                  "training_mode": "lora", "load_checkpoint": None},
        "lora": {"rank": 8, "alpha": 8},
        "training_strategy": {"name": "flexible", "video": {"is_generated": True, "latents_dir": "latents"},
                              "audio": {"is_generated": True, "latents_dir": "audio_latents"}},
        "optimization": {"steps": 10, "batch_size": 1},
        "data": {"preprocessed_data_root": str(files["root"]), "num_dataloader_workers": 0},
        "validation": {"samples": [{"prompt": "a fox", "conditions": [
            {"type": "first_frame", "image_or_video": str(files["image"])}]}],
            "video_dims": [64, 64, 17], "interval": 5},
        "checkpoints": {"interval": 5, "keep_last_n": -1},
        "output_dir": str(tmp_path / "out"),
    }


def with_value(config: dict[str, Any], dotted: str, value: Any) -> dict[str, Any]:
    """A copy of ``config`` with ``value`` at ``dotted`` (``a.b[0].c`` style keys, lists must exist)."""
    data = copy.deepcopy(config)
    parts: list[str | int] = []
    for piece in dotted.replace("]", "").split("."):
        name, *indices = piece.split("[")
        parts += [name, *(int(i) for i in indices)]
    node: Any = data
    for part in parts[:-1]:
        node = node[part] if isinstance(part, int) else node.setdefault(part, {})
    node[parts[-1]] = value
    return data


def codes(checks: list) -> list[tuple[str | None, str]]:
    return [(c.path, c.code) for c in checks]


def test_a_config_whose_paths_all_exist_passes(clean) -> None:
    assert path_checks(clean) == []


def test_a_missing_validation_image_is_named_by_key_and_value(clean, tmp_path) -> None:
    missing = str(tmp_path / "media" / "nope.png")
    [check] = path_checks(with_value(clean, IMAGE, missing))
    assert (check.severity, check.code, check.path) == ("error", "path-missing", IMAGE)
    assert check.message == f"{IMAGE} = {missing!r} does not exist"
    assert check.fix == "name an existing file there"


@pytest.mark.parametrize("key", [IMAGE, "model.model_path", "model.text_encoder_path",
                                 "data.preprocessed_data_root", "output_dir", "validation.samples[0].prompt",
                                 "wandb.project"])
def test_a_placeholder_is_refused_wherever_it_stands(clean, key) -> None:
    value = "/path/to/conditioning_image_1.png"
    [check] = path_checks(with_value(clean, key, value))
    assert (check.code, check.path) == ("path-placeholder", key)
    assert repr(value) in check.message and "placeholder" in check.message


def test_the_templates_relative_placeholders_are_placeholders_too(clean) -> None:
    config = with_value(clean, "model.model_path", "path/to/ltx-2-model.safetensors")
    assert codes(path_checks(config)) == [("model.model_path", "path-placeholder")]


def test_every_validation_medium_and_legacy_list_is_checked(clean, files, tmp_path) -> None:
    gone = str(tmp_path / "gone.mp4")
    config = copy.deepcopy(clean)
    config["validation"]["samples"].append({"prompt": "b", "conditions": [
        {"type": "reference", "video": gone},
        {"type": "mask", "audio": str(files["video"]), "mask": gone},
        {"type": "audio_to_video", "audio": "/path/to/conditioning_audio_1.wav"}]})
    config["validation"]["prompts"] = ["x", "y"]
    config["validation"]["images"] = [str(files["image"]), gone]
    config["validation"]["reference_videos"] = [gone, str(files["video"])]
    assert codes(path_checks(config)) == [
        ("validation.samples[1].conditions[0].video", "path-missing"),
        ("validation.samples[1].conditions[1].mask", "path-missing"),
        ("validation.samples[1].conditions[2].audio", "path-placeholder"),
        ("validation.images[1]", "path-missing"),
        ("validation.reference_videos[0]", "path-missing"),
    ]


def test_a_file_that_cannot_be_read_is_refused(clean, files, monkeypatch) -> None:
    real_access = os.access

    def access(path, mode, **kwargs):  # root reads everything: deny this one file as chmod 000 would
        return False if Path(path) == files["image"] else real_access(path, mode, **kwargs)

    monkeypatch.setattr(os, "access", access)
    [check] = path_checks(clean)
    assert (check.code, check.path) == ("path-unreadable", IMAGE)
    assert "cannot be read" in check.message and "chmod" in (check.fix or "")


@pytest.mark.skipif(hasattr(os, "geteuid") and os.geteuid() == 0, reason="root reads a chmod 000 file")
def test_a_chmod_000_file_is_unreadable(clean, files) -> None:
    files["image"].chmod(0)
    try:
        assert codes(path_checks(clean)) == [(IMAGE, "path-unreadable")]
    finally:
        files["image"].chmod(0o644)


def test_a_folder_where_a_file_belongs_and_a_file_where_a_folder_belongs(clean, files) -> None:
    config = with_value(clean, IMAGE, str(files["encoder"]))
    config = with_value(config, "data.preprocessed_data_root", str(files["model"]))
    assert codes(path_checks(config)) == [("data.preprocessed_data_root", "path-not-a-folder"),
                                          (IMAGE, "path-not-a-file")]


def test_relative_paths_resolve_where_the_trainer_runs(clean, tmp_path, monkeypatch) -> None:
    config = with_value(clean, IMAGE, "media/first.png")
    assert path_checks(config, cwd=tmp_path) == []
    elsewhere = tmp_path / "trainer"
    elsewhere.mkdir()
    monkeypatch.chdir(tmp_path)  # the file is there from the process's directory, but not from the trainer's
    [check] = path_checks(config, cwd=elsewhere)
    assert check.code == "path-missing"
    assert check.message == f"{IMAGE} = 'media/first.png' does not exist (relative, looked for at " \
                            f"{elsewhere / 'media/first.png'})"


def test_tilde_is_expanded_only_where_the_trainer_expands_it(clean, files, tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    config = with_value(clean, "data.preprocessed_data_root", "~/data/.precomputed")
    config = with_value(config, "model.model_path", "~/models/base.safetensors")
    [check] = path_checks(config, cwd=tmp_path / "data")
    assert check.path == "model.model_path" and "the trainer does not expand ~ here" in check.message


def test_the_folder_preprocessing_will_write_is_excused_but_never_a_placeholder(clean, tmp_path) -> None:
    later = ["data.preprocessed_data_root", "model.load_checkpoint"]
    config = with_value(clean, "data.preprocessed_data_root", str(tmp_path / "not-yet" / ".precomputed"))
    config = with_value(config, "model.load_checkpoint", str(tmp_path / "stage-1" / "weights.safetensors"))
    assert codes(path_checks(config)) == [("model.load_checkpoint", "path-missing"),
                                          ("data.preprocessed_data_root", "path-missing")]
    assert path_checks(config, written_later=later) == []
    placeholder = with_value(config, "data.preprocessed_data_root", "/path/to/preprocessed/data")
    assert codes(path_checks(placeholder, written_later=later)) == [("data.preprocessed_data_root",
                                                                      "path-placeholder")]
    # ... and the user's media are never excused
    media = with_value(config, IMAGE, str(tmp_path / "nope.png"))
    assert codes(path_checks(media, written_later=later)) == [(IMAGE, "path-missing")]


def test_an_empty_load_checkpoint_is_no_checkpoint(clean) -> None:
    assert path_checks(with_value(clean, "model.load_checkpoint", "")) == []


def test_without_existence_checks_only_placeholders_are_refused(clean, tmp_path) -> None:
    config = with_value(clean, "model.model_path", str(tmp_path / "simulated-base.safetensors"))
    assert path_checks(config, existence=False) == []
    config = with_value(config, IMAGE, "/path/to/conditioning_image_1.png")
    assert codes(path_checks(config, existence=False)) == [(IMAGE, "path-placeholder")]


def test_every_finding_is_collected_then_raised_once(clean, tmp_path) -> None:
    config = with_value(clean, "model.model_path", str(tmp_path / "none.safetensors"))
    config = with_value(config, IMAGE, "/path/to/conditioning_image_1.png")
    config = with_value(config, "output_dir", "/path/to/outputs")
    checks = path_checks(config)
    error = unusable_paths_error(checks, where="config.yaml")
    assert isinstance(error, BadConfig) and error.exit_code == EXIT_BAD_INPUT
    assert [key for key, _ in error.errors] == ["model.model_path", IMAGE, "output_dir"]
    line = error.line()
    assert "\n" not in line and line.startswith("The trainer config names 3 unusable paths: model.model_path = ")
    assert f"{IMAGE} = '/path/to/conditioning_image_1.png' is a template placeholder" in line
    assert "(config.yaml). Fix: name an existing file or folder there; replace the template's placeholder" in line


# --- validate_stage on the reference backend: the validate phase's pass and a launch's ---------------------


def write(config: dict[str, Any], folder: Path) -> Path:
    path = folder / "config.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return path


def target(root: Path | None) -> LaunchTarget:
    return LaunchTarget(stage=1, buckets="64x64x17", processes=1, dataset_samples=4, data_root=root)


def test_before_preprocessing_only_the_stages_own_folder_may_be_missing(clean, tmp_path) -> None:
    planned = tmp_path / "run" / "dataset" / ".precomputed"
    config = write(with_value(clean, "data.preprocessed_data_root", str(planned)), tmp_path)
    assert validate_stage(ReferenceBackend(), config, target(planned), strict=False).problems == []
    launch = validate_stage(ReferenceBackend(), config, target(planned), strict=True)
    assert launch.validated is None and launch.problems[0].startswith(
        "error [path-missing] data.preprocessed_data_root = ")
    other = write(with_value(clean, "data.preprocessed_data_root", str(tmp_path / "typo")), tmp_path)
    assert validate_stage(ReferenceBackend(), other, target(planned), strict=False).problems == [
        f"error [path-missing] data.preprocessed_data_root = {str(tmp_path / 'typo')!r} does not exist. "
        "Fix: name an existing folder there."]


def test_a_missing_path_is_one_problem_not_repeated_by_the_schema_or_the_rules(clean, tmp_path) -> None:
    gone = str(tmp_path / "gone.safetensors")
    config = with_value(clean, "model.model_path", gone)
    config = with_value(config, "model.load_checkpoint", gone)
    config = with_value(config, "validation.prompts", ["a fox"])
    config = with_value(config, "validation.images", [gone])
    result = validate_stage(ReferenceBackend(), write(config, tmp_path), target(None), strict=True)
    assert result.validated is None
    assert [p.split(" = ")[0] for p in result.problems] == [
        "error [path-missing] model.model_path", "error [path-missing] model.load_checkpoint",
        "error [path-missing] validation.images[0]"]


def test_a_placeholder_validation_medium_is_refused_by_the_relaxed_pass(clean, tmp_path) -> None:
    config = write(with_value(clean, IMAGE, "/path/to/conditioning_image_1.png"), tmp_path)
    result = validate_stage(ReferenceBackend(), config, target(None), strict=False)
    assert result.validated is None and result.problems == [
        f"error [path-placeholder] {IMAGE} = '/path/to/conditioning_image_1.png' is a template placeholder, not a "
        "real path. Fix: replace the template's placeholder with the real path."]
