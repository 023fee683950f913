"""The autotune sweep over several GPU hosts on a real PostgreSQL store: ``ltx-pipeline autotune-worker``.

The driver (``run`` up to autotune) and each worker are separate engine processes with their own
``LTX_PIPELINE_HOST_ID``, on the simulated backend (its trials sleep a fraction of their simulated
seconds, so a trial is still running when a test looks); heartbeats every 0.5 s, so a lost host's trial
is reclaimed after 3 s. The workspace folder stands for the file system the hosts share.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests.phases.test_autotune import GPU_32, LOW, knobs, point, write_surface
from tests.phases.train_helpers import clips

REPO = Path(__file__).resolve().parents[2]
# The workflow through autotune only (training is not under test here).
ENGINE = [sys.executable, "-c", "import sys, phases; from tests.phases.test_autotune import with_autotune; "
          "phases.PHASES = with_autotune(phases.PHASES); "
          "from ltx_pipeline.cli import main; sys.exit(main(sys.argv[1:]))"]
SPACE = ("quantization", "optimizer_type", "batch_size", "enable_gradient_checkpointing",
         "gradient_accumulation_steps")


def surface(tmp_path: Path, *, both_fit: bool = True) -> Path:
    """A 32 GB card: quantization off runs out of memory; batch 2 and AdamW fit and are faster (together
    too, unless not ``both_fit``: then no result settles the configs below that one)."""
    points = [point(LOW, 4.0, 20.0, 22.0), point(knobs(LOW, optimizer_type="adamw"), 3.9, 21.0, 22.0),
              point(knobs(LOW, batch_size=2), 7.0, 24.0, 22.0)]
    if both_fit:
        points.append(point(knobs(LOW, batch_size=2, optimizer_type="adamw"), 6.8, 25.0, 22.0))
    return write_surface(tmp_path, GPU_32, points)


def env_for(store_url: str, host: str, scale: str) -> dict[str, str]:
    return {**os.environ, "LTX_PIPELINE_STORE": store_url, "LTX_PIPELINE_HOST_ID": host,
            "LTX_PIPELINE_HEARTBEAT_S": "0.5", "LTX_SIMULATED_TIME_SCALE": scale,
            "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}


def start_driver(tmp_path: Path, store_url: str, scale: str = "0.03", both_fit: bool = True) -> subprocess.Popen:
    args = ["run", "--workspace", str(tmp_path / "ws"), "--run", "r1", "--dataset", str(clips(tmp_path / "data", 4)),
            "--backend", "simulated", "--surface", str(surface(tmp_path, both_fit=both_fit)), "--approve",
            "--effective-batch", "2"]
    return subprocess.Popen([*ENGINE, *args], env=env_for(store_url, "host-a", scale), stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True)


def worker(tmp_path: Path, store_url: str, host: str, *extra: str, scale: str = "0.03") -> subprocess.Popen:
    return subprocess.Popen([*ENGINE, "autotune-worker", "--workspace", str(tmp_path / "ws"), "--run", "r1", *extra],
                            env=env_for(store_url, host, scale), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, start_new_session=True)


def study(store_url: str, tmp_path: Path) -> Any | None:
    """The run's study once the driver has opened it for several hosts, else None."""
    from ltx_pipeline.autotune.hosts import find_shared
    from ltx_pipeline.store.location import optuna_storage

    return find_shared(optuna_storage(store_url, tmp_path / "optuna.db"), "r1")


def wait_for(what: str, check, process: subprocess.Popen, timeout: float = 90) -> Any:
    deadline = time.monotonic() + timeout
    while not (found := check()):
        assert process.poll() is None, f"the driver ended before {what}: {process.stdout.read()[-3000:]}"
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)
    return found


def autotune_outputs(store_url: str) -> dict:
    from ltx_pipeline.store import Store

    store = Store.open(store_url)
    outputs = store.latest_phase_runs(store.get_run("r1").id)["autotune"].outputs
    store.close()
    return outputs


def params(trial: Any) -> tuple:
    return tuple(trial.params.get(k) for k in SPACE)


def stop(process: subprocess.Popen) -> None:
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGKILL)
    process.wait(timeout=30)


