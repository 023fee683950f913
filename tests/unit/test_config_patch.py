"""Config patching: comment-preserving edits, the records they leave, and the per-stage patch rules.

The hand-written templates under tests/fixtures/config_patch always run; the trainer's shipped
templates (the shared folder beside the repo) run when present and are skipped otherwise.
"""

from __future__ import annotations

import difflib
import io
import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from ruamel.yaml import YAML

from ltx_pipeline.errors import BadConfig, BadInput
from ltx_pipeline.ltx.buckets import CHAINED_DEFAULT, parse_buckets
from ltx_pipeline.ltx.config_patch import (
    AUDIO_SENTENCE,
    MISSING,
    Patch,
    PatchRecord,
    PromptRewrite,
    StagePaths,
    apply_patches,
    check_patched,
    float_text,
    patches_for_stage,
    render_diff,
)
from ltx_pipeline.ltx.launch_plan import launch_shape
from ltx_pipeline.ltx.modes import LOW_VRAM_T2V_CONFIG, MODES, get_mode
from ltx_pipeline.ltx.recipe import build_recipe
from ltx_pipeline.ltx.tiers import TIER_32, TIER_40_60, TIER_80, Tier
from ltx_pipeline.ltx.trainer_config import data_sources, validate_trainer_config

REPO = Path(__file__).resolve().parents[2]
FIXTURES = REPO / "tests" / "fixtures" / "config_patch"
SHIPPED = REPO / ".." / "shared" / "ltx2-configs" / "packages" / "ltx-trainer" / "configs"
FIXTURE_MODES = {"av_flexible.yaml": "t2v", "audio_only.yaml": "t2a", "ic_video.yaml": "v2v"}
PLACEHOLDER_PATHS = StagePaths("/models/ltx.safetensors", "/models/gemma", "/run/dataset/.precomputed", "/run/outputs")


def _template(name: str) -> str:
    return (FIXTURES / name).read_text(encoding="utf-8")


def _recipe(mode: str, tier: Tier = TIER_80, *, strategy: str = "single", buckets: str = "960x544x49",
            training_mode: str = "lora", gpus: int = 1) -> dict[str, Any]:
    stages = [(b,) for b, _ in CHAINED_DEFAULT] if strategy == "chain" else [parse_buckets(buckets)]
    launch = launch_shape(backend="ltx", gpu_count=gpus, requested=None, training_mode=training_mode)
    return build_recipe(mode=get_mode(mode), tier=tier, gpu_count=gpus, launch=launch, training_mode=training_mode,
                        strategy=strategy, stages=stages, buckets_given=strategy != "chain", rank=None, steps=None,
                        learning_rate=None, effective_batch=1).to_dict()


def _changed(before: str, after: str) -> tuple[list[str], list[str]]:
    """(removed lines, added lines) of the unified diff."""
    diff = list(difflib.unified_diff(before.splitlines(), after.splitlines(), lineterm="", n=0))
    removed = [line[1:] for line in diff if line.startswith("-") and not line.startswith("---")]
    added = [line[1:] for line in diff if line.startswith("+") and not line.startswith("+++")]
    return removed, added


def _comments(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.lstrip().startswith("#")]


def _real_paths(tmp_path: Path, patched_view: dict[str, Any]) -> StagePaths:
    """A real model file, Gemma dir and a data root holding every dir the strategy requires."""
    model = tmp_path / "ltx.safetensors"
    model.write_bytes(b"")
    (tmp_path / "gemma").mkdir()
    root = tmp_path / "data" / ".precomputed"
    for name in data_sources(patched_view):
        (root / name).mkdir(parents=True, exist_ok=True)
    return StagePaths(str(model), str(tmp_path / "gemma"), str(root), str(tmp_path / "outputs"))


# --- apply_patches: what changes and what does not ---------------------------------------------------


