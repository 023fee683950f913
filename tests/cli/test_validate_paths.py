"""Issue 42: `ltx-pipeline validate CONFIG` refuses a config naming a placeholder, missing or unreadable path.

Exit 2 with one line on stderr: what (every key with its value), where (the config file), and the fix.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from ltx_pipeline.cli import main

TEMPLATE = Path(__file__).resolve().parents[2] / "ltx_pipeline" / "backends" / "reference_configs" / "t2v_lora.yaml"
IMAGE = "validation.samples[0].conditions[0].image_or_video"


@pytest.fixture
def config(tmp_path: Path) -> Path:
    """The reference template made launchable, with a first-frame condition on a real image."""
    data = yaml.safe_load(TEMPLATE.read_text())
    model = tmp_path / "model.safetensors"
    model.write_bytes(b"0")
    root = tmp_path / "pre"
    for sub in ("latents", "audio_latents", "conditions"):
        (root / sub).mkdir(parents=True)
    (tmp_path / "media").mkdir()
    (tmp_path / "media" / "first.png").write_bytes(b"0")
    data["model"].update(model_path=str(model), text_encoder_path=str(model))
    data["data"]["preprocessed_data_root"] = str(root)
    data["output_dir"] = str(tmp_path / "out")
    data["validation"]["samples"][0]["conditions"] = [{"type": "first_frame",
                                                       "image_or_video": str(tmp_path / "media" / "first.png")}]
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def set_image(path: Path, value: str) -> None:
    data = yaml.safe_load(path.read_text())
    data["validation"]["samples"][0]["conditions"][0]["image_or_video"] = value
    path.write_text(yaml.safe_dump(data, sort_keys=False))


def test_the_config_with_a_real_image_is_valid(config, capsys) -> None:
    assert main(["validate", str(config)]) == 0
    assert "valid" in capsys.readouterr().out


def test_a_missing_validation_image_exits_2_with_one_line_naming_key_value_and_fix(config, tmp_path,
                                                                                   capsys) -> None:
    missing = str(tmp_path / "media" / "nope.png")
    set_image(config, missing)
    assert main(["validate", str(config)]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.splitlines() == [
        f"error: The trainer config names 1 unusable path: {IMAGE} = {missing!r} does not exist ({config}). "
        "Fix: name an existing file there."]


def test_a_placeholder_exits_2_naming_every_key_at_once(config, capsys) -> None:
    set_image(config, "/path/to/conditioning_image_1.png")
    data = yaml.safe_load(config.read_text())
    data["model"]["text_encoder_path"] = "/nowhere/gemma"
    config.write_text(yaml.safe_dump(data, sort_keys=False))
    assert main(["validate", str(config)]) == 2
    [line] = capsys.readouterr().err.splitlines()
    assert line.startswith("error: The trainer config names 2 unusable paths: model.text_encoder_path = "
                           "'/nowhere/gemma' does not exist; ")
    assert f"{IMAGE} = '/path/to/conditioning_image_1.png' is a template placeholder, not a real path" in line
    assert line.endswith(f"({config}). Fix: name an existing file or folder there; replace the template's "
                         "placeholder with the real path.")


def test_the_refusal_is_one_json_object_under_json(config, capsys) -> None:
    set_image(config, "/path/to/conditioning_image_1.png")
    assert main(["validate", str(config), "--json"]) == 2
    record = json.loads(capsys.readouterr().err)
    assert record["error"] == "BadConfig" and record["exit_code"] == 2 and IMAGE in record["message"]


def test_a_relative_medium_resolves_where_the_trainer_runs(config, tmp_path, capsys) -> None:
    # Without a checkout the trainer is the mirror, which runs (and resolves) in the config's folder.
    set_image(config, "media/first.png")
    assert main(["validate", str(config)]) == 0
    set_image(config, "first.png")
    assert main(["validate", str(config)]) == 2
    assert f"(relative, looked for at {tmp_path / 'first.png'})" in capsys.readouterr().err


def test_a_relative_medium_resolves_in_the_trainer_package_with_a_checkout(config, ltx_prereqs, capsys) -> None:
    trainer = Path(ltx_prereqs["trainer_root"]).resolve() / "packages" / "ltx-trainer"
    set_image(config, "media/first.png")  # beside the config, but the real trainer runs in its package
    assert main(["validate", str(config), "--trainer-root", ltx_prereqs["trainer_root"]]) == 2
    assert f"(relative, looked for at {trainer / 'media/first.png'})" in capsys.readouterr().err
    (trainer / "media").mkdir()
    (trainer / "media" / "first.png").write_bytes(b"0")
    assert main(["validate", str(config), "--trainer-root", ltx_prereqs["trainer_root"]]) == 0
