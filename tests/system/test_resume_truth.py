"""Issue 20: resume never lies and never gets stuck.

Named after the numbered cases: a finished trainer is judged by its evidence (exit file, final
weights), never relaunched, and every attempt keeps its own log; a live trainer freezes everything
upstream of it; an unresumable checkpoint is refused before any heavy phase, with the way out.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest
import yaml

from ltx_pipeline.cli import main
from ltx_pipeline.engine.processes import is_alive
from tests.phases.train_helpers import (  # noqa: F401 - training_registered is a fixture
    clips,
    resume,
    simulated_args,
    store_of,
    training_registered,
)


def _wait(condition, timeout: float = 60.0) -> None:  # noqa: ANN001
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


def test_liveness_survives_a_start_time_shift_but_never_takes_a_stranger(tmp_path) -> None:
    """Case 1: a live supervisor whose start time reads differently (clock shift) is still alive."""
    import psutil

    marker = str(tmp_path / "train.log.exit")
    child = subprocess.Popen([sys.executable, "-c", "import time, sys; time.sleep(30)", marker])
    try:
        deadline = time.monotonic() + 20  # between fork and exec the child still shows pytest's command line
        while marker not in psutil.Process(child.pid).cmdline() and time.monotonic() < deadline:
            time.sleep(0.02)
        started = psutil.Process(child.pid).create_time()
        host = os.uname().nodename
        assert is_alive(child.pid, started, host)
        assert is_alive(child.pid, started - 7.0, host, marker=marker)  # boot time moved: same process
        assert not is_alive(child.pid, started - 7.0, host, marker=str(tmp_path / "other.exit"))  # a stranger
        assert not is_alive(child.pid, started - 7.0, host)
    finally:
        child.kill()
        child.wait()


@pytest.mark.usefixtures("training_registered")
def test_case1_a_trainer_recorded_crashed_whose_exit_file_says_0_is_finished_not_relaunched(workspace, tmp_path):
    args = simulated_args(workspace, clips(tmp_path / "data"), "--steps", "40", "--checkpoint-interval", "20")
    assert main(args) == 0
    store, run = store_of(workspace)
    [process] = store.processes(run.id, "train")
    log = workspace / "r1" / "logs" / "train.log"
    before = log.read_bytes()
    # What an engine that misjudged the live trainer left behind.
    store.update_process(process.id, status="crashed", exit_code=None)
    phase = store.latest_phase_runs(run.id)["train"]
    store.finish_phase(phase.id, status="failed", run_state="failed", error="Training stage 1 failed (host_oom)")
    assert resume(workspace) == 0
    [again] = store.processes(run.id, "train")  # nothing launched
    assert again.status == "exited" and again.exit_code == 0
    assert log.read_bytes() == before  # the log is untouched
    assert store.get_run("r1").state == "finished"
    assert any("its exit file says exit 0" in e.message for e in store.events(run.id))


@pytest.mark.usefixtures("training_registered")
def test_case2_resume_while_the_trainer_runs_changes_nothing_upstream(workspace, tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("LTX_SIMULATED_TIME_SCALE", "0.02")
    assert main(simulated_args(workspace, clips(tmp_path / "data"), "--steps", "200", "--detach")) == 0
    config = workspace / "r1" / "config.yaml"
    before = config.read_text()
    store, run = store_of(workspace)
    [process] = store.processes(run.id, "train")
    # The user changes the request while it trains: reported, not applied.
    code = main(["run", "--workspace", str(workspace), "--run", "r1", "--rank", "8", "--detach"])
    assert code == 0
    assert config.read_text() == before
    messages = [e.message for e in store.events(run.id)]
    assert any("not applied while it runs" in m for m in messages)
    assert [p.id for p in store.processes(run.id, "train")] == [process.id]
    ran = [p.phase for p in store.phase_attempts(run.id)]
    assert ran.count("validate") == 1 and ran.count("config_patch") == 1  # nothing upstream re-ran
    from ltx_pipeline.cli.training import stop

    assert stop(workspace=workspace, run_name="r1") == 0  # no trainer is left running


@pytest.mark.long  # 20 s on 2 cores (2026-12-06): in the opt-in long suite, `-m long`
@pytest.mark.usefixtures("training_registered")
def test_case6_a_rank_change_is_refused_before_any_heavy_phase_and_restart_is_the_way_out(workspace, tmp_path,
                                                                                          monkeypatch) -> None:
    monkeypatch.setenv("LTX_SIMULATED_TIME_SCALE", "0.02")
    args = simulated_args(workspace, clips(tmp_path / "data"), "--steps", "100", "--checkpoint-interval", "20",
                          "--detach")
    assert main(args) == 0
    store, run = store_of(workspace)
    checkpoints = workspace / "r1" / "outputs" / "checkpoints"
    _wait(lambda: any(checkpoints.glob("training_state_step_00020*")))
    from ltx_pipeline.cli.training import stop

    assert stop(workspace=workspace, run_name="r1") == 0
    launches = len(store.processes(run.id, "train"))
    code = main(["run", "--workspace", str(workspace), "--run", "r1", "--rank", "16", "--approve"])
    assert code == 4  # refused, with the way out
    assert len(store.processes(run.id, "train")) == launches  # nothing launched
    validate = store.latest_phase_runs(run.id)["validate"]
    assert validate.status == "failed" and "lora_rank: 32 -> 16" in validate.error
    assert "set `rank: 32` back in run.yaml" in validate.error and "--restart-training" in validate.error
    assert code == 4 and resume(workspace, "--restart-training") == 0
    kept = [p for p in (workspace / "r1").iterdir() if p.name.startswith("outputs.kept-")]
    assert len(kept) == 1 and any((kept[0] / "checkpoints").iterdir())  # the old checkpoints are kept
    final = yaml.safe_load((workspace / "r1" / "config.yaml").read_text())
    assert final["lora"]["rank"] == 16
    assert store.get_run("r1").state == "finished"
    steps = [m.step for m in store.metrics(run.id, 1)]
    assert steps == sorted(set(steps)) and steps[-1] == 100


@pytest.mark.long  # 20 s on 2 cores (2026-12-06): in the opt-in long suite, `-m long`
@pytest.mark.usefixtures("training_registered")
def test_each_attempt_keeps_its_own_log(workspace, tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("LTX_SIMULATED_TIME_SCALE", "0.02")
    args = simulated_args(workspace, clips(tmp_path / "data"), "--steps", "100", "--checkpoint-interval", "20",
                          "--detach")
    assert main(args) == 0
    checkpoints = workspace / "r1" / "outputs" / "checkpoints"
    _wait(lambda: any(checkpoints.glob("training_state_step_00020*")))
    from ltx_pipeline.cli.training import stop

    stop(workspace=workspace, run_name="r1")
    logs = workspace / "r1" / "logs"
    first = (logs / "train.log").read_text()
    assert resume(workspace) == 0
    assert (logs / "train.log").read_text() == first
    second = (logs / "train.attempt-2.log").read_text()
    assert second.startswith("=== ltx-pipeline: launch 2 of stage 1") and "Step 100/100" in second
    summary = json.loads(json.dumps(store_of(workspace)[0].latest_phase_runs(store_of(workspace)[1].id)["train"]
                                    .outputs))
    assert summary["stages"][0]["log"].endswith("train.attempt-2.log")


ENGINE = [sys.executable, "-c", "from ltx_pipeline.cli import main; main()"]


@pytest.mark.long  # 12.9 s per run on a 2-core box (2026-12-07): the default suite stays under 6 min
def test_case3_an_engine_killed_in_autotune_leaves_no_orphan_and_no_ghost(workspace, tmp_path) -> None:
    import signal

    env = {**os.environ, "LTX_SIMULATED_TIME_SCALE": "0.05"}
    args = simulated_args(workspace, clips(tmp_path / "data"), "--steps", "20")
    engine = subprocess.Popen([*ENGINE, *args], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                              start_new_session=True)
    db = workspace / "ltx-pipeline.db"

    def trial_running() -> bool:
        if not db.exists():
            return False
        store, run = store_of(workspace)
        return run is not None and any(p.status == "running" for p in store.processes(run.id, "trial"))

    try:
        _wait(trial_running, timeout=120)
    finally:
        os.killpg(engine.pid, signal.SIGKILL)
        engine.wait()
    store, run = store_of(workspace)
    [orphan] = [p for p in store.processes(run.id, "trial") if p.status == "running"]
    from ltx_pipeline.engine.journal import RunJournal

    handle = RunJournal.handle(orphan)
    assert handle.alive()  # the trial outlived the engine
    fast = {**env, "LTX_SIMULATED_TIME_SCALE": "0"}
    done = subprocess.run([*ENGINE, "resume", "--workspace", str(workspace), "--run", "r1"], env=fast,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-1500:]
    assert not handle.alive()
    assert next(p for p in store.processes(run.id, "trial") if p.id == orphan.id).status == "stopped"
    assert "was left running by an engine that stopped; its process group" in done.stderr
    assert "marked failed (interrupted) in the study" in done.stderr
    assert "runs again from the start" not in done.stderr
    assert all(p.status != "running" for p in store.processes(run.id))  # no trainer left running
