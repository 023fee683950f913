"""Train and monitor on the simulated backend, driven through the real CLI in-process."""

from __future__ import annotations

import json
import re
import time

import pytest
import yaml

from ltx_pipeline.cli import main
from ltx_pipeline.status.live import live_training
from ltx_pipeline.training.follow import log_summary
from tests.phases.train_helpers import (
    SURFACE,
    clips,
    resume,
    simulated_args,
    store_of,
    training_registered,  # noqa: F401 - fixture
)


@pytest.mark.usefixtures("training_registered")
def test_complete_run_writes_summary_plots_metrics_and_checkpoints(workspace, tmp_path, capsys) -> None:
    code = main(simulated_args(workspace, clips(tmp_path / "data"), "--steps", "60"))
    assert code == 0, capsys.readouterr().err
    run_root = workspace / "r1"
    summary = (run_root / "outputs" / "run-summary.md").read_text()
    final = run_root / "outputs" / "checkpoints" / "lora_weights_step_00060.safetensors"
    assert f"| 1 | 60 | `{final}` |" in summary
    # The surface's step time, the trainer's closing speed figure, the trainer's peak.
    assert re.search(r"\| 1 \| 3\.37 s \| \d+\.\d\d steps/s \| 54\.40 GiB \| 3 \|", summary), summary
    assert "simulated_trainer" in summary and "| optimization.steps | `60` |" in summary
    for plot in ("loss.png", "step_time.png"):
        assert (run_root / "outputs" / plot).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    store, run = store_of(workspace)
    assert [m.step for m in store.metrics(run.id, 1)] == [20, 40, 60]
    assert [c.step for c in store.checkpoints(run.id, 1)] == [60]
    assert len(store.processes(run.id, "train")) == 1
    live = live_training(store, run, log_summary=log_summary, query_gpus=False)
    assert live["state"] == "finished" and live["step"] == 60 and live["total"] == 60 and live["percent"] == 100.0
    assert live["latest_checkpoint"] == str(final)
    # A second resume skips everything: the stage is complete (final weights, exit 0).
    assert resume(workspace) == 0
    assert len(store.processes(run.id, "train")) == 1


@pytest.mark.usefixtures("training_registered")
def test_detach_then_resume_reattaches_without_relaunching(workspace, tmp_path, monkeypatch, capsys) -> None:
    monkeypatch.setenv("LTX_SIMULATED_TIME_SCALE", "0.01")  # ~0.03 s per step, 1 s model load
    code = main(simulated_args(workspace, clips(tmp_path / "data"), "--steps", "100", "--detach"))
    out = capsys.readouterr().out
    assert code == 0 and "goes on without this process" in out
    store, run = store_of(workspace)
    [process] = store.processes(run.id, "train")
    live = live_training(store, run, log_summary=log_summary, query_gpus=False)
    assert live["state"] == "running" and live["stage"] == 1 and live["stages"] == 1
    assert resume(workspace) == 0
    assert [p.id for p in store.processes(run.id, "train")] == [process.id]  # re-attached, not relaunched
    steps = [m.step for m in store.metrics(run.id, 1)]
    assert steps == sorted(set(steps)) and steps[-1] == 100
    assert (workspace / "r1" / "outputs" / "run-summary.md").is_file()


@pytest.mark.usefixtures("training_registered")
def test_failure_is_classified_and_apply_fix_patches_and_retries(workspace, tmp_path, capsys) -> None:
    surface = yaml.safe_load(SURFACE.read_text())
    # Drop the plan's baseline (bf16, adamw, batch 1, checkpointing): it runs out of memory at step 1.
    # The 8-bit optimizer fits instead (the first rung of the OOM ladder the config does not already satisfy).
    baseline = next(p for p in surface["points"] if p["knobs"] == {
        "quantization": None, "optimizer_type": "adamw", "batch_size": 1, "enable_gradient_checkpointing": True})
    surface["points"] = [p for p in surface["points"] if p is not baseline and not (
        p["knobs"] == {**baseline["knobs"], "optimizer_type": "adamw8bit"})]
    surface["points"].append({**baseline, "knobs": {**baseline["knobs"], "optimizer_type": "adamw8bit"}})
    path = tmp_path / "surface.yaml"
    path.write_text(yaml.safe_dump(surface))
    code = main(simulated_args(workspace, clips(tmp_path / "data"), "--steps", "40", surface=path))
    err = capsys.readouterr().err
    assert code == 1 and "oom_training" in err and "optimization.optimizer_type: adamw -> adamw8bit" in err
    proposal = json.loads((workspace / "r1" / "failure.json").read_text())
    assert proposal["diff"] == [{"path": "optimization.optimizer_type", "old": "adamw", "new": "adamw8bit",
                                 "reason": proposal["diff"][0]["reason"]}]
    assert "```diff" in (workspace / "r1" / "failure.md").read_text()
    assert resume(workspace) == 1  # without --apply-fix: retried as is, fails the same way
    assert resume(workspace, "--apply-fix") == 0
    config = yaml.safe_load((workspace / "r1" / "config.yaml").read_text())
    assert config["optimization"]["optimizer_type"] == "adamw8bit"
    assert not (workspace / "r1" / "failure.json").exists()
    store, run = store_of(workspace)
    assert [p.status for p in store.processes(run.id, "train")] == ["exited", "exited", "exited"]
    # The retry launched the config as --apply-fix patched it, validated again after the patch.
    from ltx_pipeline.engine.journal import config_sha256

    last = store.processes(run.id, "train")[-1]
    assert last.config_sha256 == config_sha256(workspace / "r1" / "config.yaml")
    validated = [e.message for e in store.events(run.id) if e.message.startswith("validated config.yaml")]
    assert len(validated) == 3 and last.config_sha256[:19] in validated[-1]


