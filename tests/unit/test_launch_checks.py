"""Launch rules the trainer checks only at runtime (or never): each finding, its trigger and its fix."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ltx_pipeline.ltx.buckets import Bucket
from ltx_pipeline.ltx.data_check import Check
from ltx_pipeline.ltx.launch_checks import MIN_SHM_BYTES, fixes_for, format_checks, launch_checks

GIB = 1 << 30
ONE_BUCKET = [Bucket(960, 544, 49)]
CLEAN: dict[str, Any] = {
    "model": {"model_path": "/models/ltx.safetensors", "training_mode": "lora"},
    "lora": {"rank": 32, "alpha": 32},
    "training_strategy": {"name": "flexible", "video": {"is_generated": True, "latents_dir": "latents"},
                          "audio": {"is_generated": True, "latents_dir": "audio_latents"}},
    "optimization": {"steps": 2000, "batch_size": 1},
    "data": {"preprocessed_data_root": "/data/.precomputed", "num_dataloader_workers": 2},
    "validation": {"samples": [{"prompt": "a cat"}], "video_dims": [960, 544, 49], "interval": 250},
    "checkpoints": {"interval": 250, "keep_last_n": -1},
}


def config(**changes: Any) -> dict[str, Any]:
    """The clean config with dotted keys replaced (value None removes the key)."""
    data = copy.deepcopy(CLEAN)
    for dotted, value in changes.items():
        *parents, last = dotted.split("__")
        node = data
        for part in parents:
            node = node.setdefault(part, {})
        if value is None:
            node.pop(last, None)
        else:
            node[last] = value
    return data


def run(data: dict[str, Any], **kwargs: Any) -> list[Check]:
    options: dict[str, Any] = {"num_processes": 1, "dataset_samples": 20, "buckets": ONE_BUCKET, "shm_bytes": 8 * GIB}
    options.update(kwargs)
    return launch_checks(data, **options)


def only(checks: list[Check], code: str) -> Check:
    found = [check for check in checks if check.code == code]
    assert len(found) == 1, format_checks(checks)
    return found[0]


def test_clean_config_has_no_findings() -> None:
    assert run(config()) == []


@pytest.mark.parametrize(("dims", "fix"), [([1000, 544, 49], [992, 544, 49]), ([960, 544, 50], [960, 544, 49])])
def test_validation_dims_must_be_32_multiples_and_8k_plus_1(dims: list[int], fix: list[int]) -> None:
    check = only(run(config(validation__video_dims=dims)), "bad-video-dims")
    assert check.severity == "error" and check.path == "validation.video_dims"
    assert check.message.startswith("validation.video_dims = ")
    assert check.fix == f"validation.video_dims: {fix}"


def test_validation_dims_without_samples_only_warn() -> None:
    data = config(validation__video_dims=[960, 540, 49], validation__samples=None)
    assert only(run(data), "bad-video-dims").severity == "warning"


def test_per_sample_dims_and_video_prefix_suffix_frames() -> None:
    samples = [{"prompt": "p", "video_dims": [512, 288, 48],
                "conditions": [{"type": "prefix", "video": "/v.mp4", "num_frames": 10},
                               {"type": "suffix", "video": "/v.mp4", "num_frames": 9},
                               {"type": "prefix", "video": "/v.mp4", "num_frames": 17},
                               {"type": "suffix", "audio": "/a.wav", "num_frames": 9}]}]
    checks = run(config(validation__samples=samples))
    assert only(checks, "bad-video-dims").path == "validation.samples.0.video_dims"
    frames = {c.path: c.fix for c in checks if c.code == "bad-condition-frames"}
    where = "validation.samples.0.conditions.{}.num_frames"
    assert frames == {where.format(0): where.format(0) + ": 9", where.format(1): where.format(1) + ": 8"}


def test_at_least_one_generated_modality() -> None:
    data = config(training_strategy__video__is_generated=False, training_strategy__audio__is_generated=False)
    check = only(run(data), "nothing-generated")
    assert check.severity == "error" and check.path == "training_strategy"


@pytest.mark.parametrize("kind", ["first_frame", "spatial_crop"])
def test_audio_cannot_take_first_frame_or_spatial_crop(kind: str) -> None:
    data = config(training_strategy__audio__conditions=[{"type": "prefix", "temporal_boundary": 2}, {"type": kind}])
    check = only(run(data), "audio-condition")
    assert check.severity == "error" and check.path == "training_strategy.audio.conditions.1.type"
    assert run(config(training_strategy__video__conditions=[{"type": kind}])) == []


@pytest.mark.parametrize("strategy", [{}, {"name": "text_to_video"}, {"name": "video_to_video"}])
def test_legacy_strategies_warn(strategy: dict[str, Any]) -> None:
    check = only(run(config(training_strategy=strategy)), "legacy-strategy")
    assert check.severity == "warning" and "flexible" in (check.fix or "")


@pytest.mark.parametrize("batch", [2, None])  # None: the trainer's default batch_size is 2
def test_several_buckets_need_batch_size_one(batch: int | None) -> None:
    buckets = [Bucket(960, 544, 49), Bucket(512, 288, 121)]
    checks = run(config(optimization__batch_size=batch), buckets=buckets)
    check = only(checks, "multi-bucket-batch")
    assert check.severity == "error" and check.path == "optimization.batch_size"
    assert fixes_for(checks) == [("optimization.batch_size", 1,
                                  "clips of different buckets cannot be stacked into one batch")]
    assert run(config(), buckets=buckets) == []


def test_dataset_smaller_than_batch_times_processes_gives_zero_batches() -> None:
    data = config(optimization__batch_size=2)
    check = only(run(data, dataset_samples=3, num_processes=2), "zero-batches")
    assert check.severity == "error" and "3 sample(s)" in check.message and "2 x 2" in check.message
    assert run(data, dataset_samples=4, num_processes=2) == []


@given(samples=st.integers(1, 64), batch=st.integers(1, 16), processes=st.integers(1, 8))
def test_every_zero_batches_fix_changes_something_and_would_give_a_batch(samples: int, batch: int,
                                                                         processes: int) -> None:
    """Never "lower optimization.batch_size to 1" when it is 1 (#43: a fix must work as written)."""
    import re

    checks = run(config(optimization__batch_size=batch), dataset_samples=samples, num_processes=processes)
    if samples >= batch * processes:
        assert not [c for c in checks if c.code == "zero-batches"]
        return
    fix = only(checks, "zero-batches").fix or ""
    assert fix.endswith(f"add clips (at least {batch * processes} samples)")
    for option in fix.split(", or ")[:-1]:  # each fix as written gives every process a whole batch
        lowered = re.search(r"optimization\.batch_size to (\d+)", option)
        fewer = re.search(r"--processes (\d+)", option)
        new_batch = int(lowered.group(1)) if lowered else batch
        new_processes = int(fewer.group(1)) if fewer else processes
        assert (new_batch, new_processes) != (batch, processes), option
        assert new_batch >= 1 and new_processes >= 1 and new_batch * new_processes <= samples, option


def test_non_positive_counts_are_errors() -> None:
    check = only(run(config(optimization__steps=0)), "non-positive")
    assert check.path == "optimization.steps"


def test_keep_last_n_default_with_dividing_interval_deletes_final_weights() -> None:
    checks = run(config(checkpoints__keep_last_n=None, optimization__steps=1000, checkpoints__interval=250))
    check = only(checks, "keep-last-n-deletes-final")
    assert check.severity == "error" and check.path == "checkpoints.keep_last_n"
    assert "(the default)" in check.message and check.fix == "checkpoints.keep_last_n: -1"
    [(path, value, reason)] = fixes_for(checks)
    assert (path, value) == ("checkpoints.keep_last_n", -1) and "final" in reason


def test_keep_last_n_cases_that_keep_the_final_weights() -> None:
    assert run(config(checkpoints__keep_last_n=1, optimization__steps=1100)) == []
    assert run(config(checkpoints__keep_last_n=1, checkpoints__interval=None)) == []
    assert run(config(checkpoints__keep_last_n=0)) == []
    checks = run(config(checkpoints__keep_last_n=3))
    fewer = only(checks, "keep-last-n-keeps-fewer")
    assert fewer.severity == "warning" and "only 2 distinct" in fewer.message
    assert [patch[:2] for patch in fixes_for(checks)] == [("checkpoints.keep_last_n", 4)]


def test_findings_that_need_a_choice_are_not_patched() -> None:
    checks = run(config(data__num_dataloader_workers=4, optimization__batch_size=4), shm_bytes=1 << 20,
                 dataset_samples=2)
    assert {c.code for c in checks} == {"small-shm", "zero-batches"}
    assert fixes_for(checks) == []


SHIPPED = Path(__file__).resolve().parents[2].parent / "shared" / "ltx2-configs"


def test_shipped_configs_have_no_launch_errors() -> None:
    from ltx_pipeline.ltx.trainer_config import load_trainer_config_file

    files = sorted(SHIPPED.rglob("configs/*.yaml")) if SHIPPED.is_dir() else []
    if not files:
        pytest.skip("the shipped trainer configs (../shared/ltx2-configs) are not available")
    for path in files:
        checks = launch_checks(load_trainer_config_file(path), num_processes=1, dataset_samples=None,
                               buckets=None, shm_bytes=None)
        # The shipped keep_last_n: 3 with steps 3000 / interval 250 keeps 2 (facts 4.7): a warning only.
        assert {c.code for c in checks} <= {"keep-last-n-keeps-fewer"}, (path.name, format_checks(checks))


def make_checkpoints(folder: Path, steps: dict[int, bool]) -> Path:
    """``lora_weights_step_N.safetensors`` per step, with its state file when the flag is true."""
    folder.mkdir(parents=True, exist_ok=True)
    for step, with_state in steps.items():
        (folder / f"lora_weights_step_{step:05d}.safetensors").write_bytes(b"w")
        if with_state:
            (folder / f"training_state_step_{step:05d}.pt").write_bytes(b"s")
    return folder


def test_load_checkpoint_without_state_file_restarts_at_zero(tmp_path: Path) -> None:
    folder = make_checkpoints(tmp_path / "ckpt", {500: False, 250: True})
    weights = folder / "lora_weights_step_00500.safetensors"
    check = only(run(config(model__load_checkpoint=str(weights))), "no-training-state")
    assert check.severity == "warning" and check.path == "model.load_checkpoint" and "step 0" in check.message
    quiet = only(run(config(model__load_checkpoint=str(weights), checkpoints__no_resume=True)), "no-training-state")
    assert quiet.severity == "info"
    # A folder resumes from its highest step, which here has no state either.
    assert "00500" in only(run(config(model__load_checkpoint=str(folder))), "no-training-state").message
    assert run(config(model__load_checkpoint=str(folder / "lora_weights_step_00250.safetensors"))) == []


def test_load_checkpoint_bad_targets(tmp_path: Path) -> None:
    folder = make_checkpoints(tmp_path / "ckpt", {250: True})
    missing = only(run(config(model__load_checkpoint=str(tmp_path / "nope.safetensors"))), "bad-load-checkpoint")
    assert missing.severity == "error" and "does not exist" in missing.message
    state = str(folder / "training_state_step_00250.pt")
    assert "not a .safetensors" in only(run(config(model__load_checkpoint=state)), "bad-load-checkpoint").message
    (tmp_path / "empty").mkdir()
    relative = run(config(model__load_checkpoint="empty"), cwd=tmp_path)
    assert only(relative, "checkpoint-not-found").severity == "warning"
    done = run(config(model__load_checkpoint=str(folder), optimization__steps=250))
    assert only(done, "nothing-to-train").path == "optimization.steps"


def test_quantization_with_full_training() -> None:
    data = config(model__training_mode="full", acceleration={"quantization": "int8-quanto"}, lora=None)
    check = only(run(data), "quantization-full")
    assert check.severity == "error" and check.path == "acceleration.quantization"
    assert run(config(acceleration={"quantization": "int8-quanto"})) == []


@pytest.mark.parametrize("workers", [2, None])  # None: the trainer's default is 2 workers
def test_dataloader_workers_with_small_shm(workers: int | None) -> None:
    check = only(run(config(data__num_dataloader_workers=workers), shm_bytes=64 << 20), "small-shm")
    assert check.severity == "warning" and "64 MiB" in check.message
    assert check.fix is not None and check.fix.startswith("data.num_dataloader_workers: 0")
    assert run(config(data__num_dataloader_workers=0), shm_bytes=64 << 20) == []
    assert run(config(), shm_bytes=MIN_SHM_BYTES) == []
    assert run(config(), shm_bytes=None) == []


def test_every_finding_is_one_line_with_its_path_and_errors_come_first() -> None:
    data = config(validation__video_dims=[1000, 544, 50], optimization__batch_size=4, checkpoints__keep_last_n=1,
                  training_strategy={"name": "text_to_video"}, model__training_mode="full",
                  acceleration={"quantization": "fp8-quanto"})
    checks = run(data, buckets=[Bucket(960, 544, 49), Bucket(512, 288, 9)], dataset_samples=2, shm_bytes=1 << 20)
    assert {c.code for c in checks} == {"bad-video-dims", "legacy-strategy", "multi-bucket-batch", "zero-batches",
                                        "keep-last-n-deletes-final", "quantization-full", "small-shm"}
    assert all(c.path for c in checks)
    lines = format_checks(checks)
    assert all("\n" not in line for line in lines)
    severities = [line.split(" ", 1)[0] for line in lines]
    assert severities == sorted(severities, key=["error", "warning", "info"].index)
    assert lines[0].startswith("error [bad-video-dims] validation.video_dims = [1000, 544, 50]")
