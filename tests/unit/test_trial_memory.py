"""Where each autotune memory figure comes from, and what a figure nobody measured looks like.

Issue 19 case 4: on the reference backend without a memory scale every trial reported ``peak 0.0 GB``
and every config "fit"; on an assumed GPU the validation peak was '-' and still judged fit; a fake
card's 1 MiB reading read ``0.0 GB validation``. These drive ``_peaks.trial_peaks`` and the outcome classification
with the inputs each backend really leaves (``reference_memory.json``, ``simulated_cost.json``, the
sampler's readings), then the real ``SweepPlanner`` and the real reports.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from types import SimpleNamespace

import pytest

from ltx_pipeline.autotune._peaks import REFERENCE_UNMEASURED, UNMEASURED, TrialMemory, trial_peaks
from ltx_pipeline.autotune._report import render_log, render_markdown, trial_line
from ltx_pipeline.autotune._trial import _clean_end, whole_words
from ltx_pipeline.autotune.vram_sampler import IDLE_MIB, ResourceSampler, nvidia_smi_reader
from ltx_pipeline.ltx.autotune import SweepPlanner, search_space
from ltx_pipeline.reports.memory_figures import format_gb
from ltx_pipeline.trainer_log import TrainingProgress

GIB = 1024**3
STD = {"quantization": None, "optimizer_type": "adamw", "batch_size": 1, "enable_gradient_checkpointing": True}
OFF = {**STD, "enable_gradient_checkpointing": False}
ZERO = re.compile(r"\b0\.0+ Gi?B|\| 0\.0+ \|")


def reference_report(folder: Path, training: int, validation: int, *, scale: float = 1.0,
                     status: str = "completed") -> Path:
    """What the reference trainer writes at exit (its accounting, already times ``scale``)."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "reference_memory.json").write_text(json.dumps(
        {"status": status, "device": "cpu", "scale": scale, "capacity_bytes": None,
         "peak_bytes": {"training": training, "validation": validation}}))
    return folder


def context(tmp_path: Path, backend: str) -> SimpleNamespace:
    return SimpleNamespace(workspace=tmp_path, request=SimpleNamespace(backend=backend))


def finish(tmp_path: Path, backend: str, knobs: dict, memory: TrialMemory, step_time: float | None = 0.5,
           number: int = 1) -> tuple:
    """Classify a clean end as ``run_trial`` does and build the phase's record of it."""
    folder = tmp_path / f"trial-{number:03d}"
    folder.mkdir(parents=True, exist_ok=True)
    done = _clean_end(context(tmp_path, backend), folder, dict(knobs), step_time, memory, 0.4, folder / "train.log")
    return done, folder


def record(planner: SweepPlanner, done, number: int) -> dict:
    """The record the autotune phase keeps for a trial (phases/autotune.py ``_record``)."""
    r = done.result
    fits = planner.fits(r)
    return {"number": number, "knobs": dict(r.knobs), "outcome": r.outcome, "state": "complete" if fits else "fail",
            "fits": fits, "step_time_s": r.step_time_s, "peak_vram_gb": r.peak_vram_gb,
            "validation_peak_vram_gb": r.validation_peak_vram_gb, "seconds": r.seconds, "reason": r.reason,
            "host_ram_gb": done.host_ram_gb, "log": done.log, "objective": planner.objective(r) if fits else None}


def outputs(planner: SweepPlanner, trials: list[dict]) -> dict:
    winner = planner.winner() if planner.best() else None
    return {"study": "r1-autotune", "storage": "optuna.db", "capacity_gb": 79.6, "headroom": 0.05,
            "limit_gb": planner.limit_gb, "per_gpu_batch": 1, "processes": 1, "effective_batch": 1, "trials": trials,
            "pruned": [{"knobs": p.knobs, "reason": p.reason} for p in planner.pruned], "winner": winner,
            "deltas": {}, "objective": planner.objective(planner.best()) if planner.best() else None}


def test_the_reference_backend_without_a_memory_scale_measures_no_memory(tmp_path) -> None:
    # The toy's own bytes on the CPU: a few MiB, which used to read as "peak 0.0 GB" and fit anything.
    out = reference_report(tmp_path / "out", training=3 * 1024**2, validation=2 * 1024**2)
    memory = trial_peaks("reference", out, TrainingProgress(7), ResourceSampler(), 12.0, scale=None)
    assert memory.training.gb is None and memory.validation.gb is None
    assert memory.training.source is None and memory.training.missing == REFERENCE_UNMEASURED
    assert memory.assumed_fit and memory.note == REFERENCE_UNMEASURED