def test_patching_a_value_changes_only_its_line_and_keeps_comments() -> None:
    template = _template("av_flexible.yaml")
    patched, records = apply_patches(template, [
        Patch("lora.rank", 16, "tier"),
        Patch("optimization.steps", 500, "plan"),
        Patch("validation.video_dims", [768, 448, 49], "dims"),
    ])
    removed, added = _changed(template, patched)
    assert removed == ["  rank: 32  # capacity knob", "  steps: 2000", "  video_dims: [ 960, 544, 89 ]"]
    assert added == ["  rank: 16  # capacity knob", "  steps: 500", "  video_dims: [768, 448, 49]"]
    # Untouched flow-style and spacing survive byte for byte (ruamel alone would rewrite these).
    assert "  scheduler_params: { }\n" in patched and '  tags: [ "fixture", "av" ]\n' in patched
    assert _comments(patched) == _comments(template)
    assert patched.splitlines()[:8] == template.splitlines()[:8]  # the header block
    assert [r.path for r in records] == ["lora.rank", "optimization.steps", "validation.video_dims"]
    assert records[0] == PatchRecord("lora.rank", 32, 16, "tier", added=False)
    assert records[2].old == [960, 544, 89] and records[2].new == [768, 448, 49]


def test_key_order_is_kept() -> None:
    template = _template("ic_video.yaml")
    patched, _ = apply_patches(template, [Patch("optimization.steps", 10, "x"), Patch("lora.alpha", 8, "x")])
    assert list(yaml.safe_load(patched)) == list(yaml.safe_load(template))
    assert list(yaml.safe_load(patched)["optimization"]) == list(yaml.safe_load(template)["optimization"])


def test_equal_values_give_no_record_and_no_text_change() -> None:
    template = _template("audio_only.yaml")
    patches = [
        Patch("lora.rank", 32, "same"),
        Patch("optimization.learning_rate", 2e-4, "same float as 0.0002"),
        Patch("model.load_checkpoint", None, "same null"),
        Patch("lora.target_modules", ["audio_attn1.to_k", "audio_attn1.to_q", "audio_attn1.to_v",
                                      "audio_attn1.to_out.0"], "same list"),
    ]
    patched, records = apply_patches(template, patches)
    assert records == [] and patched is template
    assert apply_patches(template, []) == (template, [])


def test_equality_is_judged_as_the_trainer_reads_the_file() -> None:
    # PyYAML reads `learning_rate: 1e-4` as the string "1e-4"; the float 1e-4 is a real change.
    template = _template("av_flexible.yaml")
    patched, records = apply_patches(template, [Patch("optimization.learning_rate", 1e-4, "lr")])
    assert records == [PatchRecord("optimization.learning_rate", "1e-4", 1e-4, "lr")]
    assert yaml.safe_load(patched)["optimization"]["learning_rate"] == pytest.approx(1e-4)
    # True is not 1 and 1.0 is not 1: a type change is a change.
    _, records = apply_patches(template, [Patch("optimization.batch_size", True, "t"),
                                          Patch("optimization.steps", 2000.0, "f")])
    assert [r.path for r in records] == ["optimization.batch_size", "optimization.steps"]


@pytest.mark.parametrize("value", [1e-4, 1e-5, 5e-5, 2e-5, 3e-6, 1.5e-7, 0.0002, 2.5e-4, 1e20, 3.0, -1e-9])
def test_floats_are_written_so_pyyaml_reads_floats(value: float) -> None:
    patched, _ = apply_patches(_template("ic_video.yaml"), [Patch("optimization.learning_rate", value, "lr")])
    read = yaml.safe_load(patched)["optimization"]["learning_rate"]
    assert isinstance(read, float) and read == value
    assert isinstance(yaml.safe_load(f"x: {float_text(value)}")["x"], float)


def test_float_text_never_writes_an_exponent_without_a_dot() -> None:
    assert float_text(1e-5) == "1.0e-05"
    assert float_text(1e-4) == "0.0001"
    assert float_text(1e20) == "1.0e+20"
    assert yaml.safe_load("x: " + float_text(float("inf")))["x"] == float("inf")


def test_none_is_written_as_null() -> None:
    template = _template("av_flexible.yaml")
    patched, records = apply_patches(template, [Patch("model.text_encoder_path", None, "unset")])
    removed, added = _changed(template, patched)
    assert added == ["  text_encoder_path: null"]
    assert yaml.safe_load(patched)["model"]["text_encoder_path"] is None
    assert records[0].old == "placeholder/gemma" and records[0].new is None


