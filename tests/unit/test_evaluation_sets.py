"""The evaluation's prompt sets and its config patches (``ltx.evaluation``): the skill's Phase 9 rules.

The eval config is checked against the skill's list (load_checkpoint, 1 step, no_resume, no
checkpoints, a step-0 render only) and by the schema mirror, on the project's templates and, when
``../shared`` is present, on every shipped config of the trainer, conditions included.
"""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest
import yaml

from ltx_pipeline.ltx.buckets import cheaper_dims
from ltx_pipeline.ltx.config_patch import apply_patches, check_patched
from ltx_pipeline.ltx.evaluation import eval_patches, eval_sets, generic_prompts, render_order
from tests.conftest import REPO, SHARED

TEMPLATES = REPO / "ltx_pipeline" / "backends" / "reference_configs"
SHIPPED = SHARED / "ltx2-configs" / "packages" / "ltx-trainer" / "configs"
BASE = Path("/data/set")


def rows(n: int, **extra: str) -> list[tuple[dict, Path]]:
    return [({"caption": f"clip number {i}", "video": f"videos/{i}.mp4",
              **{k: v.format(i=i) for k, v in extra.items()}}, BASE) for i in range(n)]


def sets(training, held=(), prompts=(), trigger="fxclp", audio=False, shapes=None):
    return eval_sets(training=training, held_out=list(held), user_prompts=list(prompts), trigger=trigger,
                     describe_audio=audio, condition_shapes=shapes or [])


def test_three_training_captions_chosen_with_seed_42_as_the_model_saw_them() -> None:
    first = sets(rows(20))
    again = sets(rows(20))
    chosen = [p for p in first.prompts if p.category == "in_distribution"]
    assert [p.prompt for p in chosen] == [p.prompt for p in again.prompts if p.category == "in_distribution"]
    assert len(chosen) == 3 and len({p.prompt for p in chosen}) == 3
    # preprocessing's --lora-trigger puts "{trigger} " in front of every caption
    assert all(p.prompt.startswith("fxclp clip number ") for p in chosen)
    assert all(p.source.startswith("/data/set/videos/") for p in chosen)
    assert [p.prompt for p in sets(rows(20), trigger=None).prompts[:3]] == [p.prompt[6:] for p in chosen]


def test_generic_prompts_carry_the_trigger_and_describe_sound_for_audio_modes() -> None:
    silent = generic_prompts("fxclp", describe_audio=False)
    loud = generic_prompts("fxclp", describe_audio=True)
    assert len(silent) == 3 and all(p.startswith("fxclp ") for p in silent)
    assert all("audio" not in p.lower() for p in silent)
    assert all("The audio features" in p for p in loud)
    ood = [p for p in sets(rows(3), audio=True).prompts if p.category == "out_of_distribution"]
    assert [p.prompt for p in ood] == loud and {p.source for p in ood} == {"generic"}


def test_the_users_prompts_replace_the_generic_ones_as_written() -> None:
    ood = [p for p in sets(rows(3), prompts=["a cat on a sofa"]).prompts if p.category == "out_of_distribution"]
    assert [(p.prompt, p.source) for p in ood] == [("a cat on a sofa", "your --eval-prompt / eval_prompts")]


def test_held_out_takes_at_most_five_and_none_is_said_never_invented() -> None:
    many = sets(rows(4), held=rows(8))
    assert sum(p.category == "held_out" for p in many.prompts) == 5 and "held_out" not in many.notes
    none = sets(rows(4))
    assert not any(p.category == "held_out" for p in none.prompts)
    assert none.notes["held_out"]
    assert [n for _, n in render_order(many.prompts)] == [1, 2, 3, 1, 2, 3, 1, 2, 3, 4, 5]


def test_no_captions_no_in_distribution_prompts_and_the_reason() -> None:
    result = eval_sets(training=[], held_out=[], user_prompts=[], trigger=None, describe_audio=False,
                       condition_shapes=[], training_note="the dataset is a preprocessed folder")
    assert result.notes["in_distribution"] == "the dataset is a preprocessed folder"
    assert [p.category for p in result.prompts] == ["out_of_distribution"] * 3