def test_the_reference_backend_with_a_memory_scale_names_its_accounting(tmp_path) -> None:
    out = reference_report(tmp_path / "out", training=26 * GIB, validation=19 * GIB, scale=22500.0)
    memory = trial_peaks("reference", out, TrainingProgress(7), ResourceSampler(), 30.0, scale=22500.0)
    assert memory.training.gb == 26.0 and memory.validation.gb == 19.0
    assert memory.training.source == memory.validation.source == "reference trainer accounting (scaled x 22500)"
    assert not memory.assumed_fit
    # A run that did not complete counted nothing usable: not measured, never 0.0.
    failed = reference_report(tmp_path / "failed", 26 * GIB, 0, scale=22500.0, status="out of memory during training")
    memory = trial_peaks("reference", failed, TrainingProgress(7), ResourceSampler(), 30.0, scale=22500.0)
    assert memory.training.gb is None and "out of memory during training" in memory.training.missing


def test_a_reference_sweep_without_a_scale_is_judged_on_step_time_only_and_says_so(tmp_path) -> None:
    space = search_space("standard", 1, False, STD)
    planner = SweepPlanner(space, space[0], capacity_gb=79.6, per_gpu_batch=1)
    trials = []
    # Checkpointing off is faster and, in the toy's own bytes, hungrier: the old 0.0 GB reading made it "fit".
    for number, (knobs, step, raw) in enumerate([(STD, 0.50, 3), (OFF, 0.40, 5)], start=1):
        out = reference_report(tmp_path / f"out-{number}", training=raw * 1024**2, validation=2 * 1024**2)
        memory = trial_peaks("reference", out, TrainingProgress(7), ResourceSampler(), 12.0, scale=None)
        done, _ = finish(tmp_path, "reference", knobs, memory, step, number)
        planner.record(done.result)
        trials.append(record(planner, done, number))
    for t in trials:
        assert t["outcome"] == "fit" and t["fits"] is True
        assert t["peak_vram_gb"] is None and t["validation_peak_vram_gb"] is None
        assert REFERENCE_UNMEASURED in t["reason"] and "judged on step time only" in t["reason"]
    assert planner.winner()["enable_gradient_checkpointing"] is False  # the faster one: by step time alone
    report = outputs(planner, trials)
    markdown, log = render_markdown(report), render_log(report)
    assert not ZERO.search(markdown) and not ZERO.search(log) and "peak 0.0" not in log
    assert "**Memory was not measured**" in markdown and REFERENCE_UNMEASURED in markdown
    assert "**Winner** (chosen on step time only: memory was not measured)" in markdown
    assert "| fit (assumed: memory not measured) |" in markdown
    assert "chosen on step time only: memory not measured" in log.splitlines()[-1]
    assert "training peak not measured, validation peak not measured" in trial_line(trials[0])
    saved = json.loads((tmp_path / "trial-001" / "memory.json").read_text())
    assert saved["assumed_fit"] is True and saved["judged_on"] == "step time only (memory not measured)"
    assert saved["peak_vram_gb"] is None and saved["peak_source"] is None


def test_a_fake_cards_1_mib_reading_is_not_a_measurement(tmp_path, fake_smi) -> None:
    sampler = ResourceSampler(nvidia_smi_reader(fake_smi("0, 1\n"), [0]), reader_name="nvidia-smi")
    sampler.sample()  # the step-0 validation, as the fake card reports it
    sampler.set_label("training")
    sampler.sample()
    assert sampler.peak_gb("validation") is None and sampler.peak_gb("training") is None
    assert sampler.idle_samples == {"validation": 1, "training": 1}
    memory = trial_peaks("ltx", tmp_path, TrainingProgress(41), sampler, 20.0)
    assert memory.validation.gb is None and "idle card" in memory.validation.missing
    space = search_space("standard", 1, False, STD)
    planner = SweepPlanner(space, space[0], capacity_gb=79.6, per_gpu_batch=1)
    done, _ = finish(tmp_path, "ltx", STD, memory)
    planner.record(done.result)
    trial = record(planner, done, 1)
    assert trial["outcome"] == UNMEASURED and trial["fits"] is False and planner.best() is None
    assert "validation peak not measured" in trial["reason"] and "cannot be judged to fit" in trial["reason"]
    assert done.failure_kind == "memory_not_measured" and "pynvml" in done.fixes[0]["reason"]
    # The baseline's failure words never quote a partial peak against the limit.
    assert all("reported no peak memory" in p.reason for p in planner.pruned)
    markdown = render_markdown(outputs(planner, [trial]), failure="the baseline failed")
    assert "0.0 GiB" not in markdown and "| not measured |" in markdown
    assert "validation peak not measured" in trial_line(trial)


