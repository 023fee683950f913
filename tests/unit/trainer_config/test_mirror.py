"""The trainer-config mirror accepts what ltx-trainer accepts and reports problems where it does.

Hand-written fixtures live in tests/fixtures/trainer_configs/. Broken configs are built from a
valid base by one mutation each; every case states the dotted location and pydantic error type
the trainer itself reports (facts §1, §5).
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from ltx_pipeline.errors import BadConfig
from ltx_pipeline.ltx.trainer_config import (
    ConfigFinding,
    LtxTrainerConfig,
    data_sources,
    format_findings,
    load_trainer_config_file,
    parse_trainer_config,
    validate_trainer_config,
)

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "trainer_configs"
FIXTURE_NAMES = sorted(path.name for path in FIXTURES.glob("*.yaml"))


def materialize(config: dict[str, Any], root: Path, *, make_dirs: bool = True) -> dict[str, Any]:
    """Point model_path and the data root at real temp paths; create the strategy's data subdirs."""
    config = copy.deepcopy(config)
    model = root / "model.safetensors"
    model.write_bytes(b"")
    data = root / "data"
    data.mkdir(exist_ok=True)
    config.setdefault("model", {})["model_path"] = str(model)
    config.setdefault("data", {})["preprocessed_data_root"] = str(data)
    if make_dirs:
        for name in data_sources(config):
            (data / name).mkdir(parents=True, exist_ok=True)
    return config


def fixture(name: str) -> dict[str, Any]:
    return load_trainer_config_file(FIXTURES / name)


def base() -> dict[str, Any]:
    return fixture("flexible_t2v_minimal.yaml")


# --- the hand-written fixtures ------------------------------------------------------------------


def test_fixture_set_covers_the_five_modes() -> None:
    assert FIXTURE_NAMES == [
        "audio_only_t2a.yaml", "flexible_t2v_minimal.yaml", "ic_lora_v2v.yaml",
        "low_vram_t2v.yaml", "video_inpainting.yaml",
    ]


@pytest.mark.parametrize("name", FIXTURE_NAMES)
def test_fixture_validates_with_real_paths(name: str, tmp_path: Path) -> None:
    config = materialize(fixture(name), tmp_path)
    assert validate_trainer_config(config) == []


@pytest.mark.parametrize("name", FIXTURE_NAMES)
def test_fixture_fails_until_its_paths_exist(name: str) -> None:
    findings = validate_trainer_config(fixture(name), cwd=FIXTURES)
    assert {(f.path, f.code) for f in findings} == {
        ("model.model_path", "value_error"), ("data.preprocessed_data_root", "value_error"),
    }


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("flexible_t2v_minimal.yaml", {"conditions": "conditions", "latents": "video_latents"}),
        ("low_vram_t2v.yaml",
         {"conditions": "conditions", "latents": "video_latents", "audio_latents": "audio_latents"}),
        ("ic_lora_v2v.yaml", {"conditions": "conditions", "latents": "video_latents",
                              "reference_latents": "reference_latents"}),
        ("audio_only_t2a.yaml", {"conditions": "conditions", "audio_latents": "audio_latents"}),
        ("video_inpainting.yaml",
         {"conditions": "conditions", "latents": "video_latents", "video_masks": "video_masks"}),
    ],
)
def test_data_sources_per_fixture(name: str, expected: dict[str, str]) -> None:
    assert data_sources(fixture(name)) == expected


def test_legacy_strategies_data_sources() -> None:
    t2v = {"data": {"preprocessed_data_root": "d"}, "model": {"model_path": "m"}, "lora": {}}
    assert data_sources(t2v) == {"latents": "latents", "conditions": "conditions"}
    t2v["training_strategy"] = {"with_audio": True, "audio_latents_dir": "aud"}
    assert data_sources(t2v) == {"latents": "latents", "conditions": "conditions", "aud": "audio_latents"}
    t2v["training_strategy"] = {"name": "video_to_video"}
    assert data_sources(t2v)["reference_latents"] == "ref_latents"


# --- broken configs: location and error type as the trainer reports them ------------------------


@dataclass(frozen=True)
class Case:
    id: str
    mutate: Callable[[dict[str, Any], Path], None]
    path: str
    code: str
    message: str = ""
    make_dirs: bool = True


def _set(dotted: str, value: Any) -> Callable[[dict[str, Any], Path], None]:
    def mutate(config: dict[str, Any], _root: Path) -> None:
        *parents, leaf = dotted.split(".")
        node = config
        for key in parents:
            node = node.setdefault(key, {})
        node[leaf] = value
    return mutate


