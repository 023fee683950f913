"""Outputs that tell the truth (#33, item 5): each text or plot a user reads says what happened, never more.

Each test fails on the code before the fix: a finished run's status said an interrupted attempt "will re-run";
``loss.png`` was an empty frame for one logged loss (or none) and had no resume marks; ``autotune.png`` drew
out-of-memory trials at 0 s and unmeasured trials at the capacity line; ``run-summary.md`` called the toy's
scaled bytes the trainer's statistic and sent its LoRA to the LTX-2 pipeline; a bare SIGKILL was diagnosed as
host out-of-memory; and (fixed before, pinned here) a reference run's findings listed ``uv``.

The plots are checked on the figure each public function saved (a spy on ``Figure.savefig``), so nothing
private is called and what is checked is what went into the PNG.
"""

from __future__ import annotations

import json
import signal
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from ltx_pipeline.cli import main
from ltx_pipeline.reports.summary import plot_loss, plot_step_time, render_summary
from ltx_pipeline.trainer_log import FAILURE_KINDS, classify_failure
from tests.phases.train_helpers import training_registered  # noqa: F401 - fixture

# -- helpers ---------------------------------------------------------------------------------------



def _texts(fig: Any) -> list[str]:
    return [t.get_text() for ax in fig.axes for t in ax.texts] + [ax.get_title() for ax in fig.axes]


def _visible_marker(line: Any) -> bool:
    return line.get_marker() not in (None, "None", "", " ") and line.get_markersize() > 0


def _point(step: int, loss: float | None, stage: int = 1) -> dict[str, Any]:
    return {"stage": stage, "step": step, "loss": loss, "step_time_s": 1.5, "clean": True}


# -- status: an interrupted attempt of a finished run -----------------------------------------------


def _interrupted_then(workspace: Path, *, rerun: bool) -> None:
    """A run whose train attempt 1 was left running by a dead driver (the store's own interrupt record)."""
    from ltx_pipeline.store import Store

    store = Store.open(workspace / "ltx-pipeline.db")
    run = store.create_run("r1", {"backend": "reference"})
    first = store.begin_phase(run.id, "train", reason="new", fingerprint="sha256:a", parts={}, run_state="train")
    assert first.attempt == 1
    assert store.interrupt_running(run.id) == ["train"]
    store.record_event(run.id, "train was interrupted last time; it runs again (what it launched and is still "
                       "alive is re-attached, never launched twice)", phase="train", level="warning")
    if rerun:
        second = store.begin_phase(run.id, "train", reason="interrupted", fingerprint="sha256:a", parts={},
                                   run_state="train")
        store.finish_phase(second.id, status="succeeded", run_state="finished", summary="trained")


