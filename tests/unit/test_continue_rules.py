"""Issue 33, case 3, as rules: what ``--steps`` raised on a finished run plans, patches and refuses.

The end-to-end case (real mp4s, the reference trainer, no autotune trial) is
tests/system/test_continue_training.py; these pin each rule on its own, fast.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from ltx_pipeline.errors import BadRequest
from ltx_pipeline.ltx.buckets import CHAINED_DEFAULT, parse_buckets
from ltx_pipeline.ltx.config_patch import StagePaths, apply_patches, patches_for_stage
from ltx_pipeline.ltx.launch_plan import launch_shape
from ltx_pipeline.ltx.modes import get_mode
from ltx_pipeline.ltx.recipe import build_recipe, continue_points, planned_stages, schedule_lines, total_steps
from ltx_pipeline.ltx.tiers import TIER_80
from ltx_pipeline.ltx.trainer_config import validate_trainer_config
from ltx_pipeline.request import build_request
from phases.config_patch import stage_config_file, stage_output_dir
from phases.train import stage_log

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "config_patch"
PATHS = StagePaths("/models/ltx.safetensors", "/models/gemma", "/run/dataset/.precomputed", "/run/outputs/continue-1")


def _recipe(steps: int, continued_from: tuple[int, ...] = (), *, chain: bool = False):
    stages = [(b,) for b, _ in CHAINED_DEFAULT] if chain else [parse_buckets("960x544x49")]
    launch = launch_shape(backend="ltx", gpu_count=1, requested=None, training_mode="lora")
    return build_recipe(mode=get_mode("t2v"), tier=TIER_80, gpu_count=1, launch=launch, training_mode="lora",
                        strategy="chain" if chain else "single", stages=stages, buckets_given=True, rank=None,
                        steps=steps, learning_rate=2e-4, effective_batch=1, continued_from=continued_from)


def test_each_continuation_is_a_warm_started_stage_over_its_extra_steps() -> None:
    recipe = _recipe(3000, (1000, 2000))
    assert recipe.steps == 1000  # the planned stage trains what it trained, its config unchanged
    first, *extra = recipe.stages
    assert (first.steps, first.start_step, first.warm_start_from_previous) == (None, 0, False)
    assert [(s.index, s.steps, s.start_step, s.learning_rate, s.warm_start_from_previous, s.buckets)
            for s in extra] == [(2, 1000, 1000, 2e-4, True, first.buckets), (3, 1000, 2000, 2e-4, True, first.buckets)]
    assert total_steps(recipe) == 3000 and planned_stages(recipe.to_dict()["stages"]) == 1
    assert _recipe(1000).stages == (first,) and total_steps(_recipe(1000)) == 1000
    # A chain is continued from its last stage, at that stage's bucket and learning rate.
    chain = _recipe(600, (500,), chain=True)
    assert [(s.index, s.start_step, s.steps) for s in chain.stages[3:]] == [(4, 500, 100)]
    assert chain.stages[3].learning_rate == chain.stages[2].learning_rate and chain.stages[3].buckets == \
        chain.stages[2].buckets
    assert planned_stages(chain.to_dict()["stages"]) == 3


def test_a_continuation_config_loads_the_final_weights_with_a_fresh_schedule_of_the_extra_steps() -> None:
    recipe = _recipe(2500, (1000,)).to_dict()
    weights = "/run/outputs/checkpoints/lora_weights_step_01000.safetensors"
    patches = patches_for_stage(recipe, 2, mode="t2v", paths=PATHS, trigger=None, wandb=False,
                                previous_stage_weights=weights)
    text, records = apply_patches((FIXTURES / "av_flexible.yaml").read_text(encoding="utf-8"), patches)
    config = yaml.safe_load(text)
    assert config["optimization"]["steps"] == 1500 and config["optimization"]["learning_rate"] == 2e-4
    assert config["model"]["load_checkpoint"] == weights and config["checkpoints"]["no_resume"] is True
    assert validate_trainer_config(config, relaxed_paths=True) == []  # the trainer's schema takes it as is
    reasons = {r.path: r.reason for r in records}
    assert reasons["optimization.steps"] == "plan: continue from step 1000 with 1500 more steps"
    assert "fresh schedule" in reasons["checkpoints.no_resume"]
    # The planned stage's patches are the ones it trained with: its config does not change.
    before = patches_for_stage(_recipe(1000).to_dict(), 1, mode="t2v", paths=PATHS, trigger=None, wandb=False,
                               previous_stage_weights=None)
    after = patches_for_stage(recipe, 1, mode="t2v", paths=PATHS, trigger=None, wandb=False,
                              previous_stage_weights=None)
    assert [(p.path, p.value, p.reason) for p in before] == [(p.path, p.value, p.reason) for p in after]


def test_planned_names_never_move_and_continuations_get_their_own() -> None:
    root = Path("/w/r1")
    assert stage_config_file(root, 1, 1) == root / "config.yaml"
    assert stage_output_dir(root, 1, 1) == root / "outputs"
    assert stage_config_file(root, 2, 1) == root / "config.continue-1.yaml"
    assert stage_output_dir(root, 3, 1) == root / "outputs" / "continue-2"
    assert stage_config_file(root, 3, 3) == root / "config.stage-3.yaml"
    assert stage_config_file(root, 4, 3) == root / "config.continue-1.yaml"
    assert stage_log(root, 2, 1) == root / "train.continue-1.log"
    assert stage_log(root, 2, 1, attempt=2) == root / "train.continue-1.attempt-2.log"
    assert stage_log(root, 1, 1) == root / "train.log"


def test_steps_above_a_finished_training_continue_it_and_below_are_refused() -> None:
    assert continue_points([], 1000, 2000, run="r1") == [1000]
    assert continue_points([1000], 2000, 3000, run="r1") == [1000, 2000]
    assert continue_points([], 1000, 1000, run="r1") == []  # the same total: nothing changes
    assert continue_points([1000], 1000, 2500, run="r1") == [1000]  # recorded, its stage not trained yet
    assert continue_points([], None, 2000, run="r1") == []  # unfinished: a plain change of steps (resume)
    assert continue_points([], 1000, None, run="r1") == []
    with pytest.raises(BadRequest) as refused:
        continue_points([1000], 2000, 1500, run="r1")
    assert refused.value.line() == ("Run r1 has trained 2000 steps; steps 1500 would be fewer (--steps). Fix: pass "
                                    "--steps above 2000 to continue it from its final weights, or a new --run to "
                                    "train 1500 steps from the start.")


def test_the_request_keeps_continuations_under_its_steps(tmp_path: Path) -> None:
    dataset = tmp_path / "d.json"
    dataset.write_text("[]")
    assert build_request({"dataset": str(dataset), "steps": 20, "continued_from": [10]}).continued_from == [10]
    for bad in ({"steps": 10, "continued_from": [10]}, {"continued_from": [10]},
                {"steps": 30, "continued_from": [20, 10]}):
        with pytest.raises(BadRequest, match="continued_from"):
            build_request({"dataset": str(dataset), **bad})


def test_the_plan_says_what_a_resume_and_a_continuation_do_to_the_learning_rate() -> None:
    text = "\n".join(schedule_lines(_recipe(2000, (1000,)), "--workspace /w --run r1"))
    assert "Stage 2 continues the finished training from step 1000 to 2000" in text
    assert "learning rate starts at 0.0002 and follows a fresh schedule over its 1000 steps" in text
    assert "resumes from its newest checkpoint pair. Each checkpoint keeps the trainer's full state" in text
    assert "`ltx-pipeline run --workspace /w --run r1 --steps 4000` (any total above 2000)" in text