def test_strings_pyyaml_would_misread_are_quoted() -> None:
    patches = [Patch("wandb.entity", value, "s") for value in ("yes",)] + [
        Patch("data.preprocessed_data_root", "1e-4", "s"), Patch("seed_note", "null", "s")]
    patched, _ = apply_patches(_template("av_flexible.yaml"), patches)
    view = yaml.safe_load(patched)
    assert view["wandb"]["entity"] == "yes" and view["data"]["preprocessed_data_root"] == "1e-4"
    assert view["seed_note"] == "null"


def test_quoting_style_of_the_template_is_kept() -> None:
    patched, _ = apply_patches(_template("ic_video.yaml"), [Patch("model.model_path", "/m/x.safetensors", "p"),
                                                              Patch("wandb.tags", ["a", "b"], "t")])
    assert "  model_path: '/m/x.safetensors'\n" in patched  # single-quoted in the template
    assert '  tags: ["a", "b"]\n' in patched  # flow list, items quoted like the template's


def test_adding_nested_keys_that_do_not_exist() -> None:
    template = _template("av_flexible.yaml")
    patched, records = apply_patches(template, [
        Patch("checkpoints.no_resume", True, "chain"),
        Patch("hub.push_to_hub", False, "new section"),
        Patch("training_strategy.video.conditions", [{"type": "first_frame", "probability": 0.5}], "i2v"),
    ])
    view = yaml.safe_load(patched)
    assert view["checkpoints"]["no_resume"] is True and view["hub"] == {"push_to_hub": False}
    assert view["training_strategy"]["video"]["conditions"] == [{"type": "first_frame", "probability": 0.5}]
    assert [r.added for r in records] == [True, True, True] and all(r.old is None for r in records)
    removed, added = _changed(template, patched)
    assert removed == []  # additions only
    lines = patched.splitlines()
    # The new key sits right after the section's last key, before the next section's banner.
    at = lines.index('  precision: "bfloat16"')
    assert lines[at + 1] == "  no_resume: true" and lines[at + 2] == ""
    assert lines[at + 4] == "# Weights & Biases"
    assert _comments(patched) == _comments(template)


def test_adding_a_whole_section_and_lists_in_a_compact_layout() -> None:
    template = _template("audio_only.yaml")  # mappings indented by 4, dashes at the key's column
    patched, records = apply_patches(template, [
        Patch("wandb.tags", ["t2a", "audio"], "new list: block style"),
        Patch("validation.video_dims", [512, 288, 33], "new dims: flow style"),
        Patch("lora.target_modules", ["audio_attn1.to_k", "audio_attn2.to_k"], "shorter list"),
    ])
    removed, added = _changed(template, patched)
    assert "    video_dims: [512, 288, 33]" in added
    assert added[-4:] == ["wandb:", "    tags:", "    - t2a", "    - audio"]
    assert removed == ['    - "audio_attn1.to_q"', '    - "audio_attn1.to_v"', '    - "audio_attn1.to_out.0"']
    assert '    - "audio_attn2.to_k"' in added  # the new item quoted like its neighbours
    assert yaml.safe_load(patched)["lora"]["target_modules"] == ["audio_attn1.to_k", "audio_attn2.to_k"]
    assert records[0].added and not records[2].added


def test_validation_prompts_are_patched_by_index() -> None:
    template = _template("av_flexible.yaml")
    new_prompt = "zxq A red kite dances above a green hill."
    patched, records = apply_patches(template, [Patch("validation.samples.1.prompt", new_prompt, "trigger")])
    view = yaml.safe_load(patched)
    assert view["validation"]["samples"][1]["prompt"] == new_prompt
    assert view["validation"]["samples"][0] == yaml.safe_load(template)["validation"]["samples"][0]
    assert records[0].path == "validation.samples.1.prompt"
    assert "    - prompt: >-" in patched.splitlines()  # still a folded scalar


@pytest.mark.parametrize("path", ["validation.samples.5.prompt", "validation.samples.x.prompt",
                                  "lora.rank.value", "optimization..steps", "missing.0.key"])
def test_bad_paths_are_refused(path: str) -> None:
    with pytest.raises(BadConfig) as info:
        apply_patches(_template("av_flexible.yaml"), [Patch(path, 1, "bad")])
    assert path in info.value.line()