def _drop(key: str) -> Callable[[dict[str, Any], Path], None]:
    return lambda config, _root: config.pop(key)


def _video_conditions(*conditions: dict[str, Any]) -> Callable[[dict[str, Any], Path], None]:
    return _set("training_strategy.video.conditions", list(conditions))


def _sample(*conditions: dict[str, Any]) -> Callable[[dict[str, Any], Path], None]:
    return _set("validation.samples", [{"prompt": "p", "conditions": list(conditions)}])


def _vae_dir(config: dict[str, Any], root: Path) -> None:
    (root / "vae").mkdir()
    config["model"]["video_vae_path"] = str(root / "vae")


def _data_root_file(config: dict[str, Any], root: Path) -> None:
    (root / "data_file").write_text("x")
    config["data"]["preprocessed_data_root"] = str(root / "data_file")


def _v2v(training_mode: str, interval: int | None) -> Callable[[dict[str, Any], Path], None]:
    def mutate(config: dict[str, Any], _root: Path) -> None:
        config["training_strategy"] = {"name": "video_to_video"}
        config["model"]["training_mode"] = training_mode
        config["validation"]["interval"] = interval
    return mutate


FLEX_VIDEO = "training_strategy.flexible.video.conditions.0"
CASES = [
    Case("misspelled-key", _set("optimization.learnin_rate", 1e-4), "optimization.learnin_rate",
         "extra_forbidden", "Extra inputs are not permitted"),
    Case("unknown-top-level-key", _set("outputdir", "x"), "outputdir", "extra_forbidden"),
    Case("flexible-block-without-name",
         _set("training_strategy", {"video": {"is_generated": True, "latents_dir": "latents"}}),
         "training_strategy.text_to_video.video", "extra_forbidden", make_dirs=False),
    Case("unknown-strategy-name", _set("training_strategy.name", "flex"), "training_strategy",
         "union_tag_invalid", "does not match any of the expected tags"),
    Case("audio-first-frame",
         _set("training_strategy.audio", {"is_generated": True, "latents_dir": "audio_latents",
                                          "conditions": [{"type": "first_frame"}]}),
         "training_strategy.flexible", "value_error", "is not supported for audio"),
    Case("no-generated-modality", _set("training_strategy.video.is_generated", False),
         "training_strategy.flexible", "value_error", "At least one modality must have is_generated=true"),
    Case("no-modality-at-all", _set("training_strategy", {"name": "flexible"}),
         "training_strategy.flexible", "value_error", "is_generated=true"),
    Case("prefix-boundary-zero", _video_conditions({"type": "prefix", "temporal_boundary": 0}),
         f"{FLEX_VIDEO}.prefix.temporal_boundary", "greater_than_equal"),
    Case("suffix-boundary-missing", _video_conditions({"type": "suffix"}),
         f"{FLEX_VIDEO}.suffix.temporal_boundary", "missing"),
    Case("unknown-condition-type", _video_conditions({"type": "keyframe"}), FLEX_VIDEO, "union_tag_invalid"),
    Case("probability-above-one", _video_conditions({"type": "first_frame", "probability": 1.5}),
         f"{FLEX_VIDEO}.first_frame.probability", "less_than_equal"),
    Case("spatial-region-three-values",
         _video_conditions({"type": "spatial_crop", "spatial_region": [0, 0, 9]}),
         f"{FLEX_VIDEO}.spatial_crop.spatial_region.3", "missing"),
    Case("scheduler-null", _set("optimization.scheduler_type", None), "optimization.scheduler_type",
         "literal_error"),
    Case("learning-rate-text", _set("optimization.learning_rate", "fast"), "optimization.learning_rate",
         "float_parsing"),
    Case("lora-rank-one", _set("lora.rank", 1), "lora.rank", "greater_than_equal"),
    Case("quantization-unknown", _set("acceleration.quantization", "int3-quanto"),
         "acceleration.quantization", "literal_error"),
    Case("keep-last-n-below-minus-one", _set("checkpoints.keep_last_n", -2), "checkpoints.keep_last_n",
         "greater_than_equal"),
    Case("frame-rate-zero", _set("validation.frame_rate", 0), "validation.frame_rate", "greater_than"),
    Case("model-path-url", _set("model.model_path", "https://hf.co/x.safetensors"), "model.model_path",
         "value_error", "Model path cannot be a URL"),
    Case("model-path-missing", lambda c, r: c["model"].update(model_path=str(r / "nope.safetensors")),
         "model.model_path", "value_error", "Model path does not exist"),
    Case("vae-path-is-directory", _vae_dir, "model.video_vae_path", "value_error", "is not a file"),
    Case("data-root-missing", lambda c, r: c["data"].update(preprocessed_data_root=str(r / "gone")),
         "data.preprocessed_data_root", "value_error", "Dataset path does not exist"),
    Case("data-root-is-file", _data_root_file, "data.preprocessed_data_root", "value_error",
         "Dataset path is not a directory"),
    Case("data-subdir-missing", lambda c, r: None, "", "value_error",
         "Required data directory 'conditions' does not exist under preprocessed_data_root", make_dirs=False),
    Case("data-section-missing", _drop("data"), "data", "missing"),
    Case("model-section-missing", _drop("model"), "model.model_path", "missing"),
    Case("lora-missing-in-lora-mode", _drop("lora"), "", "value_error",
         "LoRA configuration must be provided when training_mode is 'lora'"),
    Case("v2v-without-reference-validation", _v2v("lora", 100), "", "value_error",
         "reference_videos or samples with reference conditions"),
    Case("v2v-full-training", _v2v("full", None), "", "value_error", "Training mode must be 'lora'"),
    Case("hub-push-without-id", _set("hub.push_to_hub", True), "hub", "value_error",
         "hub_model_id must be specified"),
    Case("nothing-generated-in-validation",
         lambda c, r: c["validation"].update(generate_video=False, generate_audio=False),
         "validation", "value_error", "At least one of generate_video or generate_audio"),
    Case("guidance-scale-with-video-cfg",
         lambda c, r: c["validation"].update(guidance_scale=4.0, video_cfg_scale=3.0),
         "validation", "value_error", "guidance_scale is deprecated"),
    Case("stg-mode-unknown", _set("validation.stg_mode", "stg_x"), "validation", "value_error",
         "stg_mode must be either"),
    Case("stg-scale-with-new-stg", lambda c, r: c["validation"].update(stg_scale=1.0, audio_stg_scale=0.0),
         "validation", "value_error", "do not combine old and new STG fields"),
    Case("images-count-mismatch", lambda c, r: c["validation"].update(prompts=["a", "b"], images=["x.png"]),
         "validation.images", "value_error", "Number of images (1) must match number of prompts (2)"),
    Case("image-path-missing", lambda c, r: c["validation"].update(prompts=["a"], images=[str(r / "x.png")]),
         "validation.images", "value_error", "does not exist"),
    Case("prefix-validation-both-modalities", _sample({"type": "prefix", "video": "a.mp4", "audio": "a.wav"}),
         "validation.samples.0.conditions.0.prefix", "value_error",
         "Exactly one of 'video' or 'audio' must be set for prefix condition"),
    Case("mask-validation-no-modality", _sample({"type": "mask", "mask": "m.png"}),
         "validation.samples.0.conditions.0.mask", "value_error", "for mask condition"),
    Case("v2a-with-a2v", _sample({"type": "video_to_audio", "video": "v.mp4"},
                                 {"type": "audio_to_video", "audio": "a.wav"}),
         "validation.samples.0", "value_error", "Cannot have both video_to_audio and audio_to_video"),
    Case("v2a-with-first-frame", _sample({"type": "video_to_audio", "video": "v.mp4"},
                                         {"type": "first_frame", "image_or_video": "i.png"}),
         "validation.samples.0", "value_error", "Cannot use video-targeting 'first_frame' condition"),
    Case("a2v-with-audio-prefix", _sample({"type": "audio_to_video", "audio": "a.wav"},
                                          {"type": "prefix", "audio": "b.wav"}),
         "validation.samples.0", "value_error", "Cannot use audio-targeting 'prefix' condition"),
    Case("sample-without-prompt", _set("validation.samples", [{"seed": 3}]), "validation.samples.0.prompt",
         "missing"),
    Case("validation-condition-unknown-key",
         _sample({"type": "first_frame", "image_or_video": "i.png", "image": "i.png"}),
         "validation.samples.0.conditions.0.first_frame.image", "extra_forbidden"),
]


