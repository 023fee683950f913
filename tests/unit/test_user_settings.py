"""``run --set KEY=VALUE`` (ltx.user_settings, trainer_config.check_setting): parsed as YAML, checked against the
trainer's schema key by key, the run's own keys refused with the option that sets them."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ltx_pipeline.errors import BadInput, BadRequest
from ltx_pipeline.ltx.trainer_config import LtxTrainerConfig, SettingProblem, check_setting, settable_keys
from ltx_pipeline.ltx.user_settings import OWNED, REASON, checked_settings, parse_assignments, setting_patches
from ltx_pipeline.request import build_request


def test_values_are_read_as_yaml_and_a_later_key_wins() -> None:
    assert parse_assignments(["validation.inference_steps=8", "validation.skip_initial_validation=true",
                              "acceleration.mixed_precision_mode=null", "lora.target_modules=[to_q, to_k]",
                              "validation.negative_prompt=blurry, low quality", "seed=1", "seed=2"]) == {
        "validation.inference_steps": 8, "validation.skip_initial_validation": True,
        "acceleration.mixed_precision_mode": None, "lora.target_modules": ["to_q", "to_k"],
        "validation.negative_prompt": "blurry, low quality", "seed": 2}


@pytest.mark.parametrize("item", ["novalue", "=3", " =3", "lora.target_modules=[to_q, to_k", "seed={a"])
def test_a_malformed_assignment_is_one_line_naming_the_option(item: str) -> None:
    with pytest.raises(BadInput) as caught:
        parse_assignments([item])
    assert caught.value.where == "--set" and caught.value.fix and "\n" not in str(caught.value)


def _section_fields(key: str) -> Any:
    section, _, field = key.partition(".")
    annotation = LtxTrainerConfig.model_fields[section].annotation
    model = next(a for a in (annotation, *getattr(annotation, "__args__", ())) if hasattr(a, "model_fields"))
    return model.model_fields[field]


def test_every_key_of_every_section_is_settable_to_its_own_default() -> None:
    keys = settable_keys()
    assert {"validation.inference_steps", "optimization.max_grad_norm", "seed", "lora.dropout"} <= set(keys)
    assert not any(k.startswith("training_strategy") for k in keys)  # chosen by --mode
    for key in (k for k in keys if "." in k):
        field = _section_fields(key)
        if not field.is_required():
            default = field.get_default(call_default_factory=True)
            assert check_setting(key, default) == default, key


@pytest.mark.parametrize(("key", "value", "words"), [
    ("validation.inference_steps", 0, "greater than 0"), ("lora.dropout", 2.0, "less than or equal to 1"),
    ("seed", "x", "valid integer"), ("optimization.scheduler_type", "warp", "Input should be"),
    ("acceleration.mixed_precision_mode", "fp8", "Input should be")])
def test_a_value_the_schema_refuses_names_the_key_and_the_schemas_words(key: str, value: Any, words: str) -> None:
    with pytest.raises(SettingProblem) as caught:
        check_setting(key, value)
    assert caught.value.what.startswith(f"{key}: {value!r} is refused by the trainer's schema") and words in \
        caught.value.what


def test_an_unknown_key_suggests_the_close_ones() -> None:
    with pytest.raises(SettingProblem) as caught:
        check_setting("validation.inference_step", 3)
    assert caught.value.fix.startswith("use validation.inference_steps")
    with pytest.raises(SettingProblem) as caught:
        check_setting("validation.samples[0].prompt", "x")
    assert "validation" in caught.value.fix


@given(st.sampled_from(sorted(settable_keys())))
def test_each_key_is_either_the_runs_own_with_an_option_or_checked_by_the_schema(key: str) -> None:
    owned = next((where for k, where in OWNED.items() if key == k or (k.endswith(".") and key.startswith(k))), None)
    if owned is None:
        return
    with pytest.raises(BadInput) as caught:
        checked_settings({key: None})
    assert caught.value.what == f"{key} is set by the run itself" and caught.value.fix == owned


def test_the_runs_own_keys_name_options_run_has() -> None:
    import re

    import typer.main

    from ltx_pipeline.cli.app import app

    run = next(c for c in typer.main.get_command(app).commands.values() if c.name == "run")  # type: ignore[attr-defined]
    options = {opt for p in run.params for opt in p.opts}
    named = {flag for where in OWNED.values() for flag in re.findall(r"--[a-z][a-z-]+", where)}
    assert named and named <= options, named - options


def test_the_request_keeps_the_settings_and_refuses_a_bad_one_as_the_set_option() -> None:
    request = build_request({"dataset": "/d", "config_set": {"validation.inference_steps": 4}})
    assert request.config_set == {"validation.inference_steps": 4}
    assert [(p.path, p.value, p.reason) for p in setting_patches(request.config_set)] == [
        ("validation.inference_steps", 4, REASON)]
    with pytest.raises(BadRequest) as caught:
        build_request({"dataset": "/d", "config_set": {"optimization.steps": 10}})
    assert str(caught.value) == "optimization.steps is set by the run itself (--set). Fix: use --steps."
