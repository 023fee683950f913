"""The log parser, progress and summary on logs the real trainer wrote (tests/fixtures/trainer_logs/real)."""

from __future__ import annotations

from pathlib import Path

from ltx_pipeline.trainer_log import (
    CheckpointSaved,
    DatasetLoaded,
    ErrorSignal,
    StepEvent,
    TrainingStats,
    ValidationSaved,
    parse_lines,
)
from ltx_pipeline.training.follow import log_summary

REAL = Path(__file__).resolve().parents[2] / "fixtures" / "trainer_logs" / "real"


def _events(name: str) -> list[object]:
    return list(parse_lines((REAL / name).read_text(encoding="utf-8", errors="replace").splitlines()))


def test_the_real_step_line_is_read() -> None:
    steps = [e for e in _events("cpu_tiny_20_steps.log") if isinstance(e, StepEvent)]
    assert [(s.step, s.total) for s in steps] == [(20, 20)]
    assert steps[0].loss > 0 and steps[0].step_time > 0


def test_checkpoints_validations_and_statistics_of_a_run_without_step_lines() -> None:
    events = _events("cpu_tiny_8_steps.log")
    assert [e.step for e in events if isinstance(e, ValidationSaved)] == [0, 4, 8]
    assert [e.step for e in events if isinstance(e, CheckpointSaved)] == [4, 8, 8]  # the final save is logged twice
    assert [e.samples for e in events if isinstance(e, DatasetLoaded)] == [4]
    stats = [e for e in events if isinstance(e, TrainingStats)]
    assert len(stats) == 1 and stats[0].steps_per_second > 0 and stats[0].peak_gpu_memory_gb == 0.0
    assert not [e for e in events if isinstance(e, StepEvent)]


def test_the_cpu_only_nvidia_smi_error_line_is_no_failure_signal() -> None:
    for name in ("cpu_tiny_8_steps.log", "cpu_tiny_20_steps.log"):
        assert "Failed to get GPU memory from nvidia-smi" in (REAL / name).read_text(errors="replace")
        assert not [e for e in _events(name) if isinstance(e, ErrorSignal)], name


def test_the_summary_takes_the_step_from_checkpoint_lines_when_no_step_line_was_logged() -> None:
    summary = log_summary(REAL / "cpu_tiny_8_steps.log")
    assert summary["step"] == 8 and summary["step_source"] == "checkpoint and validation lines"
    assert summary["finished"] and summary["steps_per_second"] > 0
    assert log_summary(REAL / "cpu_tiny_20_steps.log")["step_source"] == "Step lines"