def kill_trials_of(store_url: str, host: str) -> None:
    """SIGKILL a lost host's trial processes (its supervisors run in sessions of their own)."""
    from ltx_pipeline.store import Store

    store = Store.open(store_url)
    for row in store.processes(store.get_run("r1").id, "trial"):
        if row.host == host and row.status == "running":
            try:
                os.killpg(row.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
    store.close()


def test_a_store_that_is_not_shared_is_refused(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    env.pop("LTX_PIPELINE_STORE", None)
    done = subprocess.run([*ENGINE, "autotune-worker", "--workspace", str(tmp_path / "ws"), "--run", "r1"], env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2
    assert "autotune-worker needs a shared store (--store postgresql+psycopg://…)" in done.stderr
    assert not (tmp_path / "ws").exists()  # refused before anything was created


@pytest.mark.long  # 26 s on 2 cores (2026-12-06): in the opt-in long suite, `-m long`
def test_driver_and_worker_share_the_sweep_and_find_the_single_host_winner(store_url: str, tmp_path: Path) -> None:
    """Also: while the sweep runs, a worker on a host with another GPU model is refused, naming both."""
    from optuna.trial import TrialState

    from ltx_pipeline.backends.surface import load_surface
    from ltx_pipeline.ltx.autotune import simulate_sweep

    driver = start_driver(tmp_path, store_url, scale="0.05")
    helper = None
    try:
        wait_for("the shared study", lambda: study(store_url, tmp_path), driver)
        helper = worker(tmp_path, store_url, "host-b")
        other = worker(tmp_path, store_url, "host-c", "--assume-gpu", "NVIDIA A100-SXM4-40GB,40960")
        _, err = other.communicate(timeout=120)
        assert other.returncode == 2, err
        assert err.count("\n") == 1 and "NVIDIA A100-SXM4-40GB" in err and GPU_32["name"] in err
        out, _ = driver.communicate(timeout=180)
        assert driver.returncode == 0, out[-3000:]
        worker_out, worker_err = helper.communicate(timeout=60)
        assert helper.returncode == 0, worker_err[-3000:]
    finally:
        stop(driver)
        if helper is not None:
            stop(helper)
    shared = study(store_url, tmp_path)
    measured = [t for t in shared.get_trials(deepcopy=False, states=(TrialState.COMPLETE, TrialState.FAIL))
                if "outcome" in t.user_attrs]
    assert {t.user_attrs["host"] for t in measured} == {"host-a", "host-b"}, worker_out
    assert len({params(t) for t in measured}) == len(measured)  # no config ran twice
    # Trial folders are numbered by the Optuna trial: no two hosts wrote the same one.
    numbers = [t.user_attrs["trial_number"] for t in measured]
    assert len(set(numbers)) == len(numbers)
    assert all((tmp_path / "ws" / "r1" / "overfit" / f"trial-{n:03d}" / "train.log").exists() for n in numbers)
    outputs = autotune_outputs(store_url)
    space = [outputs["baseline"], *(t["knobs"] for t in outputs["trials"][1:]),
             *(p["knobs"] for p in outputs["pruned"])]
    alone = simulate_sweep(load_surface(tmp_path / "surface.yaml"), space, outputs["baseline"], headroom=0.05,
                           per_gpu_batch=outputs["per_gpu_batch"])
    assert {k: outputs["winner"][k] for k in SPACE} == {k: alone["chosen"][k] for k in SPACE}
    assert shared.user_attrs.get("finished") is True
    markdown = (tmp_path / "ws" / "r1" / "autotune.md").read_text()
    assert "| host |" in markdown and "host-b" in markdown


@pytest.mark.long  # 32 s on 2 cores (2026-12-06): in the opt-in long suite, `-m long`
def test_a_killed_workers_trial_is_reclaimed_and_run_again(store_url: str, tmp_path: Path) -> None:
    from optuna.trial import TrialState

    from ltx_pipeline.autotune.hosts import lost_reasons

    # The two configs queued after the baseline settle neither of each other: the lost one must run again.
    driver = start_driver(tmp_path, store_url, scale="0.05", both_fit=False)
    helper = None
    try:
        shared = wait_for("the shared study", lambda: study(store_url, tmp_path), driver)
        # The worker's trials last long (half the simulated seconds: 5 s to load): it is killed inside one.
        helper = worker(tmp_path, store_url, "host-b", scale="0.5")

        def worker_trial() -> Any:
            running = shared.get_trials(deepcopy=False, states=(TrialState.RUNNING,))
            return next((t for t in running if t.user_attrs.get("host") == "host-b"), None)

        taken = wait_for("the worker to take a trial", worker_trial, driver)
        time.sleep(1.0)  # its trial process is launched and beating
        os.killpg(helper.pid, signal.SIGKILL)
        helper.wait(timeout=30)
        kill_trials_of(store_url, "host-b")
        out, _ = driver.communicate(timeout=180)
        assert driver.returncode == 0, out[-3000:]
    finally:
        stop(driver)
        if helper is not None:
            stop(helper)
    trials = study(store_url, tmp_path).get_trials(deepcopy=False)
    lost = next(t for t in trials if t.number == taken.number)
    assert lost.state == TrialState.FAIL
    assert "heartbeat lost" in lost_reasons(study(store_url, tmp_path))[lost.number]
    assert "host-b" in lost_reasons(study(store_url, tmp_path))[lost.number]
    again = [t for t in trials if t.number > lost.number and params(t) == params(lost) and "outcome" in t.user_attrs]
    assert len(again) == 1 and again[0].user_attrs["host"] == "host-a"  # the driver ran it again, once
    assert again[0].state == (TrialState.COMPLETE if again[0].user_attrs["outcome"] == "fit" else TrialState.FAIL)
    assert study(store_url, tmp_path).user_attrs.get("finished") is True
    assert autotune_outputs(store_url)["winner"] is not None