def _status(workspace: Path, capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
    capsys.readouterr()
    assert main(["status", "--workspace", str(workspace), "--run", "r1", "--json"]) == 0
    return json.loads(capsys.readouterr().out)["runs"][0]


def test_a_finished_runs_status_tells_what_became_of_an_interrupted_attempt(workspace, capsys) -> None:
    _interrupted_then(workspace, rerun=True)
    run = _status(workspace, capsys)
    assert run["state"] == "finished" and run["next_command"] is None
    assert not any("will re-run" in w or "runs again" in w for w in run["warnings"]), run["warnings"]
    assert "train attempt 1 was interrupted; it was re-run, and attempt 2 finished" in run["warnings"]


def test_an_interrupted_attempt_not_yet_rerun_still_says_it_will_rerun(workspace, capsys) -> None:
    _interrupted_then(workspace, rerun=False)
    run = _status(workspace, capsys)
    assert "train attempt 1 was interrupted; it will re-run" in run["warnings"]
    assert run["next_command"] and "resume" in run["next_command"]


# -- loss.png and step_time.png ---------------------------------------------------------------------


def test_one_logged_loss_is_drawn_as_a_visible_point(tmp_path, saved_figures) -> None:
    path = plot_loss([_point(20, 0.5)], tmp_path / "loss.png", workspace=tmp_path, checkpoint_steps=[20])
    assert path.read_bytes()[:4] == b"\x89PNG"
    [fig] = saved_figures
    [loss] = [line for line in fig.axes[0].lines if line.get_label() == "stage 1 loss"]
    assert list(loss.get_xdata()) == [20] and list(loss.get_ydata()) == [0.5]
    assert _visible_marker(loss) and loss.get_alpha() in (None, 1.0)


def test_no_logged_loss_says_so_in_the_image(tmp_path, saved_figures) -> None:
    plot_loss([_point(20, None)], tmp_path / "loss.png", workspace=tmp_path)
    plot_step_time([], tmp_path / "step_time.png", workspace=tmp_path)
    loss_fig, step_fig = saved_figures
    assert "no loss logged" in _texts(loss_fig)
    assert "no step time logged" in _texts(step_fig)


def test_resumes_are_marked_on_the_loss_and_step_time_plots(tmp_path, saved_figures) -> None:
    metrics = [_point(step, 1 / step) for step in range(20, 201, 20)]
    plot_loss(metrics, tmp_path / "loss.png", workspace=tmp_path, checkpoint_steps=[100, 200], resumes=[(1, 100)])
    plot_step_time(metrics, tmp_path / "step_time.png", workspace=tmp_path, resumes=[(1, 100)])
    for fig in saved_figures:
        [mark] = [line for line in fig.axes[0].lines if line.get_label() == "resumed"]
        assert list(mark.get_xdata()) == [100, 100]
        assert "resumed at step 100" in _texts(fig)


# -- autotune.png ------------------------------------------------------------------------------------


KNOBS = {"quantization": None, "optimizer_type": "adamw", "batch_size": 1, "gradient_accumulation_steps": 1,
         "enable_gradient_checkpointing": True}


def _trial(number: int, outcome: str, step: float | None, peak: float | None, **extra: Any) -> dict[str, Any]:
    return {"number": number, "knobs": {**KNOBS, "batch_size": number + 1}, "outcome": outcome,
            "fits": outcome == "fit", "step_time_s": step,
            "peak_vram_gb": peak, "validation_peak_vram_gb": peak, "peak_source": "vram sampler" if peak else None,
            "validation_peak_source": "vram sampler" if peak else None, "seconds": 60.0, **extra}


SWEEP = {"study": "r1-autotune", "storage": "optuna.db", "capacity_gb": 80.0, "limit_gb": 72.0, "headroom": 0.1,
         "per_gpu_batch": 1, "processes": 1, "effective_batch": 1, "winner": KNOBS, "deltas": {}, "objective": 2.1,
         "pruned": [], "trials": [
             _trial(0, "fit", 2.1, 60.0),
             _trial(1, "oom_training", None, None),
             _trial(2, "unmeasured", 1.8, None),
             _trial(3, "over_headroom", 1.5, 77.5),
             _trial(4, "oom_validation", None, None)]}


def _plotted(fig: Any) -> list[tuple[float, float]]:
    """Every (x, y) drawn as a marker on the memory axes (the first axes)."""
    return [tuple(xy) for c in fig.axes[0].collections for xy in c.get_offsets()]


def test_autotune_plot_never_draws_a_failed_trial_at_0_s_nor_an_unmeasured_one_on_the_memory_axis(
        tmp_path, saved_figures) -> None:
    from ltx_pipeline.autotune._report import write_reports

    write_reports(tmp_path, tmp_path, SWEEP)
    [fig] = saved_figures
    assert sorted(_plotted(fig)) == [(60.0, 2.1), (77.5, 1.5)]  # only trials with a peak and a step time
    main_labels = [t.get_text() for t in fig.axes[0].texts]
    assert not any(label.startswith(("1:", "2:", "4:")) for label in main_labels), main_labels
    texts = "\n".join(_texts(fig))
    assert "1: oom_training" in texts and "4: oom_validation" in texts  # failed: named in a row of their own
    assert "memory not measured" in texts and "2: unmeasured, 1.80 s" in texts  # listed in the note


def test_autotune_plot_without_any_memory_figure_shows_step_times_by_trial(tmp_path, saved_figures) -> None:
    from ltx_pipeline.autotune._report import write_reports

    note = "memory not measured on the reference backend without `reference_memory_scale` in run.yaml"
    trials = [_trial(i, "fit", 0.5 + i / 10, None, assumed_fit=True, memory_note=note) for i in range(3)]
    write_reports(tmp_path, tmp_path, {**SWEEP, "trials": trials})
    [fig] = saved_figures
    assert sorted(_plotted(fig)) == [(0.0, 0.5), (1.0, 0.6), (2.0, 0.7)]  # trial number, step time
    assert fig.axes[0].get_xlabel() == "trial" and note in fig.axes[0].get_title()
    assert not [line for line in fig.axes[0].lines if line.get_label() == "capacity"]


# -- run-summary.md for the toy backends ----------------------------------------------------------------


def _facts(tmp_path: Path, backend: str, **request: Any) -> dict[str, Any]:
    config = tmp_path / "config.yaml"
    config.write_text("seed: 42\n")
    stage = {"stage": 1, "final_step": 60, "final_checkpoint": str(tmp_path / "lora_weights_step_00060.safetensors"),
             "step_time_s": 0.4, "steps_per_second": 2.0, "peak_gpu_memory_gb": 61.3, "on_gpu": True,
             "logged_steps": 3, "config": str(config), "launch": "python -m trainer config.yaml"}
    return {"run": "r1", "run_root": str(tmp_path), "gpus": "NVIDIA H100 80GB HBM3 (81559 MiB) (assumed)",
            "request": {"backend": backend, "mode": "t2v", "dataset": "d.json", **request}, "mode_title": "t2v",
            "samples": 3, "data_stages": [{"buckets": "64x64x17"}], "stages": [stage], "seed": 42,
            "model_path": "m", "text_encoder_path": "t", "trainer_commit": None}


def test_the_reference_summary_says_what_the_toy_is(tmp_path) -> None:
    text = render_summary(_facts(tmp_path, "reference", reference_memory_scale=2000.0))
    assert "LTX-2 inference pipeline" not in text and "trainer's closing `Peak GPU memory` statistic" not in text
    assert "toy model only: it loads in no LTX-2 pipeline" in text
    assert "times `reference_memory_scale` 2000" in text and "NVIDIA H100 80GB HBM3" in text
    assert "not a measurement of LTX-2" in text and "Peak memory (toy, scaled)" in text
    unscaled = render_summary(_facts(tmp_path, "reference"))
    assert "unscaled (no `reference_memory_scale` in run.yaml)" in unscaled


def test_the_simulated_summary_says_nothing_was_trained_or_measured(tmp_path) -> None:
    text = render_summary(_facts(tmp_path, "simulated", surface="h100.yaml"))
    assert "LTX-2 inference pipeline" not in text and "trainer's closing `Peak GPU memory` statistic" not in text
    assert "placeholder" in text and "nothing to load" in text
    assert "cost surface's figures for this config (`h100.yaml`)" in text


def test_the_ltx_summary_keeps_the_trainers_own_words(tmp_path) -> None:
    text = render_summary(_facts(tmp_path, "ltx"))
    assert "as a LoRA in the LTX-2 inference pipeline" in text and "`Peak GPU memory` statistic" in text


# -- a bare SIGKILL ------------------------------------------------------------------------------------


@pytest.mark.parametrize(("exit_code", "sig"), [(137, None), (-9, None), (None, 9), (137, 9)])
def test_a_bare_sigkill_is_killed_by_someone_not_host_oom(exit_code, sig) -> None:
    tail = ['INFO     Quantizing model with "int8-quanto". This may take a while...']
    failure = classify_failure(exit_code, sig, tail)
    assert failure.kind == "killed" and "killed" in FAILURE_KINDS
    assert failure.evidence.startswith("killed (SIGKILL): by a user, or the kernel's OOM killer")
    advice = " ".join(step.reason for step in failure.fix)
    assert "dmesg" in advice and "journalctl -k" in advice and all(step.path is None for step in failure.fix)


@pytest.mark.parametrize("line", ["Killed", "RuntimeError: DataLoader worker (pid 9) is killed by signal: Killed.",
                                  "MemoryError"])
def test_evidence_of_host_memory_stays_host_oom(line) -> None:
    assert classify_failure(137, 9, [line]).kind == "host_oom"


# -- probe findings: no uv row where nothing uses uv ------------------------------------------------------


@pytest.mark.parametrize("backend", ["reference", "simulated"])
def test_a_toy_runs_findings_have_no_uv_row(workspace, tmp_path, fake_smi, monkeypatch, capsys, backend) -> None:
    import phases
    from tests.conftest import H100_SMI
    from tests.phases.train_helpers import SURFACE, clips

    monkeypatch.setenv("PATH", str(tmp_path / "empty-bin"))  # no uv anywhere on PATH
    monkeypatch.setattr(phases, "PHASES", tuple(p for p in phases.PHASES if p.name == "probe"))
    extra = ["--surface", str(SURFACE)] if backend == "simulated" else ["--nvidia-smi", fake_smi(H100_SMI)]
    code = main(["run", "--workspace", str(workspace), "--run", "r1", "--dataset", str(clips(tmp_path / "data", 1)),
                 "--backend", backend, *extra])
    assert code == 0, capsys.readouterr().err
    findings = _status(workspace, capsys)["findings"]
    assert findings and "Host RAM" in {f["item"] for f in findings}
    assert "uv" not in {f["item"] for f in findings}, findings


# -- a user's kill -9 of a followed trainer, then resume: diagnosed as killed, the resume marked on loss.png ---


def _kill_trainer_after(log: Path, step: int, done: threading.Event) -> None:
    import psutil

    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not done.is_set():
        text = log.read_text(errors="replace") if log.exists() else ""
        if f"Step {step}/" in text:
            for child in psutil.Process().children(recursive=True):
                if "simulated_trainer" in " ".join(child.cmdline()):
                    child.send_signal(signal.SIGKILL)
                    return
        time.sleep(0.02)


@pytest.mark.long  # 11 s per run on a 2-core box (2026-12-07): the default suite stays under 6 min
@pytest.mark.slow  # 9 s: a CPU training of the toy model, killed and resumed; ordered first
@pytest.mark.usefixtures("training_registered")
def test_a_users_kill_9_is_killed_not_host_oom_and_the_resume_is_marked(workspace, tmp_path, monkeypatch,
                                                                        saved_figures) -> None:
    from tests.phases.train_helpers import clips, resume, simulated_args

    monkeypatch.setenv("LTX_SIMULATED_TIME_SCALE", "0.02")
    run = workspace / "r1"
    done = threading.Event()
    killer = threading.Thread(target=_kill_trainer_after, args=(run / "logs" / "train.log", 60, done), daemon=True)
    killer.start()
    try:
        code = main(simulated_args(workspace, clips(tmp_path / "data"), "--steps", "120",
                                   "--checkpoint-interval", "20"))
    finally:
        done.set()
        killer.join()
    assert code == 1
    report = (run / "failure.md").read_text()
    assert "class: **killed**" in report and "host_oom" not in report
    assert "by a user, or the kernel's OOM killer" in report and "dmesg" in report
    monkeypatch.setenv("LTX_SIMULATED_TIME_SCALE", "0")
    assert resume(workspace) == 0
    [loss] = [f for f in saved_figures if f.axes[0].get_title().startswith("Training loss")]
    [mark] = [line for line in loss.axes[0].lines if line.get_label() == "resumed"]
    step = int(mark.get_xdata()[0])
    assert 20 <= step <= 60 and step % 20 == 0 and f"resumed at step {step}" in _texts(loss)
