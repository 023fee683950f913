"""LogParser and TrainingProgress against the trainer's real log formats (Rich layout, wrapping)."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from ltx_pipeline.trainer_log import (
    CheckpointLoaded,
    CheckpointLoading,
    CheckpointRemoved,
    CheckpointSaved,
    ErrorSignal,
    GpuMemory,
    LogParser,
    OptimizerOffloaded,
    ResumeFallback,
    ResumingFrom,
    StepEvent,
    TrainingProgress,
    TrainingStarted,
    TrainingStateLoaded,
    TrainingStateSaved,
    TrainingStats,
    ValidationSaved,
    WandbRun,
    parse_lines,
)

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "trainer_logs"
LOC = "trainer.py:311"


def _lines(name: str) -> list[str]:
    return (FIXTURES / name).read_text(encoding="utf-8").splitlines()


def _rich(msg: str, level: str = "INFO", width: int = 160, loc: str = LOC) -> str:
    head = f"{level:<8} {msg}"
    return head + " " * max(1, width - len(head) - len(loc)) + loc + "  \n"


def _only(events: list, kind: type) -> list:
    return [e for e in events if isinstance(e, kind)]


def test_step_line_with_padding_and_location_is_parsed() -> None:
    line = _rich("Step 20/2000 - Loss: 0.1235, LR: 1.00e-04, Time/Step: 3.46s, Total Time: 2h 5m")
    assert parse_lines([line]) == [StepEvent(20, 2000, 0.1235, 1e-4, 3.46, 2 * 3600 + 5 * 60)]


def test_step_line_nan_loss_and_calculating() -> None:
    (event,) = parse_lines([_rich("Step 0/60 - Loss: nan, LR: 2.00e-04, Time/Step: 9.50s, Total Time: calculating...")])
    assert math.isnan(event.loss) and event.total_time_s is None and event.step == 0


@pytest.mark.parametrize("prefix", ["[rank 0] ", " "])
def test_rank_prefix_or_markup_eaten_rank_is_accepted(prefix: str) -> None:
    line = _rich(prefix + "Step 40/100 - Loss: 0.2000, LR: 1.00e-04, Time/Step: 1.00s, Total Time: 0h 2m")
    assert parse_lines([line])[0].step == 40


def test_unwrapped_step_is_emitted_without_waiting_for_the_next_line() -> None:
    parser = LogParser()
    events = parser.feed(_rich("Step 20/200 - Loss: 0.5000, LR: 1.00e-04, Time/Step: 3.00s, Total Time: 0h 10m"))
    assert [e.step for e in events] == [20]
    assert parser.flush() == []


def test_wrapped_step_is_rejoined_and_emitted_on_its_continuation_line() -> None:
    parser = LogParser()
    first = "INFO     Step 20/2000 - Loss: 0.1235, LR: 1.00e-04, Time/Step:    trainer.py:311\n"
    second = "         3.46s, Total Time: 2h 5m                                               \n"
    assert parser.feed(first) == []
    assert parser.feed(second) == [StepEvent(20, 2000, 0.1235, 1e-4, 3.46, 7500)]
    assert parser.flush() == []


def test_80_column_log_parses_to_the_same_events_as_the_wide_log() -> None:
    wide = parse_lines(_lines("happy_run.log"))
    narrow = parse_lines(_lines("happy_run_80col.log"))
    assert narrow == wide
    assert len(_only(wide, StepEvent)) == 10


def test_folded_long_path_is_rejoined_without_a_space() -> None:
    removed = _only(parse_lines(_lines("happy_run_80col.log")), CheckpointRemoved)
    assert removed[0].path == "/home/alice/ltx/outputs/my_concept_lora/checkpoints/lora_weights_step_00050.safetensors"


def test_wrap_at_a_word_boundary_keeps_the_space() -> None:
    events = parse_lines(_lines("resume_mismatch_80col.log"))
    fallbacks = _only(events, ResumeFallback)
    assert [f.kind for f in fallbacks] == ["config_mismatch", "checkpoint_not_found", "state_load_failed"]
    assert fallbacks[0].detail == "optimizer_type: adamw → adamw8bit, lora_rank: 32 → 16"
    assert fallbacks[1].detail == "/home/alice/ltx/outputs/empty"
    assert _only(events, TrainingStarted) == [TrainingStarted(0, None, False)]


def test_checkpoint_validation_and_state_lines() -> None:
    events = parse_lines([
        _rich("💾 Lora weights for step 100 saved in checkpoints/lora_weights_step_00100.safetensors"),
        _rich("💾 Model weights for step 100000 saved in checkpoints/model_weights_step_100000.safetensors"),
        _rich("Training state saved to checkpoints/training_state_step_00100.pt", level="DEBUG"),
        _rich("🎥 Validation samples for step 100 saved in samples", loc="validation_runner.py:612"),
        _rich("Offloading optimizer state to CPU (1.3 GB)"),
        _rich("GPU memory usage after models preparation: 41.27 GB", level="DEBUG"),
    ])
    assert events == [
        CheckpointSaved(100, "checkpoints/lora_weights_step_00100.safetensors", "lora"),
        CheckpointSaved(100000, "checkpoints/model_weights_step_100000.safetensors", "model"),
        TrainingStateSaved("checkpoints/training_state_step_00100.pt", 100),
        ValidationSaved(100, "samples"),
        OptimizerOffloaded(1.3),
        GpuMemory(41.27),
    ]


def test_resume_startup_sequence() -> None:
    events = parse_lines(_lines("resume.log"))
    assert events[:5] == [
        CheckpointLoading("/home/alice/ltx/outputs/my_concept_lora/checkpoints/lora_weights_step_00100.safetensors"),
        CheckpointLoaded("lora"),
        TrainingStateLoaded("/home/alice/ltx/outputs/my_concept_lora/checkpoints/training_state_step_00100.pt"),
        ResumingFrom(100),
        TrainingStarted(100, 200, True),
    ]


def test_happy_run_startup_counters_wandb_and_stats() -> None:
    events = parse_lines(_lines("happy_run.log"))
    assert {e.url for e in _only(events, WandbRun)} == {"https://wandb.ai/alice-lab/ltx-trainer/runs/k3v9x2ab"}
    assert _only(events, TrainingStats) == [TrainingStats(13.8, 0.24, 0.24, 61.42)]
    names = {type(e).__name__: e for e in events}
    assert names["TrainableParams"].count == 157_286_400
    assert names["DatasetLoaded"].samples == 48
    assert (names["SamplesSkipped"].skipped, names["SamplesSkipped"].total) == (2, 50)
    assert not _only(events, ErrorSignal)


def test_multi_process_stats_block() -> None:
    (stats,) = _only(parse_lines(_lines("grad_accum.log")), TrainingStats)
    assert (stats.num_processes, stats.global_batch_size, stats.samples_per_second) == (2, 2, 0.93)


def test_plain_printed_stats_block_is_collected() -> None:
    lines = ["📊 Training Statistics:", " - Total time: 1.5 minutes", " - Training speed: 0.55 steps/second",
             " - Samples/second: 0.55", " - Peak GPU memory: 20.00 GB", "done"]
    assert _only(parse_lines(lines), TrainingStats) == [TrainingStats(1.5, 0.55, 0.55, 20.0)]


@pytest.mark.parametrize(("line", "kind"), [
    ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.", "oom"),
    ("torch.OutOfMemoryError: reference trainer: simulated out of memory", "oom"),
    ("RuntimeError: CUDA error: CUBLAS_STATUS_ALLOC_FAILED when calling `cublasCreate(handle)`", "oom"),
    ("RuntimeError: DataLoader worker (pid 1) is killed by signal: Bus error.", "shm_bus_error"),
    ("ERROR: Unexpected bus error encountered in worker. This might be caused by insufficient shared memory (shm).",
     "shm_bus_error"),
    ("workers are out of shared memory", "shm_bus_error"),
    ("RuntimeError: DataLoader worker (pid 7) is killed by signal: Killed.", "worker_killed"),
    ("Error: Invalid configuration data: 1 validation error for LtxTrainerConfig", "config_error"),
    ("Traceback (most recent call last):", "traceback"),
    ("FileNotFoundError: Data root directory does not exist: /data", "missing_files"),
    ("MemoryError", "host_memory"),
])
def test_error_signatures(line: str, kind: str) -> None:
    assert _only(parse_lines([line]), ErrorSignal) == [ErrorSignal(kind, line)]


def test_ordinary_lines_carry_no_error_signal() -> None:
    assert parse_lines(["wandb: Syncing run my_concept_lora", "│   steps  │ 200 │", ""]) == []


def test_error_level_record_is_a_logged_error() -> None:
    (signal,) = parse_lines([_rich("❌ Failed to push to hub: 401", level="ERROR", loc="hf_hub_utils.py:80")])
    assert signal == ErrorSignal("logged_error", "❌ Failed to push to hub: 401")


def test_ansi_codes_and_carriage_return_redraws_are_ignored() -> None:
    line = "Training 1/5\rTraining 5/5\r\x1b[32mwandb\x1b[0m: 🚀 View run x at: https://wandb.ai/a/b/runs/c1."
    assert parse_lines([line]) == [WandbRun("https://wandb.ai/a/b/runs/c1")]


# -- TrainingProgress -------------------------------------------------------------------------------


def _progress(name: str, **kwargs: int) -> TrainingProgress:
    progress = TrainingProgress(**kwargs)
    progress.feed(parse_lines(_lines(name)))
    return progress


def test_progress_excludes_validation_and_checkpoint_steps_from_step_time() -> None:
    progress = _progress("happy_run.log")
    assert progress.last_step == 200 and progress.total_steps == 200
    assert 100 not in progress.step_times and 200 not in progress.step_times
    assert progress.clean_step_times() == [3.46, 3.41, 3.44, 3.39, 3.42, 3.40, 3.45, 3.43]
    assert progress.steady_step_time() == pytest.approx(3.42)
    assert progress.eta_seconds() == 0
    assert progress.last_losses(3) == [0.3015, 0.2876, 0.2811]
    assert progress.latest_checkpoint.path.endswith("step_00200.safetensors")
    assert progress.latest_validation.step == 200


def test_progress_deduplicates_gradient_accumulation_and_drops_start_step_time() -> None:
    progress = _progress("grad_accum.log")
    assert sorted(progress.losses) == [0, 20, 40, 60]
    assert progress.losses[20] == 0.3333 and progress.losses[40] == 0.3050  # last value per step wins
    assert 0 not in progress.step_times
    assert progress.step_times == {20: 4.11, 40: 4.07}


def test_eta_waits_for_two_clean_samples_then_uses_the_median() -> None:
    progress = TrainingProgress()
    step = "Step {}/1000 - Loss: 0.3000, LR: 1.00e-04, Time/Step: {:.2f}s, Total Time: 1h 0m"
    progress.feed(parse_lines([_rich("🚀 Starting training..."), _rich(step.format(20, 3.0))]))
    assert progress.eta_seconds() is None
    validation = _rich("🎥 Validation samples for step 40 saved in samples")
    progress.feed(parse_lines([validation, _rich(step.format(40, 60.0))]))
    assert progress.eta_seconds() is None  # the step-40 sample includes validation
    progress.feed(parse_lines([_rich(step.format(60, 4.0)), _rich(step.format(80, 3.5))]))
    assert progress.steady_step_time() == 3.5
    assert progress.eta_seconds() == pytest.approx((1000 - 80) * 3.5)
    assert progress.percent == pytest.approx(8.0)


def test_configured_intervals_mark_steps_contaminated_without_their_events() -> None:
    progress = TrainingProgress(validation_interval=50, checkpoint_interval=60)
    step = "Step {}/1000 - Loss: 0.3000, LR: 1.00e-04, Time/Step: 3.00s, Total Time: 1h 0m"
    progress.feed(parse_lines([_rich(step.format(n)) for n in (20, 40, 60, 80, 100)]))
    assert sorted(progress.step_times) == [20, 40, 80]


def test_resumed_start_step_is_not_a_clean_sample() -> None:
    progress = _progress("resume.log")
    assert progress.resumed and progress.start_step == 100
    assert sorted(progress.step_times) == [120, 140, 160]
    assert progress.eta_seconds() == pytest.approx(40 * 3.49)


def test_nan_is_flagged() -> None:
    assert _progress("nan_loss.log").has_nan
    assert not _progress("happy_run.log").has_nan
