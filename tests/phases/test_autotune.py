"""The autotune phase end to end on the simulated backend: real trial subprocesses, a real Optuna study.

Each test writes a small cost surface, drives ``ltx-pipeline run --approve`` in-process (the phase
registry is extended with autotune when the lead has not registered it yet) and checks what a user
depends on: which configs ran, which were pruned and why, what won, what was patched and recorded.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

import phases
from ltx_pipeline.cli import main
from phases.autotune import PHASE as AUTOTUNE

REPO = Path(__file__).resolve().parents[2]
LOW = {"quantization": "int8-quanto", "optimizer_type": "adamw8bit", "batch_size": 1,
       "enable_gradient_checkpointing": True}
STD = {"quantization": None, "optimizer_type": "adamw", "batch_size": 1, "enable_gradient_checkpointing": True}
GPU_32 = {"name": "NVIDIA GeForce RTX 5090", "memory_mib": 32607}  # 31.8 GB, limit 30.3 GB at 5%
GPU_80 = {"name": "NVIDIA H100 80GB HBM3", "memory_mib": 81559}  # 79.6 GB


def point(base: dict, step: float, peak: float, val: float | None = None, **extra: Any) -> dict:
    return {"knobs": base, "step_time_s": step, "peak_vram_gb": peak, "validation_peak_vram_gb": val, **extra}


def knobs(base: dict, **change: Any) -> dict:
    return {**base, **change}


def with_autotune(registry: tuple) -> tuple:
    """The registry through autotune, which comes right after validate (training is not under test here)."""
    names = [p.name for p in registry]
    if "autotune" in names:
        return registry[: names.index("autotune") + 1]
    return (*registry[: names.index("validate") + 1], AUTOTUNE)


@pytest.fixture(autouse=True)
def registered(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(phases, "PHASES", with_autotune(phases.PHASES))
    monkeypatch.setenv("LTX_SIMULATED_TIME_SCALE", "0")


def write_surface(tmp_path: Path, gpu: dict, points: list[dict], name: str = "surface.yaml", **top: Any) -> Path:
    path = tmp_path / name
    path.write_text(yaml.safe_dump({"gpu": gpu, "load_time_s": 10, "validation_time_s": 5, **top,
                                    "points": points}, sort_keys=False))
    return path


def drive(workspace: Path, dataset: Path, surface: Path, *extra: str, capsys=None) -> tuple[int, str]:
    code = main(["run", "--workspace", str(workspace), "--run", "r1", "--dataset", str(dataset), "--backend",
                 "simulated", "--surface", str(surface), "--approve", *extra])
    err = capsys.readouterr().err if capsys is not None else ""
    return code, err


def outputs(workspace: Path, phase: str = "autotune") -> dict:
    from ltx_pipeline.store import Store

    store = Store.open(workspace / "ltx-pipeline.db")
    return store.latest_phase_runs(store.get_run("r1").id)[phase].outputs


def study_trials(workspace: Path, name: str = "r1-autotune") -> list:
    import optuna

    study = optuna.load_study(study_name=name, storage=f"sqlite:///{workspace / 'optuna.db'}")
    return study.get_trials(deepcopy=False)


def ran(out: dict) -> list[dict]:
    return [{k: t["knobs"][k] for k in LOW} for t in out["trials"]]


def test_low_vram_sweep_prunes_the_oom_up_set_and_patches_the_winner(tmp_path, workspace, clips_dataset, capsys):
    surface = write_surface(tmp_path, GPU_32, [
        point(LOW, 4.0, 26.0, 27.0),
        point(knobs(LOW, optimizer_type="adamw"), 3.8, 27.0, 27.0),
        # quantization off is not listed: it runs out of memory at its first training step.
    ])
    code, err = drive(workspace, clips_dataset, surface, capsys=capsys)
    assert code == 0, err
    out = outputs(workspace)
    tried = ran(out)
    assert tried[0] == LOW  # the baseline first
    assert knobs(LOW, quantization=None) in tried
    up_set = knobs(LOW, quantization=None, optimizer_type="adamw")
    assert up_set not in tried  # needs at least the memory of an OOM config: never run
    pruned = next(p for p in out["pruned"] if {k: p["knobs"][k] for k in LOW} == up_set)
    assert "ran out of memory in a training step" in pruned["reason"]
    oom = next(t for t in out["trials"] if t["knobs"]["quantization"] is None)
    assert oom["outcome"] == "oom_training" and oom["state"] == "fail"
    assert out["winner"]["optimizer_type"] == "adamw" and out["deltas"] == {"optimizer_type": "adamw"}
    assert out["objective"] == pytest.approx(3.8)
    config = yaml.safe_load((workspace / "r1" / "config.yaml").read_text())
    assert config["optimization"]["optimizer_type"] == "adamw"
    assert config["optimization"]["steps"] == outputs(workspace, "plan")["recipe"]["steps"]  # trial settings stay out
    assert [p["reason"] for p in out["patches"]] == ["autotune"]
    # The Optuna study records every trial with its state and reason, pruned configs included.
    states = {(t.params["quantization"], t.params["optimizer_type"]): (t.state.name, t.user_attrs.get("reason"))
              for t in study_trials(workspace)}
    assert states[("int8-quanto", "adamw")][0] == "COMPLETE"
    assert states[(None, "adamw8bit")][0] == "FAIL" and "out of memory" in states[(None, "adamw8bit")][1]
    assert states[(None, "adamw")][0] == "PRUNED"
    log = (workspace / "r1" / "autotune.log").read_text().splitlines()
    assert len(log) == len(out["trials"]) + len(out["pruned"]) + 1 and log[-1].startswith("winner:")
    assert "| pruned |" in (workspace / "r1" / "autotune.md").read_text()
    assert (workspace / "r1" / "autotune.png").read_bytes()[:4] == b"\x89PNG"
    trial_config = yaml.safe_load((workspace / "r1" / "overfit" / "trial-001" / "config.yaml").read_text())
    assert trial_config["checkpoints"]["interval"] is None
    assert trial_config["validation"]["interval"] > trial_config["optimization"]["steps"]
    assert trial_config["validation"]["video_dims"] == config["validation"]["video_dims"]


def test_standard_tier_varies_checkpointing_and_batch_and_carries_one_validation(tmp_path, workspace,
                                                                                 clips_dataset, capsys):
    surface = write_surface(tmp_path, GPU_80, [
        point(STD, 3.0, 60.0, 62.0),
        point(knobs(STD, batch_size=2), 2.9 * 2 ** 0.2, 66.0, 62.0),
        # checkpointing off is not listed: it runs out of memory in its first training step
    ])
    code, err = drive(workspace, clips_dataset, surface, "--effective-batch", "2", capsys=capsys)
    assert code == 0, err
    out = outputs(workspace)
    everything = [t["knobs"] for t in out["trials"]] + [p["knobs"] for p in out["pruned"]]
    assert {(k["quantization"], k["optimizer_type"]) for k in everything} == {(None, "adamw")}
    assert {(k["batch_size"], k["gradient_accumulation_steps"]) for k in everything} == {(1, 2), (2, 1)}
    assert len(everything) == 4  # checkpointing x batch {1, 2}
    off = next(t for t in out["trials"] if t["knobs"] == {**STD, "enable_gradient_checkpointing": False,
                                                           "gradient_accumulation_steps": 2})
    assert off["outcome"] == "oom_training"  # its validation was skipped: the OOM is the training step's
    # One validation pass for the whole sweep: the quantization never changes on this tier.
    later = [t for t in out["trials"] if t["knobs"]["enable_gradient_checkpointing"] is False
             or t["knobs"]["batch_size"] == 2]
    assert later and all(t["validation_peak_source"].startswith("carried from trial 1") for t in later
                         if t["validation_peak_vram_gb"] is not None)
    assert out["winner"]["batch_size"] == 2 and out["winner"]["enable_gradient_checkpointing"] is True


def test_a_validation_over_the_limit_rules_out_every_config_of_its_quantization(tmp_path, workspace,
                                                                                clips_dataset, capsys):
    gpu_48 = {"name": "NVIDIA RTX A6000", "memory_mib": 49140}  # 48.0 GB, limit 45.6 GB at 5%
    surface = write_surface(tmp_path, gpu_48, [
        point(LOW, 4.1, 25.7, 26.5), point(knobs(LOW, optimizer_type="adamw"), 4.0, 26.6, 26.5),
        point(knobs(LOW, quantization=None), 3.4, 40.0, 46.0),  # trains in memory; its validation does not
        point(knobs(LOW, quantization=None, optimizer_type="adamw"), 3.3, 41.0, 46.0),
    ])
    code, err = drive(workspace, clips_dataset, surface, capsys=capsys)
    assert code == 0, err
    out = outputs(workspace)
    unquantized = [t for t in out["trials"] if t["knobs"]["quantization"] is None]
    assert len(unquantized) == 1  # one run settles its quantization: the validation memory is the same
    settled = [p for p in out["pruned"] if p["knobs"]["quantization"] is None]
    assert settled and "same quantization" in settled[0]["reason"]
    assert out["winner"] == {**LOW, "optimizer_type": "adamw", "gradient_accumulation_steps": 1}


def test_nan_loss_and_headroom_rule_configs_out(tmp_path, workspace, clips_dataset, capsys):
    surface = write_surface(tmp_path, GPU_32, [
        point(LOW, 4.0, 26.0, 27.0),
        point(knobs(LOW, optimizer_type="adamw"), 3.0, 26.5, 27.0, loss_nan=True),  # fast but NaN
        point(knobs(LOW, quantization=None), 2.0, 30.9, 27.0),  # 97% of 31.8 GB: over the 5% headroom
    ])
    code, err = drive(workspace, clips_dataset, surface, capsys=capsys)
    assert code == 0, err
    out = outputs(workspace)
    by = {(t["knobs"]["quantization"], t["knobs"]["optimizer_type"]): t for t in out["trials"]}
    assert by[("int8-quanto", "adamw")]["outcome"] == "nan" and by[("int8-quanto", "adamw")]["state"] == "fail"
    assert by[(None, "adamw8bit")]["fits"] is False and by[(None, "adamw8bit")]["peak_vram_gb"] == 30.9
    assert out["winner"] == {**LOW, "gradient_accumulation_steps": 1} and out["deltas"] == {}
    # With 1% headroom the same measurement fits, and the faster config wins.
    code, err = drive(workspace, clips_dataset, surface, "--headroom", "0.01", capsys=capsys)
    assert code == 0, err
    assert outputs(workspace)["winner"]["quantization"] is None


@pytest.mark.parametrize(("baseline", "evidence", "fix"), [
    (point(LOW, 4.0, 26.0, 27.0, crash="CUDA error: an illegal memory access was encountered"),
     "illegal memory access", "cuda_launch_blocking=1"),  # a kernel fault's own advice (trainer_log._crash_causes)
    (point(LOW, 4.0, 26.0, 40.0), "out of memory", "validation"),
])
def test_a_failing_baseline_stops_the_run_with_its_fixes(tmp_path, workspace, clips_dataset, capsys, baseline,
                                                        evidence, fix):
    surface = write_surface(tmp_path, GPU_32, [baseline, point(knobs(LOW, optimizer_type="adamw"), 3.0, 26.0)])
    code, err = drive(workspace, clips_dataset, surface, capsys=capsys)
    assert code == 1, err
    assert "baseline" in err and evidence in err and fix in err.lower() and err.count("\n") == 1
    report = (workspace / "r1" / "autotune.md").read_text()
    assert "The baseline failed" in report and "Proposed fixes" in report
    assert [t.state.name for t in study_trials(workspace) if t.state.name != "PRUNED"] == ["FAIL"]
    assert not (workspace / "r1" / "overfit" / "trial-002").exists()  # no variant of a failing baseline
    config = yaml.safe_load((workspace / "r1" / "config.yaml").read_text())
    assert config["optimization"]["optimizer_type"] == "adamw8bit"  # nothing carried forward


def test_multi_bucket_plans_keep_batch_one(tmp_path, workspace, clips_dataset, capsys):
    surface = write_surface(tmp_path, GPU_32, [point(LOW, 4.0, 26.0, 27.0),
                                               point(knobs(LOW, optimizer_type="adamw"), 3.9, 26.5, 27.0),
                                               point(knobs(LOW, batch_size=2), 3.0, 28.0, 27.0)])
    code, err = drive(workspace, clips_dataset, surface, "--strategy", "mixed", "--buckets", "512x288x49;640x352x49",
                      "--effective-batch", "4", capsys=capsys)
    assert code == 0, err
    out = outputs(workspace)
    everything = [t["knobs"] for t in out["trials"]] + [p["knobs"] for p in out["pruned"]]
    assert {(k["batch_size"], k["gradient_accumulation_steps"]) for k in everything} == {(1, 4)}
    assert out["winner"]["batch_size"] == 1 and out["objective"] == pytest.approx(3.9 * 4)


def test_the_winner_is_patched_into_every_stage_of_a_chained_run(tmp_path, workspace, clips_dataset, capsys):
    surface = write_surface(tmp_path, GPU_32, [point(LOW, 4.0, 26.0, 27.0),
                                               point(knobs(LOW, optimizer_type="adamw"), 3.0, 26.5, 27.0)])
    code, err = drive(workspace, clips_dataset, surface, "--strategy", "chain", "--buckets", "512x288x49;960x544x49",
                      capsys=capsys)
    assert code == 0, err
    out = outputs(workspace)
    assert out["deltas"] == {"optimizer_type": "adamw"}
    for k in (1, 2):
        config = yaml.safe_load((workspace / "r1" / f"config.stage-{k}.yaml").read_text())
        assert config["optimization"]["optimizer_type"] == "adamw"
    assert sorted((p["stage"], p["reason"]) for p in out["patches"]) == [(1, "autotune"), (2, "autotune")]
    trial = yaml.safe_load((workspace / "r1" / "overfit" / "trial-001" / "config.yaml").read_text())
    assert trial["validation"]["video_dims"] == [960, 544, 49]  # the stage with the largest bucket
    assert trial["model"]["load_checkpoint"] is None


ENGINE = ("import sys, phases; from tests.phases.test_autotune import with_autotune; "
          "phases.PHASES = with_autotune(phases.PHASES); "
          "from ltx_pipeline.cli import main; sys.exit(main(sys.argv[1:]))")


@pytest.mark.long  # 16 s on 2 cores (2026-12-06): in the opt-in long suite, `-m long`
@pytest.mark.slow
def test_an_interrupted_sweep_resumes_without_rerunning_or_duplicating_trials(tmp_path, workspace, clips_dataset,
                                                                             capsys, monkeypatch):
    surface = write_surface(tmp_path, GPU_32, [point(LOW, 2.0, 26.0, 27.0),
                                               point(knobs(LOW, optimizer_type="adamw"), 1.9, 26.5, 27.0)],
                            load_time_s=100)
    env = {**os.environ, "LTX_SIMULATED_TIME_SCALE": "0.05", "PYTHONPATH": str(REPO)}  # a trial lasts ~10 s
    args = ["run", "--workspace", str(workspace), "--run", "r1", "--dataset", str(clips_dataset), "--backend",
            "simulated", "--surface", str(surface), "--approve"]
    engine = subprocess.Popen([sys.executable, "-c", ENGINE, *args], cwd=REPO, env=env,  # noqa: S603
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    second = workspace / "r1" / "overfit" / "trial-002" / "train.log"
    deadline = time.monotonic() + 60
    while not second.exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert second.exists(), "the second trial never started"
    time.sleep(0.5)
    engine.send_signal(signal.SIGKILL)
    engine.wait(timeout=10)
    from ltx_pipeline.store import Store

    store = Store.open(workspace / "ltx-pipeline.db")
    run_id = store.get_run("r1").id
    orphan = next(p for p in store.processes(run_id, "trial") if p.stage == 2)
    import psutil

    assert psutil.pid_exists(orphan.pid)  # the trial outlived its engine
    monkeypatch.setenv("LTX_SIMULATED_TIME_SCALE", "0")
    code = main(["resume", "--workspace", str(workspace), "--run", "r1"])
    assert code == 0, capsys.readouterr().err
    trials = study_trials(workspace)
    ran_trials = [t for t in trials if t.state.name != "PRUNED"]
    # baseline, the orphan, its one re-run, then quantization off (not on the surface: out of memory)
    assert [t.state.name for t in ran_trials] == ["COMPLETE", "FAIL", "COMPLETE", "FAIL"]
    assert ran_trials[1].user_attrs["reason"] == "orphaned: the engine stopped while it ran"
    assert ran_trials[2].params == ran_trials[1].params  # the orphaned config ran again, once
    assert sum(1 for t in ran_trials if t.params == ran_trials[0].params) == 1  # the baseline was not re-run
    processes = store.processes(run_id, "trial")
    assert sorted(p.stage for p in processes) == [1, 2, 3, 4]
    stopped = next(p for p in processes if p.stage == 2)
    from ltx_pipeline.engine.processes import is_alive

    assert stopped.status == "stopped" and not is_alive(stopped.pid, stopped.create_time, stopped.host)
    out = outputs(workspace)
    assert len(out["trials"]) == 3 and out["winner"]["optimizer_type"] == "adamw"


@pytest.mark.long  # 30 s on 2 cores (2026-12-06): in the opt-in long suite, `-m long`
@pytest.mark.slow  # three real CPU trainings of the toy model and a preprocessing (about a minute)
def test_a_real_sweep_on_the_reference_trainer_with_a_device_memory_failure(tmp_path):
    """Preprocess the sanity set, train each trial for real on the CPU, OOM against a simulated capacity."""
    from ltx_pipeline.backends.reference import ReferenceBackend
    from ltx_pipeline.engine import Outcome, Runner, approve_plan
    from ltx_pipeline.request import build_request
    from ltx_pipeline.store import Store
    from ltx_pipeline.workspace import Workspace
    from tests.reference_trainer.conftest import write_dataset

    dataset = write_dataset(tmp_path / "data", [(f"clip{i}.mp4", 17, True) for i in range(4)])
    ws = Workspace.at(tmp_path / "ws")
    ws.create()
    store = Store.open(ws.db_file)
    request = build_request({"dataset": str(dataset), "backend": "reference", "assume_gpu": "Toy GPU,32768",
                             "buckets": "64x64x17"})
    run = store.create_run("r1", request.model_dump(mode="json"))
    # The toy's bytes scaled to GPU-sized figures, against a 32 GiB device: the baseline fits.
    backend = ReferenceBackend(capacity_mib=32768, memory_scale=22500.0)
    runner = Runner(store, ws, with_autotune(phases.PHASES), backend=backend)
    if runner.drive(run, request).outcome is Outcome.AWAITING_APPROVAL:
        approve_plan(store, run, approved_by="test")
        assert runner.drive(run, request).outcome is Outcome.FINISHED
    out = store.latest_phase_runs(run.id)["autotune"].outputs
    baseline = out["trials"][0]
    assert baseline["outcome"] == "fit" and 0 < baseline["peak_vram_gb"] <= out["limit_gb"]
    assert baseline["validation_peak_vram_gb"] > 0 and baseline["step_time_s"] > 0
    failed = [t for t in out["trials"] if t["outcome"] == "oom_training"]
    assert failed and "out of memory" in failed[0]["reason"]
    assert (ws.root / "r1" / "overfit" / ".precomputed" / "latents").is_dir()  # the sanity set was preprocessed
    assert out["winner"] is not None and all(t["outcome"] != "crash" for t in out["trials"])
    assert out["study"] == "r1-autotune" and (ws.root / "r1" / "autotune.png").is_file()


def test_bench_autotune_reports_our_sweep_beside_the_optimum_and_the_skill(tmp_path):
    from typer.testing import CliRunner

    from ltx_pipeline.cli.bench import bench_app

    surface = write_surface(tmp_path, GPU_32, [point(LOW, 4.0, 26.0, 27.0),
                                               point(knobs(LOW, optimizer_type="adamw"), 3.8, 27.0, 27.0)])
    import typer

    cli = typer.Typer()  # registered as the lead registers it under the main app
    cli.add_typer(bench_app, name="bench")
    cli.command("version")(lambda: None)
    result = CliRunner().invoke(cli, ["bench", "autotune", "--surface", str(surface), "--json"])
    assert result.exit_code == 0, result.output
    figures = json.loads(result.output)
    assert figures["chosen"]["optimizer_type"] == "adamw" and figures["trials_run"] == 3
    assert figures["trials_oom"] == 1 and figures["pruned"] == 1
    # Simulated GPU seconds: each trial's load, one validation per quantization (int8 in the baseline,
    # null in the trial that runs out of memory), 41 steps (two timed lines) for the baseline and 21 (one
    # line: the baseline measured the step-time spread of this machine) for the other one that trains.
    assert figures["trial_seconds"] == pytest.approx(3 * 10 + 2 * 5 + 41 * 4.0 + 21 * 3.8)
    assert figures["end_to_end_seconds"] == pytest.approx(figures["trial_seconds"] + 2000 * 3.8)
    assert set(figures["anchors"]) == {"greedy", "exhaustive", "perfect_knowledge"}
    assert figures["anchors"]["perfect_knowledge"]["end_to_end_seconds"] == pytest.approx(15 + 41 * 4.0 + 2000 * 3.8)
    assert figures["exhaustive"]["chosen"]["optimizer_type"] == "adamw" and figures["objective_vs_optimum"] == 1.0
    assert figures["skill"]["trials_run"] >= 1 and figures["seconds_vs_skill"] > 0


def test_bench_autotune_where_nothing_fits_exits_1_with_winner_null_and_the_reason(tmp_path, capsys):
    """#13: a surface where even the baseline runs out of memory is a figure too, not a traceback."""
    from ltx_pipeline.cli import main

    surface = write_surface(tmp_path, GPU_32, [point(LOW, 4.0, 26.0, 40.0)])  # validation over capacity
    assert main(["bench", "autotune", "--surface", str(surface), "--json"]) == 1
    captured = capsys.readouterr()
    figures = json.loads(captured.out)  # valid JSON: no Infinity
    assert figures["chosen"] is None and figures["objective"] is None and figures["trials_oom"] == 1
    assert figures["exhaustive"]["objective"] is None and figures["skill"]["objective"] is None
    assert "no config that fits" in captured.err and "out of memory" in captured.err
    assert "resume" not in captured.err  # the bench's workspace is thrown away: nothing to resume


