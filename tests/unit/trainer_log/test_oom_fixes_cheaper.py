"""Every OOM fix lowers the figure it names (issue 43, point 2): a property over generated configs.

For each phase an out-of-memory can come from (a training step, model loading, validation prompt caching,
media encoding, sampling, sampling with the optimizer offloaded) and each generated config, every fix step
that sets a config value must move it strictly in the cheaper direction from what the run used (the
config's value, else the trainer's default, read from the schema mirror) and stay valid for the trainer;
where the validation render has nothing smaller on the trainer's grid, a step says so and none is proposed.
"""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from ltx_pipeline.errors import BadRequest
from ltx_pipeline.ltx.buckets import parse_bucket
from ltx_pipeline.ltx.config_values import config_value
from ltx_pipeline.ltx.trainer_config import LtxTrainerConfig
from ltx_pipeline.trainer_log import FixStep, classify_failure

OOM = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 79 GiB"
TRAIN_FRAMES = ["Traceback (most recent call last):", '  File "/x/ltx_trainer/trainer.py", line 225, in train',
                "    output = self._training_step(batch)"]


def _rich(msg: str) -> str:
    return f"INFO     {msg}" + " " * 20 + "trainer.py:311"


# (the log before the OOM line, the kind it must be classified as)
LOGS = {
    "training": (TRAIN_FRAMES, "oom_training"),
    "model_loading": ([_rich("Quantizing model with int8-quanto...")], "oom_training"),
    "prompt_caching": ([_rich("Pre-computing embeddings for 2 validation prompts...")], "oom_validation"),
    "media_encoding": ([_rich("Pre-encoding conditioning media for 2 validation samples...")], "oom_validation"),
    "sampling": ([_rich("Loading video VAE decoder for validation")], "oom_validation"),
    "sampling_offloaded": ([_rich("Offloading optimizer state to CPU (3.1 GB)")], "oom_validation"),
}
_BITS = {None: 16, "int8-quanto": 8, "fp8-quanto": 8, "fp8uz-quanto": 8, "int4-quanto": 4, "int2-quanto": 2}


def _default(path: str) -> Any:
    section, key = path.split(".")
    model = LtxTrainerConfig.model_fields[section].annotation
    return model.model_fields[key].default  # type: ignore[union-attr]


def _used(config: dict[str, Any], path: str) -> Any:
    return config_value(config, path, _default(path))


def _valid_dims(dims: list[int]) -> bool:
    try:
        parse_bucket("x".join(str(v) for v in dims))
    except BadRequest:
        return False
    return True


