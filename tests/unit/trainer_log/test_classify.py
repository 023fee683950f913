"""classify_failure: each failure class from realistic logs, the OOM phase rule, and ordered fixes."""

from __future__ import annotations

from pathlib import Path

import pytest

from ltx_pipeline.trainer_log import FAILURE_KINDS, FixStep, classify_failure

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "trainer_logs"


def _read(name: str) -> list[str]:
    path = FIXTURES / name
    return path.read_text(encoding="utf-8").splitlines() if path.exists() else []


def _rich(msg: str, level: str = "INFO") -> str:
    return f"{level:<8} {msg}" + " " * 20 + "trainer.py:311  "


@pytest.mark.parametrize(("fixture", "exit_code", "signal", "kind", "evidence"), [
    ("oom/training", 1, None, "oom_training", "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 3.38"),
    ("oom/validation_step0", 1, None, "oom_validation", "Tried to allocate 12.66 GiB"),
    ("oom/validation_periodic", 1, None, "oom_validation", "Tried to allocate 6.33 GiB"),
    ("oom/reference", 1, None, "oom_training", "torch.OutOfMemoryError: reference trainer: simulated out of memory"),
    ("config_error", 1, None, "config_error", "Error: Invalid configuration data: 3 validation errors"),
    ("shm_bus_error", 1, None, "shm_bus_error", "RuntimeError: DataLoader worker (pid 48213) is killed by signal: Bus"),
    ("nan_loss", -15, 15, "nan_loss", "Step 60/2000 - Loss: nan"),
    ("host_oom", 137, None, "killed", "killed (SIGKILL): by a user, or the kernel's OOM killer (exit code 137"),
    ("missing_files", 1, None, "missing_files", "FileNotFoundError: Data root directory does not exist"),
    ("crash", 1, None, "crash", "RuntimeError: stack expects each tensor to be equal size"),
])
def test_fixture_classes(fixture: str, exit_code: int, signal: int | None, kind: str, evidence: str) -> None:
    failure = classify_failure(exit_code, signal, _read(fixture + ".log"), _read(fixture + ".stderr"))
    assert failure.kind == kind
    assert failure.kind in FAILURE_KINDS
    assert failure.evidence.startswith(evidence) or evidence in failure.evidence
    assert failure.fix, "every failure proposes at least one step"


def test_nan_evidence_has_no_rich_columns() -> None:
    failure = classify_failure(1, None, _read("nan_loss.log"))
    assert failure.evidence == "Step 60/2000 - Loss: nan, LR: 5.00e-04, Time/Step: 3.39s, Total Time: 1h 55m"


def test_training_oom_fix_order_without_config() -> None:
    failure = classify_failure(1, None, _read("oom/training.log"), _read("oom/training.stderr"))
    assert [step.path for step in failure.fix] == [
        "optimization.batch_size",
        "optimization.gradient_accumulation_steps",  # the trainer's default batch is 2: keep the effective batch
        "optimization.enable_gradient_checkpointing",
        "optimization.optimizer_type",
        "acceleration.quantization",
        None,  # fewer frames: needs re-preprocessing, not a config diff
        None,  # lower resolution: same
        "validation.video_dims",
    ]
    assert failure.fix[0] == FixStep("optimization.batch_size", 1, failure.fix[0].reason)
    assert failure.fix[1] == FixStep("optimization.gradient_accumulation_steps", 2, failure.fix[1].reason)
    assert "frames" in failure.fix[5].reason.lower() and "resolution" in failure.fix[6].reason.lower()
    assert failure.config_changes[0].path == "optimization.batch_size"


def test_training_oom_fix_keeps_the_effective_batch_and_drops_satisfied_changes() -> None:
    config = {
        "model": {"training_mode": "full"},
        "optimization": {"batch_size": 4, "gradient_accumulation_steps": 2, "enable_gradient_checkpointing": True,
                         "optimizer_type": "adamw"},
        "validation": {"video_dims": [768, 512, 97]},
    }
    failure = classify_failure(1, None, _read("oom/training.log"), _read("oom/training.stderr"), config=config)
    changes = {step.path: step.value for step in failure.config_changes}
    assert changes["optimization.batch_size"] == 1
    assert changes["optimization.gradient_accumulation_steps"] == 8
    assert "optimization.enable_gradient_checkpointing" not in changes  # already on
    assert "acceleration.quantization" not in changes  # not supported in full mode
    width, height, frames = changes["validation.video_dims"]
    assert width % 32 == 0 and height % 32 == 0 and (frames - 1) % 8 == 0 and frames < 97


def test_validation_oom_fix_order() -> None:
    failure = classify_failure(1, None, _read("oom/validation_step0.log"), _read("oom/validation_step0.stderr"),
                               config={"validation": {"inference_steps": 40, "interval": 250}})
    assert [(s.path, s.value) for s in failure.config_changes] == [
        ("acceleration.offload_optimizer_during_validation", True),
        ("validation.video_dims", [480, 256, 41]),
        ("validation.inference_steps", 20),
        ("validation.interval", 500),
    ]