def test_conditions_take_each_rows_own_media_and_ood_prompts_borrow_a_training_rows() -> None:
    first_frame = [{"type": "first_frame", "image_or_video": "/path/to/conditioning_image_1.png"}]
    result = sets(rows(4), held=rows(1), shapes=first_frame)
    for prompt in result.prompts:
        assert len(prompt.conditions) == 1 and prompt.conditions[0]["type"] == "first_frame"
        media = prompt.conditions[0]["image_or_video"]
        assert media.startswith("/data/set/videos/") and "/path/to" not in media
        if prompt.category == "out_of_distribution":
            assert prompt.conditions_from == media
        else:
            assert prompt.source == media and prompt.conditions_from is None
    reference = [{"type": "reference", "video": "/path/to/reference_video_1.mp4", "downscale_factor": 1,
                  "include_in_output": True}]
    ic = sets(rows(3, reference_video="refs/{i}.mp4"), shapes=reference).prompts[0]
    assert ic.conditions[0]["video"].startswith("/data/set/refs/") and ic.conditions[0]["include_in_output"] is True
    prefix = [{"type": "prefix", "video": "/path/to/prefix_video_1.mp4", "num_frames": 57}]
    extend = sets(rows(3), shapes=prefix).prompts[0]
    assert extend.conditions[0]["video"].startswith("/data/set/videos/") and extend.conditions[0]["num_frames"] == 57


def test_the_retry_dims_keep_the_trainers_geometry_and_never_cost_more() -> None:
    """The evaluation's OOM retry size: on the trainer's grid, no axis raised, fewer pixel-frames; or none at all.

    The old rule floored frames at 9, so a 1..8-frame render was retried larger, and 32x32x9 was "retried" as is.
    """
    assert cheaper_dims([960, 544, 49]) == [480, 256, 25]
    assert cheaper_dims([64, 64, 17]) == [32, 32, 9]
    assert cheaper_dims([32, 32, 9]) is None  # nothing smaller is valid: no retry at the same cost
    for dims in itertools.product((32, 64, 96, 544, 960, 1280), (32, 64, 544, 704), (1, 9, 17, 25, 49, 121)):
        smaller = cheaper_dims(list(dims))
        if smaller is None:
            continue
        width, height, frames = smaller
        assert width % 32 == 0 and height % 32 == 0 and (frames - 1) % 8 == 0, (dims, smaller)
        assert all(new <= old for new, old in zip(smaller, dims, strict=True)), (dims, smaller)
        assert width * height * frames < dims[0] * dims[1] * dims[2], (dims, smaller)


def _templates() -> list[Path]:
    found = sorted(TEMPLATES.glob("*.yaml"))
    if SHIPPED.is_dir():
        found += [p for p in sorted(SHIPPED.glob("*.yaml"))]
    return found


@pytest.mark.parametrize("template", _templates(), ids=lambda p: f"{p.parent.name}/{p.name}")
def test_the_eval_config_holds_the_skills_list_and_passes_the_schema(template: Path) -> None:
    text = template.read_text()
    values = yaml.safe_load(text)
    shapes = ((values.get("validation") or {}).get("samples") or [{}])[0].get("conditions") or []
    training = rows(4, reference_video="refs/{i}.mp4", video_mask="masks/{i}.mp4", audio="sounds/{i}.wav",
                    audio_mask="masks/{i}.pt", reference_audio="refs/{i}.wav")
    chosen = sets(training, held=rows(2), shapes=shapes).prompts
    patches = eval_patches(values, weights="/runs/r1/outputs/checkpoints/lora_weights_step_02000.safetensors",
                           samples=[p.sample() for p in chosen], output_dir="/runs/r1/outputs/eval/.work")
    patched, records = apply_patches(text, patches)
    assert records and all(r.reason.startswith("evaluate: ") for r in records)
    config = yaml.safe_load(patched)
    assert config["model"]["load_checkpoint"] == "/runs/r1/outputs/checkpoints/lora_weights_step_02000.safetensors"
    assert config["optimization"]["steps"] == 1
    assert config["checkpoints"]["no_resume"] is True and config["checkpoints"]["interval"] is None
    validation = config["validation"]
    # the render happens at step 0 only: before the one step changes the weights
    assert validation["interval"] > config["optimization"]["steps"] and validation["skip_initial_validation"] is False
    assert [s["prompt"] for s in validation["samples"]] == [p.prompt for p in chosen]
    assert not validation.get("prompts")
    assert config["output_dir"] == "/runs/r1/outputs/eval/.work"
    assert (config.get("wandb") or {}).get("enabled") in (False, None)
    assert not (config.get("hub") or {}).get("push_to_hub")
    assert check_patched(patched, relaxed_paths=True) == []
    retried = yaml.safe_load(apply_patches(text, eval_patches(values, weights="/w.safetensors", samples=[],
                                                              output_dir="/o", video_dims=[480, 256, 25]))[0])
    assert retried["validation"]["video_dims"] == [480, 256, 25]