def _has_smaller_render(dims: list[int]) -> bool:
    """Whether a valid render exists with no axis larger and fewer pixel-frames (a video keeps 9 frames)."""
    width, height, frames = dims
    on_grid = [width // 32 * 32, height // 32 * 32, (frames - 1) // 8 * 8 + 1]
    if min(on_grid[:2]) < 32:
        return False
    floor = [32, 32, min(9, on_grid[2])]
    return on_grid != floor or on_grid[0] * on_grid[1] * on_grid[2] < width * height * frames


def _cheaper(path: str, old: Any, new: Any, config: dict[str, Any]) -> bool:
    """The oracle: ``new`` is strictly cheaper than ``old`` for the figure ``path`` names, and valid."""
    if path == "validation.video_dims":
        return (_valid_dims(new) and all(n <= o for n, o in zip(new, old, strict=True))
                and new[0] * new[1] * new[2] < old[0] * old[1] * old[2])
    if path == "optimization.batch_size":
        return isinstance(new, int) and 1 <= new < old
    if path == "validation.inference_steps":
        return isinstance(new, int) and 1 <= new < old
    if path == "validation.interval":  # fewer passes: a longer interval
        return isinstance(new, int) and new > old
    if path == "acceleration.quantization":
        return new in _BITS and _BITS[new] < _BITS[old]
    if path == "optimization.optimizer_type":
        return (old, new) == ("adamw", "adamw8bit")
    if path in ("optimization.enable_gradient_checkpointing", "acceleration.load_text_encoder_in_8bit",
                "acceleration.offload_optimizer_during_validation"):
        return old is not True and new is True
    if path == "optimization.gradient_accumulation_steps":
        # Not a cost: it keeps the effective batch while the per-step batch falls to 1.
        return bool(new == _used(config, "optimization.batch_size") * old)
    raise AssertionError(f"a fix names a figure the oracle does not know: {path}")


def _section(**fields: st.SearchStrategy[Any]) -> st.SearchStrategy[dict[str, Any]]:
    return st.fixed_dictionaries({}, optional=fields)  # a key left out: the trainer's default applies


DIMS = st.one_of(
    st.tuples(st.integers(1, 64).map(lambda k: k * 32), st.integers(1, 64).map(lambda k: k * 32),
              st.integers(0, 40).map(lambda k: k * 8 + 1)),  # on the trainer's grid
    st.tuples(st.integers(1, 2100), st.integers(1, 2100), st.integers(1, 300)),  # anything a user may write
).map(list)

CONFIGS = st.fixed_dictionaries({}, optional={
    "model": _section(training_mode=st.sampled_from(["lora", "full"])),
    "optimization": _section(batch_size=st.integers(1, 16), gradient_accumulation_steps=st.integers(1, 8),
                             enable_gradient_checkpointing=st.booleans(),
                             optimizer_type=st.sampled_from(["adamw", "adamw8bit"])),
    "acceleration": _section(quantization=st.sampled_from(list(_BITS)), load_text_encoder_in_8bit=st.booleans(),
                             offload_optimizer_during_validation=st.booleans()),
    "validation": _section(video_dims=DIMS, inference_steps=st.integers(1, 80),
                           interval=st.one_of(st.none(), st.integers(1, 1000))),
})


def _check(config: dict[str, Any], log: str) -> list[FixStep]:
    before, kind = LOGS[log]
    failure = classify_failure(1, None, [*before, OOM], config=config)
    assert failure.kind == kind, (log, failure)
    for step in failure.fix:
        if step.path is not None:
            old = _used(config, step.path)
            assert _cheaper(step.path, old, step.value, config), (log, step, old)
    return failure.fix


@settings(max_examples=300, deadline=None)
@given(config=CONFIGS, log=st.sampled_from(sorted(LOGS)))
def test_every_oom_fix_lowers_the_figure_it_names(config: dict[str, Any], log: str) -> None:
    fix = _check(config, log)
    dims = list(_used(config, "validation.video_dims"))
    proposed = [step for step in fix if step.path == "validation.video_dims"]
    said = [step for step in fix if step.path is None and "validation.video_dims" in step.reason]
    if log == "prompt_caching":
        return  # the text encoder alone is on the GPU: no render size is offered
    if _has_smaller_render(dims):
        assert proposed and not said, (dims, fix)
    else:
        assert said and not proposed, (dims, fix)


def test_the_issue_s_small_render_is_never_made_larger() -> None:
    # 96x64x25 once became [256, 256, 9] "cheaper validation passes": 3.8x the pixel-frames.
    fix = _check({"validation": {"video_dims": [96, 64, 25]}}, "sampling")
    assert [s.value for s in fix if s.path == "validation.video_dims"] == [[32, 32, 9]]


def test_the_smallest_render_is_said_to_be_the_smallest() -> None:
    fix = _check({"validation": {"video_dims": [32, 32, 9], "inference_steps": 1}}, "training")
    assert "validation.video_dims" not in {s.path for s in fix}
    assert any("already the smallest" in s.reason for s in fix if s.path is None)
    sampling = _check({"validation": {"video_dims": [32, 32, 9], "inference_steps": 1}}, "sampling")
    assert not {"validation.video_dims", "validation.inference_steps"} & {s.path for s in sampling}
    assert any("inference_steps is already 1" in s.reason for s in sampling)


def test_the_defaults_the_fixes_assume_are_the_trainers() -> None:
    # Without a config the run used the trainer's defaults: batch 2, so batch 1 needs accumulation 2.
    fix = _check({}, "training")
    changes = {s.path: s.value for s in fix if s.path}
    assert (changes["optimization.batch_size"], changes["optimization.gradient_accumulation_steps"]) == (1, 2)
    assert changes["validation.video_dims"] == [480, 256, 41]  # half of 960x544x89, on the grid