@pytest.mark.usefixtures("training_registered")
def test_stop_is_recorded_as_stopped_by_the_user_and_resume_continues(workspace, tmp_path, monkeypatch,
                                                                       capsys) -> None:
    from ltx_pipeline.cli.training import stop

    monkeypatch.setenv("LTX_SIMULATED_TIME_SCALE", "0.02")
    assert main(simulated_args(workspace, clips(tmp_path / "data"), "--steps", "200", "--detach")) == 0
    store, run = store_of(workspace)
    log = workspace / "r1" / "logs" / "train.log"
    deadline = time.monotonic() + 20
    while "Step 20/" not in (log.read_text() if log.exists() else "") and time.monotonic() < deadline:
        time.sleep(0.05)
    assert stop(workspace=workspace, run_name="r1", interrupt_timeout=5, terminate_timeout=5) == 0
    [process] = store.processes(run.id, "train")
    assert process.status == "stopped" and process.stopped_by_user
    live = live_training(store, run, log_summary=log_summary, query_gpus=False)
    assert live["state"] == "stopped" and live["last_log_line"]
    capsys.readouterr()
    assert main(["status", "--workspace", str(workspace), "--json"]) == 0
    [entry] = json.loads(capsys.readouterr().out)["runs"]  # stopped by the user: not failed, not interrupted
    assert entry["state"] == "stopped"
    assert entry["next_command"] == f"ltx-pipeline resume --workspace {workspace.resolve()} --run r1"
    assert stop(workspace=workspace, run_name="r1") == 0  # nothing left to stop: says so
    assert "nothing to stop" in capsys.readouterr().out
    monkeypatch.setenv("LTX_SIMULATED_TIME_SCALE", "0")
    assert resume(workspace) == 0  # relaunched (no checkpoint yet at interval 250: from the start, said so)
    assert len(store.processes(run.id, "train")) == 2


@pytest.mark.usefixtures("training_registered")
def test_dead_trainer_shows_crashed_with_its_last_line_never_running(workspace, tmp_path, monkeypatch) -> None:
    import os
    import signal

    monkeypatch.setenv("LTX_SIMULATED_TIME_SCALE", "0.02")
    assert main(simulated_args(workspace, clips(tmp_path / "data"), "--steps", "200", "--detach")) == 0
    store, run = store_of(workspace)
    [process] = store.processes(run.id, "train")
    os.killpg(process.pid, signal.SIGKILL)
    deadline = time.monotonic() + 10
    while live_training(store, run, query_gpus=False)["state"] == "running" and time.monotonic() < deadline:
        time.sleep(0.05)
    live = live_training(store, run, log_summary=log_summary, query_gpus=False)
    assert live["state"] == "crashed" and live["last_log_line"]
    assert store.processes(run.id, "train")[0].status == "running"  # the row alone is not trusted