def test_bad_text_and_values_are_refused() -> None:
    with pytest.raises(BadConfig):
        apply_patches("model: [unclosed\n", [Patch("seed", 1, "x")])
    with pytest.raises(BadConfig):
        apply_patches("- a list\n", [Patch("seed", 1, "x")])
    with pytest.raises(BadConfig):
        apply_patches(_template("av_flexible.yaml"), [Patch("seed", object(), "x")])


def test_render_diff() -> None:
    template = _template("ic_video.yaml")
    patched, _ = apply_patches(template, [Patch("optimization.steps", 7, "x")])
    diff = render_diff(template, patched, "template.yaml", "config.yaml")
    assert diff.startswith("--- template.yaml\n+++ config.yaml\n")
    assert "-  steps: 3000\n" in diff and "+  steps: 7\n" in diff
    assert render_diff(template, template, "a", "b") == ""


def test_check_patched_runs_the_mirror() -> None:
    template = _template("ic_video.yaml")
    assert check_patched(template, relaxed_paths=True) == []
    broken, _ = apply_patches(template, [Patch("optimization.learnin_rate", 1e-4, "typo")])
    findings = check_patched(broken, relaxed_paths=True)
    assert [(f.path, f.code) for f in findings] == [("optimization.learnin_rate", "extra_forbidden")]
    assert check_patched(template, relaxed_paths=False)  # placeholder paths do not exist
    assert check_patched("a: [", relaxed_paths=True)[0].code == "yaml_syntax"


# --- prompt rewriting -------------------------------------------------------------------------------


def test_prompt_rewrite_adds_trigger_and_sound_once() -> None:
    rewrite = PromptRewrite("zxq", describe_audio=True)
    assert rewrite.rewrite("A kite over a hill") == f"zxq A kite over a hill. {AUDIO_SENTENCE}"
    assert rewrite.rewrite("A kite. The audio is wind.") == "zxq A kite. The audio is wind."
    assert rewrite.rewrite(rewrite.rewrite("A kite.")) == rewrite.rewrite("A kite.")
    assert PromptRewrite("ZXQ", False).rewrite("a zxq style kite") == "a zxq style kite"
    assert PromptRewrite(None, False).rewrite("A kite.") == "A kite."


def test_prompt_rewrite_keeps_folded_lines() -> None:
    template = _template("av_flexible.yaml")
    patched, records = apply_patches(template, [Patch("validation.samples", PromptRewrite("zxq", True), "prompts")])
    removed, added = _changed(template, patched)
    # First lines gain the trigger; the silent prompt gains one sound line; no other line moves.
    assert removed == [
        "        A lighthouse keeper climbs a spiral staircase at dusk, lantern in hand, while waves",
        "        A red kite dances above a green hill on a windy afternoon, its long tail twisting in",
    ]
    assert added == ["        zxq " + removed[0].strip(), "        zxq " + removed[1].strip(),
                     f"        {AUDIO_SENTENCE}"]
    assert [r.path for r in records] == ["validation.samples.0.prompt", "validation.samples.1.prompt"]
    prompts = [s["prompt"] for s in yaml.safe_load(patched)["validation"]["samples"]]
    assert prompts[1].endswith("across the grass. " + AUDIO_SENTENCE)
    assert apply_patches(patched, [Patch("validation.samples", PromptRewrite("zxq", True), "again")])[1] == []


# --- patches_for_stage ------------------------------------------------------------------------------


def _by_path(patches: list[Patch]) -> dict[str, Patch]:
    return {p.path: p for p in patches}