def test_a_validation_peak_the_sampler_missed_makes_a_trial_unmeasured_not_fit(tmp_path) -> None:
    readings = iter([{0: 1.0}, {0: 30000.0}])  # idle through validation, then training on the card
    sampler = ResourceSampler(lambda: next(readings), reader_name="nvml")
    sampler.sample()
    sampler.set_label("training")
    sampler.sample()
    memory = trial_peaks("ltx", tmp_path, TrainingProgress(41), sampler, 20.0)
    assert memory.training.gb == pytest.approx(30000 / 1024) and memory.training.source == "vram sampler (nvml)"
    space = search_space("standard", 1, False, STD)
    planner = SweepPlanner(space, space[0], capacity_gb=79.6, per_gpu_batch=1)
    done, _ = finish(tmp_path, "ltx", STD, memory)
    planner.record(done.result)
    assert done.result.outcome == UNMEASURED and not planner.fits(done.result)
    assert done.result.peak_vram_gb == pytest.approx(30000 / 1024)  # what was measured is kept, with its source
    assert done.result.peak_source == "vram sampler (nvml)" and done.result.validation_peak_source is None
    line = trial_line(record(planner, done, 1))
    assert "training peak 29.3 GiB (vram sampler (nvml))" in line and "validation peak not measured" in line


def test_a_measured_ltx_trial_fits_with_each_source_named(tmp_path) -> None:
    readings = iter([{0: 20000.0}, {0: 25000.0}])
    sampler = ResourceSampler(lambda: next(readings), reader_name="nvidia-smi")
    sampler.sample()
    sampler.set_label("training")
    sampler.sample()
    memory = trial_peaks("ltx", tmp_path, TrainingProgress(41), sampler, 20.0)
    space = search_space("standard", 1, False, STD)
    planner = SweepPlanner(space, space[0], capacity_gb=79.6, per_gpu_batch=1)
    done, _ = finish(tmp_path, "ltx", STD, memory)
    planner.record(done.result)
    trial = record(planner, done, 1)
    assert trial["outcome"] == "fit" and trial["fits"] and planner.winner()["batch_size"] == 1
    markdown = render_markdown(outputs(planner, [trial]))
    assert "| 24.4 GiB | vram sampler (nvidia-smi) | 19.5 GiB | vram sampler (nvidia-smi) |" in markdown
    assert "`vram sampler (nvidia-smi)`: the engine's own sampling" in markdown
    assert "Memory was not measured" not in markdown and "step time only" not in markdown


def test_a_simulated_point_without_a_validation_figure_validates_at_its_training_peak(tmp_path) -> None:
    (tmp_path / "simulated_cost.json").write_text(json.dumps(
        {"gpu_seconds": 99.0, "peak_vram_gb": 26.0, "validation_peak_vram_gb": None}))
    memory = trial_peaks("simulated", tmp_path, TrainingProgress(41), ResourceSampler(), 1.0)
    assert memory.training.gb == memory.validation.gb == 26.0 and memory.seconds == 99.0
    assert memory.training.source == "simulated cost surface"
    assert memory.validation.source.startswith("simulated cost surface (the training peak")


def test_small_figures_never_read_as_zero_and_missing_ones_read_not_measured() -> None:
    assert format_gb(None) == "not measured" and format_gb(0.0) == "not measured"
    assert format_gb(IDLE_MIB / 1024 / 10) == "3.2 MiB" and format_gb(0.04) == "0.04 GiB"
    assert format_gb(26.04) == "26.0 GiB"


def test_a_long_failure_reason_is_kept_whole_or_cut_between_words() -> None:
    oom = ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 0.09 GiB. GPU 0 has a total capacity of "
           "32.00 GiB of which 0.05 GiB is free. Of the allocated memory 32.04 GiB is allocated by PyTorch. "
           "(reference trainer, simulated device: LTX_REFERENCE_DEVICE_CAPACITY_MIB=32768, out of memory during "
           "training)")
    assert len(oom) > 300 and whole_words(oom + "\nTraceback follows") == oom  # the old cut: "... during tr"
    long = " ".join(["word"] * 400)
    cut = whole_words(long, limit=50)
    assert cut.endswith(" …") and all(w == "word" for w in cut[:-2].split())