@pytest.mark.long  # 11.2 s per run on a 2-core box (2026-12-07): the default suite stays under 6 min
@pytest.mark.usefixtures("training_registered")
def test_steps_a_detached_trainer_logged_unfollowed_are_recorded_before_its_relaunch(workspace, tmp_path,
                                                                                    monkeypatch, capsys) -> None:
    import os
    import signal

    monkeypatch.setenv("LTX_SIMULATED_TIME_SCALE", "0.02")
    args = simulated_args(workspace, clips(tmp_path / "data"), "--steps", "120", "--checkpoint-interval", "20",
                          "--detach")
    assert main(args) == 0
    store, run = store_of(workspace)
    log = workspace / "r1" / "logs" / "train.log"
    def last_step() -> int:
        steps = re.findall(r"Step (\d+)/", log.read_text() if log.exists() else "")
        return int(steps[-1]) if steps else 0

    deadline = time.monotonic() + 30
    while last_step() <= 45 and time.monotonic() < deadline:
        time.sleep(0.02)
    [first] = store.processes(run.id, "train")
    os.killpg(first.pid, signal.SIGKILL)  # nobody followed it: its steps are only in its log
    assert 45 < last_step() < 120
    logged = {int(step) for step in re.findall(r"Step (\d+)/", log.read_text())}
    # One state, one story (#43 point 5): the run is interrupted, not "detached", once its trainer died, in
    # --json and in the table, and resume says it relaunches (never that it re-attaches to a running trainer).
    capsys.readouterr()
    assert main(["status", "--workspace", str(workspace), "--json"]) == 0
    [entry] = json.loads(capsys.readouterr().out)["runs"]
    assert (entry["state"], entry["training"]["state"]) == ("interrupted", "crashed")
    assert entry["next_command"].startswith("ltx-pipeline resume")
    assert main(["status", "--workspace", str(workspace)]) == 0
    table = capsys.readouterr().out
    assert "r1 — interrupted" in table and re.search(r"│ train +│ interrupted", table), table
    [train] = [p for p in entry["phases"] if p["phase"] == "train"]  # the table folds the summary to its width
    assert train["status"] == "interrupted" and "ended without finishing (crashed)" in train["summary"]
    monkeypatch.setenv("LTX_SIMULATED_TIME_SCALE", "0")
    assert resume(workspace) == 0  # relaunched from the step-40 checkpoint
    said = capsys.readouterr().out
    assert f"The stage 1 trainer left detached (pid {first.pid}) ended without finishing" in said
    assert "left running" not in said and "Re-attaching" not in said
    assert len(store.processes(run.id, "train")) == 2
    recorded = {m.step for m in store.metrics(run.id, 1)}
    assert logged and logged <= recorded, sorted(logged - recorded)


def test_a_process_that_exits_0_while_being_stopped_is_recorded_exited_not_stopped(workspace, tmp_path) -> None:
    import sys

    from ltx_pipeline.backends.base import LaunchSpec
    from ltx_pipeline.engine.journal import RunJournal
    from ltx_pipeline.store import Process, Store

    workspace.mkdir(parents=True, exist_ok=True)
    store = Store.open(workspace / "ltx-pipeline.db")
    run = store.create_run("r1", {})
    journal = RunJournal(store, run.id, "train")
    # It ignores SIGINT and ends by itself, 0, within the stop's first wait: it finished, it was not stopped.
    script = "import signal, time; signal.signal(signal.SIGINT, signal.SIG_IGN); print('up', flush=True); time.sleep(1)"
    log = tmp_path / "p.log"
    handle = journal.launch("preprocess", 1, LaunchSpec((sys.executable, "-c", script), tmp_path), log)
    deadline = time.monotonic() + 20
    while "up" not in (log.read_text() if log.exists() else "") and time.monotonic() < deadline:
        time.sleep(0.05)
    journal.stop(handle, interrupt_timeout=10, terminate_timeout=5)
    [process] = store.processes(run.id, "preprocess")
    assert (process.status, process.exit_code, process.stopped_by_user) == ("exited", 0, True)
    # Shown as a trainer, such a row is finished: a stop that did not stop it is no stop.
    fields = process.model_dump(exclude={"id", "kind", "phase"})
    store.add_process(Process(**fields, kind="train", phase="train"))
    assert live_training(store, run, query_gpus=False)["state"] == "finished"


def test_a_trainer_stopped_after_its_final_checkpoint_shows_finished_not_stopped(workspace, tmp_path) -> None:
    """Kill sequence `stop+stop` on a loaded machine: the SIGINT landed after the step-60 save (exit 130);
    the train phase judged the stage finished from the checkpoint pair, and `status` must agree with it."""
    from ltx_pipeline.store import Process, Store

    workspace.mkdir(parents=True, exist_ok=True)
    store = Store.open(workspace / "ltx-pipeline.db")
    run = store.create_run("r1", {})
    log = tmp_path / "train.log"
    log.write_text("Step 60/60\n")
    (tmp_path / "train.log.exit").write_text(json.dumps({"exit_code": 130, "signal": None}))
    store.add_process(Process(run_id=run.id, phase="train", kind="train", stage=1, pid=2**22 + 7, create_time=1.0,
                              host="elsewhere", argv=[], cwd=str(tmp_path), env={}, printable="", log_path=str(log),
                              status="stopped", exit_code=130, stopped_by_user=True))
    assert live_training(store, run, query_gpus=False)["state"] == "stopped"  # the stage is not judged yet
    row = store.begin_phase(run.id, "train", reason="first run", fingerprint="f", parts={}, run_state="running")
    final = str(tmp_path / "lora_weights_step_00060.safetensors")
    store.finish_phase(row.id, status="succeeded", run_state="running",
                       outputs={"stages": [{"stage": 1, "final_checkpoint": final, "final_step": 60}]})
    live = live_training(store, run, query_gpus=False)
    assert (live["state"], live["process_ended"], live["eta"]) == ("finished", "stopped", None)
