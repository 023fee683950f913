"""The mirror accepts all 16 configs ltx-trainer ships, and derives their data dirs as the trainer does.

Reads the shipped configs from the shared folder beside the repository root (test data only) and
skips when that folder is absent, as on a fresh clone.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest

from ltx_pipeline.ltx.trainer_config import (
    data_sources,
    load_trainer_config_file,
    parse_trainer_config,
    validate_trainer_config,
)

REPO = Path(__file__).resolve().parents[3]
SHIPPED = REPO / ".." / "shared" / "ltx2-configs" / "packages" / "ltx-trainer" / "configs"

pytestmark = pytest.mark.skipif(not SHIPPED.is_dir(), reason="shared ltx2-configs are not present")

_AV = {"conditions", "latents", "audio_latents"}
_AUDIO = {"conditions", "audio_latents"}
# Facts §2.2, "Data directories required per config" (verified against the trainer).
EXPECTED_DIRS = {
    "t2v_lora": _AV,
    "t2v_lora_low_vram": _AV,
    "i2v_lora": _AV,
    "a2v_lora": _AV,
    "v2a_lora": _AV,
    "video_extend_lora": _AV,
    "video_suffix_lora": _AV,
    "v2v_ic_lora": {"conditions", "latents", "reference_latents"},
    "video_inpainting_lora": {"conditions", "latents", "video_masks"},
    "video_outpainting_lora": {"conditions", "latents"},
    "t2a_lora": _AUDIO,
    "audio_extend_lora": _AUDIO,
    "audio_suffix_lora": _AUDIO,
    "audio_inpainting_lora": _AUDIO | {"audio_masks"},
    "a2a_ic_lora": _AUDIO | {"reference_audio_latents"},
    "av2av_ic_lora": _AV | {"reference_latents", "reference_audio_latents"},
}
NAMES = sorted(EXPECTED_DIRS)


def _shipped(name: str) -> dict[str, Any]:
    return load_trainer_config_file(SHIPPED / f"{name}.yaml")


def _patched(config: dict[str, Any], root: Path) -> dict[str, Any]:
    """Replace the placeholder model/data paths with real temp ones holding the required subdirs."""
    config = copy.deepcopy(config)
    (root / "model.safetensors").write_bytes(b"")
    config["model"]["model_path"] = str(root / "model.safetensors")
    config["data"]["preprocessed_data_root"] = str(root / "data")
    for name in data_sources(config):
        (root / "data" / name).mkdir(parents=True)
    return config


def test_the_shipped_set_is_the_documented_sixteen() -> None:
    assert sorted(path.stem for path in SHIPPED.glob("*.yaml")) == NAMES


@pytest.mark.parametrize("name", NAMES)
def test_data_sources_match_the_facts_table(name: str) -> None:
    assert set(data_sources(_shipped(name))) == EXPECTED_DIRS[name]


@pytest.mark.parametrize("name", NAMES)
def test_shipped_config_validates_once_paths_are_patched(name: str, tmp_path: Path) -> None:
    config = _patched(_shipped(name), tmp_path)
    assert validate_trainer_config(config, cwd=tmp_path) == []
    built = parse_trainer_config(config, cwd=tmp_path)
    assert built.training_strategy.name == "flexible"
    assert built.output_dir == str((tmp_path / "outputs" / name).resolve())


@pytest.mark.parametrize("name", NAMES)
def test_placeholders_fail_strictly_but_pass_relaxed(name: str, tmp_path: Path) -> None:
    config = _shipped(name)
    assert validate_trainer_config(config, relaxed_paths=True, cwd=tmp_path) == []
    findings = validate_trainer_config(config, cwd=tmp_path)
    assert [(f.path, f.code) for f in findings] == [
        ("model.model_path", "value_error"), ("data.preprocessed_data_root", "value_error"),
    ]


def test_missing_subdir_is_reported_for_a_shipped_config(tmp_path: Path) -> None:
    config = _patched(_shipped("av2av_ic_lora"), tmp_path)
    (tmp_path / "data" / "reference_audio_latents").rmdir()
    findings = validate_trainer_config(config)
    assert [(f.path, f.code) for f in findings] == [("", "value_error")]
    assert "'reference_audio_latents'" in findings[0].message
