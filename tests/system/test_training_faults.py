"""Training faults with real processes: a killed trainer resumes from its checkpoint, a killed engine
re-attaches, and chained stages warm-start. The reference backend really trains (on the CPU)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ltx_pipeline.cli import main
from tests.conftest import H100_SMI
from tests.phases.train_helpers import (
    clips,
    drive_until_validate,
    mp4_clips,
    patch_config,
    reference_args,
    resume,
    simulated_args,
    store_of,
    training_registered,  # noqa: F401 - fixture
)

REPO = Path(__file__).resolve().parents[2]
# The CLI in a child process, with train and monitor registered after validate if the registry lacks them.
_ENGINE = ("import sys, phases\nfrom phases.train import PHASE as T\nfrom phases.monitor import PHASE as M\n"
           "if 'train' not in [p.name for p in phases.PHASES]:\n    phases.PHASES = (*phases.PHASES, T, M)\n"
           "from ltx_pipeline.cli import main\nsys.exit(main(sys.argv[1:]))")


def wait_for(condition, timeout: float = 60.0) -> None:  # noqa: ANN001
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


@pytest.fixture
def reference_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LTX_REFERENCE_LOG_EVERY", "1")
    monkeypatch.setenv("LTX_REFERENCE_DEVICE", "cpu")


@pytest.mark.slow
@pytest.mark.usefixtures("reference_env", "training_registered")
def test_killed_trainer_resumes_from_its_last_checkpoint_at_its_step(workspace, tmp_path, fake_smi,
                                                                      monkeypatch) -> None:
    args = reference_args(workspace, mp4_clips(tmp_path / "data"), fake_smi(H100_SMI), "--steps", "16",
                          "--rank", "4")
    assert drive_until_validate(monkeypatch, args) == 0
    config = workspace / "r1" / "config.yaml"
    patch_config(config, checkpoints__interval=4, validation__interval=None)
    assert resume(workspace, "--detach") == 0
    store, run = store_of(workspace)
    [first] = store.processes(run.id, "train")
    checkpoints = workspace / "r1" / "outputs" / "checkpoints"
    wait_for(lambda: (checkpoints / "training_state_step_00004.pt").is_file())
    os.killpg(first.pid, signal.SIGKILL)  # the whole group: supervisor and trainer, no exit record
    from ltx_pipeline.steps.resume import latest_pair

    killed_at = latest_pair(checkpoints).step
    assert 4 <= killed_at < 16
    assert resume(workspace) == 0
    processes = store.processes(run.id, "train")
    assert [p.status for p in processes] == ["crashed", "exited"]
    first = (workspace / "r1" / "logs" / "train.log").read_text()
    second = (workspace / "r1" / "logs" / "train.attempt-2.log").read_text()  # each attempt keeps its own log
    assert "=== ltx-pipeline: launch 1" in first and "launch 2" not in first and "Step 4/16" in first
    assert second.startswith("=== ltx-pipeline: launch 2")
    assert f"Resuming training from step {killed_at}" in second  # the trainer's own step counter
    assert f"Step {killed_at + 1}/16" in second and "Step 1/16" not in second
    assert f"model.load_checkpoint None -> {checkpoints}/lora_weights_step_{killed_at:05d}.safetensors" in \
        "\n".join(e.message for e in store.events(run.id))
    assert (workspace / "r1" / "outputs" / "run-summary.md").is_file()
    # The relaunch ran the config with resume's load_checkpoint patch in it, validated after that patch.
    from ltx_pipeline.engine.journal import config_sha256

    assert processes[-1].config_sha256 == config_sha256(config)
    assert processes[0].config_sha256 != processes[-1].config_sha256


@pytest.mark.slow
@pytest.mark.usefixtures("training_registered")
def test_killed_engine_is_reattached_without_a_second_launch(workspace, tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("LTX_SIMULATED_TIME_SCALE", "0.01")
    args = simulated_args(workspace, clips(tmp_path / "data"), "--steps", "300")
    engine = subprocess.Popen([sys.executable, "-c", _ENGINE, *args], cwd=REPO, stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL, env={**os.environ, "PYTHONPATH": str(REPO)})
    log = workspace / "r1" / "logs" / "train.log"
    try:
        wait_for(lambda: log.exists() and "Step 20/300" in log.read_text())
    finally:
        engine.kill()
        engine.wait()
    store, run = store_of(workspace)
    [process] = store.processes(run.id, "train")
    assert resume(workspace) == 0
    assert [p.id for p in store.processes(run.id, "train")] == [process.id]
    assert "re-attaching" in " ".join(e.message.lower() for e in store.events(run.id))
    steps = [m.step for m in store.metrics(run.id, 1)]
    assert steps == list(range(20, 301, 20))  # every step once, none parsed twice


@pytest.mark.slow
@pytest.mark.usefixtures("reference_env", "training_registered")
def test_chained_stages_warm_start_from_the_previous_final_weights_at_step_zero(workspace, tmp_path,
                                                                                fake_smi) -> None:
    args = reference_args(workspace, mp4_clips(tmp_path / "data"), fake_smi(H100_SMI), "--steps", "3",
                          "--rank", "4", "--strategy", "chain")
    args[args.index("--buckets") + 1] = "32x32x9;64x64x9;64x64x17"
    assert main(args) == 0
    outputs = workspace / "r1" / "outputs"
    for stage in (2, 3):
        log = (workspace / "r1" / "logs" / f"train.stage-{stage}.log").read_text()
        previous = outputs / f"stage-{stage - 1}" / "checkpoints" / "lora_weights_step_00003.safetensors"
        assert f"Loading checkpoint from {previous}" in log
        assert "Starting training..." in log and "Resuming training" not in log and "Step 1/3" in log
    store, run = store_of(workspace)
    assert [(p.stage, p.status) for p in store.processes(run.id, "train")] == [(1, "exited"), (2, "exited"),
                                                                               (3, "exited")]
    summary = (outputs / "run-summary.md").read_text()
    assert all(f"| {k} | 3 | `{outputs}/stage-{k}/checkpoints/lora_weights_step_00003.safetensors` |" in summary
               for k in (1, 2, 3))