def test_a_baseline_killed_by_a_small_dev_shm_reruns_after_apply_fix(tmp_path, workspace, clips_dataset, capsys):
    """#13: the DataLoader bus error is fixable; ``resume`` alone fails the same way with the fix, and
    ``resume --apply-fix`` patches ``data.num_dataloader_workers: 0``, supersedes the failed trial in
    the study and runs it again (it fits: the sweep goes on to a winner)."""
    surface = write_surface(tmp_path, GPU_32, [point(LOW, 4.0, 26.0, 27.0),
                                               point(knobs(LOW, optimizer_type="adamw"), 3.0, 28.0, 29.0)],
                            small_shm=True)
    # The shipped LTX configs load batches with 2 workers (the toy template uses 0): set it as a user would.
    registry = phases.PHASES
    phases.PHASES = registry[: [p.name for p in registry].index("validate") + 1]
    try:
        assert drive(workspace, clips_dataset, surface, capsys=capsys)[0] == 0
    finally:
        phases.PHASES = registry
    from tests.phases.train_helpers import patch_config

    patch_config(workspace / "r1" / "config.yaml", data__num_dataloader_workers=2)
    code, err = drive(workspace, clips_dataset, surface, capsys=capsys)
    assert code == 1 and "bus error" in err.lower() and "num_dataloader_workers: 0" in err, err
    assert "resume --apply-fix" in err
    resume = ["resume", "--workspace", str(workspace), "--run", "r1"]
    assert main(resume) == 1  # nothing changed: the same failure, read back from the study, with the same fix
    captured = capsys.readouterr()
    assert "num_dataloader_workers: 0" in captured.err and "nothing it depends on changed" in captured.out
    assert main([*resume, "--apply-fix"]) == 0, capsys.readouterr().err
    config = yaml.safe_load((workspace / "r1" / "config.yaml").read_text())
    assert config["data"]["num_dataloader_workers"] == 0
    from ltx_pipeline.store import Store

    store = Store.open(workspace / "ltx-pipeline.db")
    events = "\n".join(e.message for e in store.events(store.get_run("r1").id))
    assert "patched data.num_dataloader_workers 2 -> 0 (fix: shm_bus_error)" in events  # the patch says why
    out = outputs(workspace)
    assert [s["number"] for s in out["superseded"]] == [0] and "shm_bus_error" in out["superseded"][0]["reason"]
    assert [t["outcome"] for t in out["trials"]][0] == "fit" and out["winner"]["optimizer_type"] == "adamw"
    states = [t.state.name for t in study_trials(workspace) if t.state.name != "PRUNED"]
    assert states[0] == "FAIL" and states.count("COMPLETE") >= 1  # the failed trial stays, superseded
    assert "Superseded" in (workspace / "r1" / "autotune.md").read_text()
    import optuna

    study = optuna.load_study(study_name="r1-autotune", storage=f"sqlite:///{workspace / 'optuna.db'}")
    assert "shm_bus_error" in study.user_attrs["superseded"]["0"]


def test_a_failed_trial_runs_again_on_plain_resume_once_the_user_changed_its_config(tmp_path, workspace,
                                                                                  clips_dataset, capsys):
    """#13: the user sets the fix by hand instead of --apply-fix; ``resume`` sees the stage config
    changed since the trial failed, supersedes it and runs it again."""
    from tests.phases.train_helpers import patch_config

    surface = write_surface(tmp_path, GPU_32, [point(LOW, 4.0, 26.0, 27.0)], small_shm=True)
    registry = phases.PHASES
    phases.PHASES = registry[: [p.name for p in registry].index("validate") + 1]
    try:
        assert drive(workspace, clips_dataset, surface, capsys=capsys)[0] == 0
    finally:
        phases.PHASES = registry
    config = workspace / "r1" / "config.yaml"
    patch_config(config, data__num_dataloader_workers=2)
    assert drive(workspace, clips_dataset, surface, capsys=capsys)[0] == 1
    patch_config(config, data__num_dataloader_workers=0)
    assert main(["resume", "--workspace", str(workspace), "--run", "r1"]) == 0, capsys.readouterr().err
    out = outputs(workspace)
    assert "stage config changed" in out["superseded"][0]["reason"] and out["trials"][0]["outcome"] == "fit"