@pytest.mark.parametrize("tier", [TIER_32, TIER_40_60, TIER_80], ids=lambda t: t.key)
def test_stage_patches_carry_the_tier_knobs(tier: Tier) -> None:
    recipe = _recipe("t2v", tier)
    patches = _by_path(patches_for_stage(recipe, 1, mode="t2v", paths=PLACEHOLDER_PATHS, trigger="zxq",
                                         wandb=False, previous_stage_weights=None))
    low = tier.base == "low_vram"
    assert patches["optimization.optimizer_type"].value == ("adamw8bit" if low else "adamw")
    assert patches["acceleration.quantization"].value == ("int8-quanto" if low else None)
    assert patches["acceleration.load_text_encoder_in_8bit"].value is low
    assert patches["lora.rank"].value == patches["lora.alpha"].value == (16 if low else 32)
    assert patches["model.model_path"].value == "/models/ltx.safetensors"
    assert patches["output_dir"].value == "/run/outputs"
    assert patches["validation.video_dims"].value == [960, 544, 49]
    assert patches["model.load_checkpoint"].value is None and "checkpoints.no_resume" not in patches
    assert all(p.reason for p in patches.values())
    patched, records = apply_patches(_template("av_flexible.yaml"), list(patches.values()))
    view = yaml.safe_load(patched)
    assert view["acceleration"]["quantization"] == ("int8-quanto" if low else None)
    assert view["optimization"]["learning_rate"] == pytest.approx(1e-4)
    # Only values that differ from the template are recorded.
    recorded = {r.path for r in records}
    assert ("acceleration.quantization" in recorded) is low and "optimization.batch_size" not in recorded


def test_chained_stages_warm_start_with_their_own_learning_rate() -> None:
    recipe = _recipe("t2v", TIER_80, strategy="chain")
    weights = "/run/stage1/outputs/checkpoints/lora_weights_step_02000.safetensors"
    configs = {}
    for index, previous in ((1, None), (2, weights), (3, weights.replace("stage1", "stage2"))):
        patches = patches_for_stage(recipe, index, mode="t2v", paths=PLACEHOLDER_PATHS, trigger=None, wandb=False,
                                    previous_stage_weights=previous)
        configs[index] = yaml.safe_load(apply_patches(_template("av_flexible.yaml"), patches)[0])
    assert configs[1]["model"]["load_checkpoint"] is None and "no_resume" not in configs[1]["checkpoints"]
    assert configs[2]["model"]["load_checkpoint"] == weights and configs[2]["checkpoints"]["no_resume"] is True
    assert configs[3]["checkpoints"]["no_resume"] is True
    assert [configs[i]["optimization"]["learning_rate"] for i in (1, 2, 3)] == [1e-4, 5e-5, 2e-5]
    assert {(c["lora"]["rank"], c["lora"]["alpha"]) for c in configs.values()} == {(32, 32)}


def test_chained_stage_inputs_are_checked() -> None:
    recipe = _recipe("t2v", TIER_80, strategy="chain")
    kwargs = {"mode": "t2v", "paths": PLACEHOLDER_PATHS, "trigger": None, "wandb": False}
    with pytest.raises(BadInput, match="warm-starts"):
        patches_for_stage(recipe, 2, previous_stage_weights=None, **kwargs)
    with pytest.raises(BadInput, match="warm-starts"):
        patches_for_stage(recipe, 2, previous_stage_weights="outputs/lora_weights_step_1.safetensors", **kwargs)
    with pytest.raises(BadInput, match="does not warm-start"):
        patches_for_stage(recipe, 1, previous_stage_weights="/x/lora_weights_step_1.safetensors", **kwargs)
    with pytest.raises(BadInput, match="no stage 4"):
        patches_for_stage(recipe, 4, previous_stage_weights=None, **kwargs)
    with pytest.raises(BadInput, match="absolute"):
        StagePaths("models/ltx.safetensors", "/g", "/d", "/o")


def test_keep_last_n_one_never_deletes_the_final_weights() -> None:
    kwargs = {"mode": "t2v", "paths": PLACEHOLDER_PATHS, "trigger": None, "wandb": False,
              "previous_stage_weights": None}
    recipe = dict(_recipe("t2v"), keep_last_n=1, steps=2000, checkpoint_interval=250)
    assert _by_path(patches_for_stage(recipe, 1, **kwargs))["checkpoints.keep_last_n"].value == 2
    recipe = dict(recipe, steps=2100)  # the final save is a new step: keep_last_n 1 is safe
    assert _by_path(patches_for_stage(recipe, 1, **kwargs))["checkpoints.keep_last_n"].value == 1
    assert _by_path(patches_for_stage(_recipe("t2v"), 1, **kwargs))["checkpoints.keep_last_n"].value == -1