def _make_new_data_dirs(config: dict[str, Any], data: Path) -> None:
    """Create the dirs a mutated strategy needs, so each case isolates one problem."""
    try:
        names = data_sources(config)
    except BadConfig:
        return  # the mutation broke the strategy itself; the base dirs are already there
    for name in names:
        (data / name).mkdir(parents=True, exist_ok=True)


@pytest.mark.parametrize("case", CASES, ids=[case.id for case in CASES])
def test_broken_config_is_reported_where_the_trainer_reports_it(case: Case, tmp_path: Path) -> None:
    config = materialize(base(), tmp_path, make_dirs=case.make_dirs)
    case.mutate(config, tmp_path)
    if case.make_dirs:
        _make_new_data_dirs(config, tmp_path / "data")
    findings = validate_trainer_config(config)
    assert [(f.path, f.code) for f in findings] == [(case.path, case.code)]
    assert case.message in findings[0].message
    assert findings[0].severity == "error"


def test_every_problem_is_collected(tmp_path: Path) -> None:
    config = materialize(base(), tmp_path)
    config["optimization"]["learnin_rate"] = 1
    config["lora"]["rank"] = 1
    config["hub"] = {"push_to_hub": True}
    paths = [finding.path for finding in validate_trainer_config(config)]
    assert paths == ["lora.rank", "optimization.learnin_rate", "hub"]