def test_text_encoder_caching_oom_puts_8bit_encoder_first() -> None:
    stderr = [
        "Traceback (most recent call last):",
        '  File "/x/ltx_trainer/validation_runner.py", line 90, in __init__',
        '  File "/x/ltx_trainer/validation_runner.py", line 300, in _cache_prompt_embeddings',
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.00 GiB.",
    ]
    failure = classify_failure(1, None, [], stderr)
    assert failure.kind == "oom_validation"
    assert failure.fix[0].path == "acceleration.load_text_encoder_in_8bit"


OOM = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB."


@pytest.mark.parametrize(("log", "initial_validation", "kind"), [
    ([_rich("🚀 Starting training..."), OOM], None, "oom_validation"),  # step-0 validation runs first
    ([_rich("🚀 Starting training..."), OOM], False, "oom_training"),
    ([_rich("🚀 Starting training..."), _rich("🎥 Validation samples for step 0 saved in samples"), OOM], None,
     "oom_training"),
    ([_rich("Step 100/900 - Loss: 0.1000, LR: 1.00e-04, Time/Step: 3.00s, Total Time: 1h 0m"),
      _rich("Offloading optimizer state to CPU (2.0 GB)"), OOM], None, "oom_validation"),
    ([_rich("Trainable params count: 1,000", level="DEBUG"), OOM], None, "oom_training"),  # still loading
])
def test_oom_phase_from_log_context(log: list[str], initial_validation: bool | None, kind: str) -> None:
    assert classify_failure(1, None, log, initial_validation=initial_validation).kind == kind


def test_config_error_field_paths() -> None:
    failure = classify_failure(1, None, _read("config_error.log"))
    assert failure.field_paths == ["optimization.learnin_rate", "validation.samples.0.video_dims",
                                   "checkpoints.keep_last_n"]
    assert failure.fix[0].path is None and "Extra inputs are not permitted" in failure.fix[0].reason


def test_model_level_config_error_has_no_field_path() -> None:
    lines = [
        "Error: Invalid configuration data: 1 validation error for LtxTrainerConfig",
        "  Value error, Audio training requires audio_vae_path [type=value_error, input_value={}, input_type=dict]",
        "    For further information visit https://errors.pydantic.dev/2.14/v/value_error",
    ]
    failure = classify_failure(1, None, lines)
    assert failure.kind == "config_error" and failure.field_paths == []
    assert "Audio training requires audio_vae_path" in failure.fix[0].reason


def test_shm_fix_and_sigbus() -> None:
    failure = classify_failure(1, None, [], _read("shm_bus_error.stderr"))
    assert failure.fix[0] == FixStep("data.num_dataloader_workers", 0, failure.fix[0].reason)
    assert failure.fix[1].path is None and "/dev/shm" in failure.fix[1].reason
    assert classify_failure(None, 7, []).kind == "shm_bus_error"


def test_nan_fix_order_and_learning_rate() -> None:
    failure = classify_failure(1, None, _read("nan_loss.log"))
    assert [s.path for s in failure.config_changes] == [
        "acceleration.mixed_precision_mode", "optimization.learning_rate", "acceleration.quantization",
        "optimization.max_grad_norm"]
    assert failure.config_changes[1].value == pytest.approx(2.5e-4)  # half the highest logged LR
    assert failure.config_changes[2].value is None
    configured = classify_failure(1, None, _read("nan_loss.log"), config={
        "optimization": {"learning_rate": 1e-4, "max_grad_norm": 1.0},
        "acceleration": {"mixed_precision_mode": "bf16", "quantization": None}})
    assert [(s.path, s.value) for s in configured.config_changes] == [("optimization.learning_rate", 5e-5)]


@pytest.mark.parametrize(("exit_code", "signal", "lines", "kind"), [
    # A bare SIGKILL: a user's kill -9 or the kernel's OOM killer, the log cannot tell (#33).
    (137, None, [], "killed"), (-9, None, [], "killed"), (None, 9, [], "killed"),
    (1, None, ["Killed"], "host_oom"),
    (1, None, ["RuntimeError: DataLoader worker (pid 9) is killed by signal: Killed."], "host_oom"),
])
def test_host_oom_signals(exit_code: int | None, signal: int | None, lines: list[str], kind: str) -> None:
    failure = classify_failure(exit_code, signal, lines)
    assert failure.kind == kind
    assert all(step.path is None for step in failure.fix)


def test_shared_memory_is_not_a_gpu_oom() -> None:
    failure = classify_failure(1, None, ["RuntimeError: workers are out of shared memory. Raise the shm limit."])
    assert failure.kind == "shm_bus_error"


def test_crash_without_traceback_uses_the_last_line() -> None:
    failure = classify_failure(1, None, [_rich("🚀 Starting training..."), "Segmentation fault (core dumped)"])
    assert failure.kind == "crash" and failure.evidence == "Segmentation fault (core dumped)"