def test_wandb_on_and_off() -> None:
    base = {"paths": PLACEHOLDER_PATHS, "trigger": None, "previous_stage_weights": None}
    on = yaml.safe_load(apply_patches(_template("ic_video.yaml"), patches_for_stage(
        _recipe("v2v"), 1, mode="v2v", wandb=True, **base))[0])["wandb"]
    assert on == {"enabled": True, "tags": ["v2v"], "project": "ltx2-v2v"}
    off = yaml.safe_load(apply_patches(_template("av_flexible.yaml"), patches_for_stage(
        _recipe("t2v"), 1, mode="t2v", wandb=False, **base))[0])["wandb"]
    assert off["enabled"] is False and off["project"] == "fixture-project" and off["tags"] == ["fixture", "av"]


def test_prompts_get_the_trigger_and_sound_only_for_audio_modes() -> None:
    base = {"paths": PLACEHOLDER_PATHS, "trigger": "zxq", "wandb": False, "previous_stage_weights": None}
    av = yaml.safe_load(apply_patches(_template("av_flexible.yaml"), patches_for_stage(
        _recipe("t2v"), 1, mode="t2v", **base))[0])
    av_prompts = [s["prompt"] for s in av["validation"]["samples"]]
    assert all(p.startswith("zxq ") for p in av_prompts)
    assert all(re.search(r"\baudio\b", p, re.I) for p in av_prompts)
    video_only = yaml.safe_load(apply_patches(_template("ic_video.yaml"), patches_for_stage(
        _recipe("v2v"), 1, mode="v2v", **base))[0])
    assert video_only["validation"]["samples"][0]["prompt"] == (
        "zxq A pencil sketch of a harbour turns into a watercolour painting.")
    untouched = dict(base, trigger=None)
    kept = yaml.safe_load(apply_patches(_template("ic_video.yaml"), patches_for_stage(
        _recipe("v2v"), 1, mode="v2v", **untouched))[0])
    assert kept["validation"]["samples"] == yaml.safe_load(_template("ic_video.yaml"))["validation"]["samples"]


def test_full_fine_tune_sets_training_mode_and_removes_nothing() -> None:
    patches = _by_path(patches_for_stage(_recipe("t2v", TIER_80, training_mode="full", gpus=4), 1, mode="t2v",
                                         paths=PLACEHOLDER_PATHS, trigger=None, wandb=False,
                                         previous_stage_weights=None))
    assert patches["model.training_mode"].value == "full" and "lora.rank" not in patches
    view = yaml.safe_load(apply_patches(_template("av_flexible.yaml"), list(patches.values()))[0])
    assert view["model"]["training_mode"] == "full" and view["lora"]["rank"] == 32
    assert view["acceleration"]["quantization"] is None


def test_backend_knobs_come_last() -> None:
    patches = patches_for_stage(_recipe("t2v"), 1, mode="t2v", paths=PLACEHOLDER_PATHS, trigger=None, wandb=False,
                                previous_stage_weights=None,
                                backend_knobs={"validation.inference_steps": 8, "data.num_dataloader_workers": 0})
    assert [p.path for p in patches[-2:]] == ["validation.inference_steps", "data.num_dataloader_workers"]
    view = yaml.safe_load(apply_patches(_template("av_flexible.yaml"), patches)[0])
    assert view["validation"]["inference_steps"] == 8


def test_unknown_recipe_knob_is_refused() -> None:
    recipe = _recipe("t2v")
    recipe["knobs"] = dict(recipe["knobs"], turbo=True)
    with pytest.raises(BadInput, match="turbo"):
        patches_for_stage(recipe, 1, mode="t2v", paths=PLACEHOLDER_PATHS, trigger=None, wandb=False,
                          previous_stage_weights=None)


# --- every template, patched, passes the mirror with real paths --------------------------------------


def _patch_and_check(template: str, mode: str, tier: Tier, tmp_path: Path) -> tuple[str, list[PatchRecord]]:
    recipe = _recipe(mode, tier)
    paths = _real_paths(tmp_path, yaml.safe_load(template))
    patches = patches_for_stage(recipe, 1, mode=mode, paths=paths, trigger="zxq", wandb=True,
                                previous_stage_weights=None)
    patched, records = apply_patches(template, patches)
    view = yaml.safe_load(patched)
    assert validate_trainer_config(view, relaxed_paths=False) == []
    assert check_patched(patched, relaxed_paths=False) == []
    assert view["model"]["model_path"] == paths.model_path and view["output_dir"] == paths.output_dir
    assert view["validation"]["video_dims"] == [960, 544, 49]
    assert _comments(patched) == _comments(template)
    return patched, records