def test_yaml_off_is_a_boolean_and_fails_the_literal(tmp_path: Path) -> None:
    source = tmp_path / "c.yaml"
    source.write_text("checkpoints:\n  save_training_state: off\n")
    config = materialize({**base(), **load_trainer_config_file(source)}, tmp_path)
    assert [(f.path, f.code) for f in validate_trainer_config(config)] == [
        ("checkpoints.save_training_state", "literal_error")]


# --- coercion, defaults and path resolution -------------------------------------------------------


def test_lax_coercions_like_the_trainer(tmp_path: Path) -> None:
    config = materialize(base(), tmp_path)
    assert config["optimization"]["learning_rate"] == "1e-4"  # PyYAML 1.1 leaves it a string
    config["optimization"]["steps"] = "100"
    built = parse_trainer_config(config)
    assert built.optimization.learning_rate == pytest.approx(0.0001)
    assert built.optimization.steps == 100
    assert built.validation.video_dims == (512, 320, 33)
    assert isinstance(built.validation.video_dims, tuple)


def test_defaults_are_not_validated(tmp_path: Path) -> None:
    config = materialize(base(), tmp_path)
    del config["output_dir"]
    built = parse_trainer_config(config)
    assert built.output_dir == "outputs"
    assert built.training_strategy.name == "flexible"
    assert built.validation.negative_prompt.startswith("blurry, out of focus, overexposed")


def test_omitted_strategy_is_legacy_text_to_video(tmp_path: Path) -> None:
    config = materialize(base(), tmp_path, make_dirs=False)
    del config["training_strategy"]
    findings = validate_trainer_config(config)
    assert findings[0].path == "" and "'latents'" in findings[0].message
    assert parse_trainer_config(config, relaxed_paths=True).training_strategy.name == "text_to_video"


def test_relative_paths_resolve_against_cwd(tmp_path: Path) -> None:
    materialize(base(), tmp_path)
    config = base()
    config["model"]["model_path"] = "model.safetensors"
    config["data"]["preprocessed_data_root"] = "data"
    assert validate_trainer_config(config, cwd=tmp_path) == []
    built = parse_trainer_config(config, cwd=tmp_path)
    assert built.data.preprocessed_data_root == str((tmp_path / "data").resolve())
    assert built.output_dir == str((tmp_path / "outputs" / "minimal").resolve())
    assert built.model.model_path == "model.safetensors"  # only checked, never rewritten


def test_relaxed_mode_accepts_placeholders_and_writes_nothing(tmp_path: Path) -> None:
    config = base()
    config["model"]["video_vae_path"] = "placeholder/vae.safetensors"
    config["validation"].update(prompts=["a"], images=["placeholder/a.png"])
    config["validation"]["samples"] = []
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    assert validate_trainer_config(config, relaxed_paths=True, cwd=cwd) == []
    assert list(cwd.iterdir()) == []
    built = parse_trainer_config(config, relaxed_paths=True, cwd=cwd)
    assert built.validation.samples[0].conditions[0].type == "first_frame"
    config["model"]["model_path"] = "http://example.com/m.safetensors"
    assert [f.code for f in validate_trainer_config(config, relaxed_paths=True)] == ["value_error"]


