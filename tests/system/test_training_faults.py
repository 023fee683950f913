"""Training faults with real processes: a killed engine re-attaches, and chained stages warm-start. The
reference backend really trains (on the CPU). A killed trainer resuming from its checkpoint is in
test_real_media_end_to_end.py (on a real-media dataset, with no ffmpeg on PATH)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ltx_pipeline.cli import main
from tests.conftest import H100_SMI
from tests.phases.train_helpers import (
    clips,
    mp4_clips,
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


@pytest.mark.long  # 23 s on 2 cores (2026-12-06): in the opt-in long suite, `-m long`
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


@pytest.mark.long  # 35 s on 2 cores (2026-12-06): in the opt-in long suite, `-m long`
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