def _assert_only_patched_lines(template: str, patched: str, records: list[PatchRecord]) -> None:
    """Every removed line is the line of a patched key, or part of a patched prompt."""
    removed, _ = _changed(template, patched)
    prompt_lines = {line for r in records if r.path.endswith(".prompt") for line in
                    _prompt_block(template, r.old)}
    leaf_keys = {r.path.rsplit(".", 1)[-1] for r in records if not r.added}
    others = []
    for line in removed:
        key = line.strip().removeprefix("- ").split(":", 1)[0]
        assert key in leaf_keys or line in prompt_lines, line
        if key != "prompt" and line not in prompt_lines:
            others.append(line)
    # One removed line per replaced single-line value, nothing else.
    assert len(others) == len([r for r in records if not r.added and not r.path.endswith(".prompt")])


def _prompt_block(template: str, prompt: Any) -> set[str]:
    words = set(str(prompt).split())
    return {line for line in template.splitlines() if line.strip() and set(line.split()) <= words}


@pytest.mark.parametrize("name", sorted(FIXTURE_MODES))
def test_patched_fixture_templates_pass_the_mirror(name: str, tmp_path: Path) -> None:
    template = _template(name)
    patched, records = _patch_and_check(template, FIXTURE_MODES[name], TIER_32, tmp_path)
    _assert_only_patched_lines(template, patched, records)
    assert all(r.reason for r in records) and MISSING is not None


_SHIPPED_NAMES = sorted(p.name for p in SHIPPED.glob("*.yaml")) if SHIPPED.is_dir() else []


@pytest.mark.skipif(not SHIPPED.is_dir(), reason="shared ltx2-configs are not present")
def test_every_shipped_template_is_covered() -> None:
    assert len(_SHIPPED_NAMES) == 16
    assert {m.config for m in MODES.values()} | {LOW_VRAM_T2V_CONFIG} == set(_SHIPPED_NAMES)


@pytest.mark.skipif(not SHIPPED.is_dir(), reason="shared ltx2-configs are not present")
@pytest.mark.parametrize("name", _SHIPPED_NAMES or ["none"])
def test_patched_shipped_templates_pass_the_mirror(name: str, tmp_path: Path) -> None:
    mode = next((m.name for m in MODES.values() if m.config == name), "t2v")
    tier = TIER_32 if name == LOW_VRAM_T2V_CONFIG else TIER_80
    template = (SHIPPED / name).read_text(encoding="utf-8")
    patched, records = _patch_and_check(template, mode, tier, tmp_path)
    _assert_only_patched_lines(template, patched, records)
    assert render_diff(template, patched, name, "config.yaml").count("\n+") >= 5


def test_patching_leaves_ruamel_defaults_alone_for_other_users() -> None:
    apply_patches(_template("ic_video.yaml"), [Patch("model.load_checkpoint", "/w.safetensors", "x"),
                                               Patch("optimization.learning_rate", 1e-5, "x")])
    stream = io.StringIO()
    YAML().dump({"a": None}, stream)
    assert stream.getvalue() == "a:\n"  # ruamel's own rendering, not this module's `null`


def test_a_comment_about_the_replaced_value_goes_with_it_and_others_stay() -> None:
    """Issue 19: `quantization: null  # int8 weights for the frozen base` would contradict itself."""
    text = ('acceleration:\n  quantization: "int8-quanto"  # int8 weights for the frozen base\n'
            '  # about the next key\n  load_text_encoder_in_8bit: true  # keep me\noptimization:\n'
            '  steps: 2000  # optimizer steps\n')
    out, _ = apply_patches(text, [Patch("acceleration.quantization", None, "full fine-tune"),
                                  Patch("optimization.steps", 3000, "plan")])
    assert "  quantization: null\n  # about the next key\n" in out
    assert "int8 weights" not in out
    assert "steps: 3000  # optimizer steps" in out and "# keep me" in out