def test_deprecated_guidance_keys_are_migrated(tmp_path: Path) -> None:
    config = materialize(base(), tmp_path)
    config["validation"].update(guidance_scale=5.0, stg_scale=0.5, stg_mode="stg_v")
    built = parse_trainer_config(config).validation
    assert (built.video_cfg_scale, built.audio_cfg_scale) == (5.0, 5.0)
    assert (built.video_stg_scale, built.audio_stg_scale) == (0.5, 0.0)


def test_legacy_prompts_become_samples(tmp_path: Path) -> None:
    config = materialize(base(), tmp_path)
    (tmp_path / "ref.mp4").write_bytes(b"")
    config["validation"] = {"prompts": ["a", "b"], "reference_videos": [str(tmp_path / "ref.mp4")] * 2,
                            "reference_downscale_factor": 2, "include_reference_in_output": True}
    samples = parse_trainer_config(config).validation.samples
    assert [s.prompt for s in samples] == ["a", "b"]
    reference = samples[1].conditions[0]
    assert (reference.type, reference.downscale_factor, reference.include_in_output) == ("reference", 2, True)


def test_model_instance_round_trips(tmp_path: Path) -> None:
    built = parse_trainer_config(materialize(fixture("low_vram_t2v.yaml"), tmp_path))
    assert isinstance(built, LtxTrainerConfig)
    assert built.checkpoints.save_training_state == "off"
    assert data_sources(built) == {"conditions": "conditions", "latents": "video_latents",
                                   "audio_latents": "audio_latents"}


# --- loading and formatting -----------------------------------------------------------------------


def test_load_missing_file(tmp_path: Path) -> None:
    with pytest.raises(BadConfig, match="does not exist") as info:
        load_trainer_config_file(tmp_path / "none.yaml")
    assert str(tmp_path / "none.yaml") in str(info.value)


def test_load_yaml_syntax_error_names_the_line(tmp_path: Path) -> None:
    source = tmp_path / "bad.yaml"
    source.write_text("model:\n  model_path: x\n  lora: [1, 2\ndata: {}\n")
    with pytest.raises(BadConfig, match="not valid YAML") as info:
        load_trainer_config_file(source)
    assert "line 4" in str(info.value) and "\n" not in str(info.value)


@pytest.mark.parametrize(("text", "found"), [
    ("- a\n- b\n", "a list"), ("", "empty"), ("42\n", "a number"), ("just text\n", "a string"),
])
def test_load_non_mapping_top_level(tmp_path: Path, text: str, found: str) -> None:
    source = tmp_path / "c.yaml"
    source.write_text(text)
    with pytest.raises(BadConfig, match=found):
        load_trainer_config_file(source)


def test_load_uses_safe_load(tmp_path: Path) -> None:
    source = tmp_path / "c.yaml"
    source.write_text("x: !!python/tuple [1, 2]\n")
    with pytest.raises(BadConfig, match="not valid YAML"):
        load_trainer_config_file(source)
    assert yaml.safe_load("a: 1e-4") == {"a": "1e-4"}


def test_format_findings_one_line_each() -> None:
    findings = [ConfigFinding("optimization.learnin_rate", "Extra inputs are not permitted",
                              "extra_forbidden"),
                ConfigFinding("", "Value error, LoRA configuration must be provided", "value_error")]
    assert format_findings(findings) == [
        "optimization.learnin_rate: Extra inputs are not permitted",
        "(top level): Value error, LoRA configuration must be provided",
    ]


def test_parse_raises_bad_config_with_every_error(tmp_path: Path) -> None:
    config = materialize(base(), tmp_path)
    config["optimization"]["learnin_rate"] = 1
    config["seed"] = "x"
    with pytest.raises(BadConfig) as info:
        parse_trainer_config(config)
    assert [path for path, _ in info.value.errors] == ["optimization.learnin_rate", "seed"]
    assert "2 errors" in str(info.value)


def test_data_sources_of_a_broken_strategy_names_its_location() -> None:
    config = {"training_strategy": {"name": "flexible", "video": {"is_generated": True}}}
    with pytest.raises(BadConfig) as info:
        data_sources(config)
    assert info.value.errors == [("training_strategy.flexible.video.latents_dir", "Field required")]
    # Only the strategy matters: the other sections may still be incomplete.
    assert data_sources({"training_strategy": {"name": "flexible", "audio": {
        "is_generated": True, "latents_dir": "/abs/audio"}}}) == {"conditions": "conditions",
                                                                   "/abs/audio": "audio_latents"}
