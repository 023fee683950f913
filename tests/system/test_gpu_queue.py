"""Issue 46, done when: two runs queued for the same GPU on the reference backend run one after the other with
no overlap and both finish; killing the waiting engine and resuming keeps its place; ``queue`` and ``status``
show it.

The engines are real ``ltx-pipeline run --queue`` processes on the reference backend, in one workspace, each
planning for ONE assumed GPU (``--assume-gpu``, the same synthetic id ``ASSUMED-0``). A ``sitecustomize`` module
on the first engine's PYTHONPATH (test code, not the product) holds it at the start of its train phase, with
its GPU leased, until the test removes a file: the others queue behind it meanwhile. What ran when is read
back from the store: each run's launched processes (preprocessing, trainer) with their start and end times.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from datetime import datetime
from pathlib import Path

import pytest

from tests.hold_hook import HOLD
from tests.reference_trainer.conftest import write_dataset

REPO = Path(__file__).resolve().parents[2]
ENGINE = [sys.executable, "-c", "from ltx_pipeline.cli import main; main()"]
GPU = "NVIDIA H100 80GB HBM3,81559,1"

@pytest.fixture(scope="module")
def kit(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """One toy base model and dataset (so later runs take their latents from the workspace's cache), the hook."""
    from ltx_pipeline.reference_trainer import make_base

    root = tmp_path_factory.mktemp("kit")
    base = root / "base.safetensors"
    assert make_base.main([str(base)]) == 0
    hooks = root / "hooks"
    hooks.mkdir()
    (hooks / "sitecustomize.py").write_text(HOLD)
    dataset = write_dataset(root / "data", [("a", 17, False), ("b", 17, False)])
    return {"base": base, "hooks": hooks, "dataset": dataset}


def env(kit: dict[str, Path], gate: Path | None = None) -> dict[str, str]:
    extra = {"HOLD_IN_PHASE": "train", "HOLD_MARKER": f"{gate}.held", "HOLD_WHILE": str(gate)} if gate else {}
    return {**os.environ, "LTX_REFERENCE_DEVICE": "cpu", "LTX_PIPELINE_QUEUE_POLL_S": "0.2",
            "PYTHONPATH": os.pathsep.join([str(kit["hooks"]), str(REPO), os.environ.get("PYTHONPATH", "")]),
            **extra}


def start(kit: dict[str, Path], ws: Path, run: str, gate: Path | None = None) -> subprocess.Popen[str]:
    args = ["run", "--workspace", str(ws), "--run", run, "--dataset", str(kit["dataset"]), "--backend", "reference",
            "--assume-gpu", GPU, "--buckets", "64x64x17", "--approve", "--skip-eval", "--autotune", "off",
            "--steps", "2", "--rank", "4", "--model-path", str(kit["base"]), "--queue"]
    return subprocess.Popen([*ENGINE, *args], env=env(kit, gate), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, start_new_session=True)


def wait_for(what: str, check, proc: subprocess.Popen[str] | None = None, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert proc is None or proc.poll() is None, f"{what}: the engine ended\n{proc.stderr.read()[-2000:]}"
        assert time.monotonic() < deadline, f"never: {what}"
        time.sleep(0.1)


def rows(ws: Path, sql: str) -> list[tuple]:
    db = sqlite3.connect(ws / "ltx-pipeline.db", timeout=30)
    try:
        return db.execute(sql).fetchall()
    except sqlite3.OperationalError:  # no such table yet: the engine has not created the store
        return []
    finally:
        db.close()


def waiter(ws: Path, run: str) -> tuple | None:
    found = rows(ws, "SELECT w.id, w.pid FROM gpu_waiters w JOIN runs r ON r.id = w.run_id "
                     f"WHERE r.name = '{run}'")
    return found[0] if found else None


def cli_json(ws: Path, *args: str) -> dict:
    done = subprocess.run([*ENGINE, *args, "--workspace", str(ws), "--json"], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def finish(proc: subprocess.Popen[str]) -> None:
    out, err = proc.communicate(timeout=240)
    assert proc.returncode == 0, (out + err)[-2500:]


def gpu_spans(ws: Path) -> list[tuple[str, datetime, datetime]]:
    """Each run's GPU work: from its first launched process's start to its last one's end, in start order."""
    spans = rows(ws, "SELECT r.name, MIN(p.started_at), MAX(p.ended_at) FROM processes p JOIN runs r "
                     "ON r.id = p.run_id WHERE p.kind IN ('preprocess', 'train') GROUP BY r.name ORDER BY 2")
    return [(name, datetime.fromisoformat(begun), datetime.fromisoformat(ended)) for name, begun, ended in spans]


def assert_one_after_another(ws: Path, order: list[str]) -> None:
    spans = gpu_spans(ws)
    assert [name for name, _, _ in spans] == order
    for (_, _, ended), (_, begun, _) in zip(spans, spans[1:], strict=False):
        assert ended <= begun, spans  # no overlap: the next run's first process starts after the last one ended
    assert rows(ws, "SELECT name, state FROM runs ORDER BY id") == [(name, "finished") for name in order]
    assert rows(ws, "SELECT COUNT(*) FROM gpu_leases") == [(0,)]
    assert rows(ws, "SELECT COUNT(*) FROM gpu_waiters") == [(0,)]
    took = rows(ws, "SELECT r.name FROM events e JOIN runs r ON r.id = e.run_id WHERE e.message LIKE 'took GPU(s) 0 %'"
                    " ORDER BY e.id")
    assert [name for (name,) in took] == order


def a_holds_b_waits(kit: dict[str, Path], tmp_path: Path) -> tuple[Path, Path, subprocess.Popen[str],
                                                                     subprocess.Popen[str]]:
    """Run a holding the one GPU in train (held there by the gate file), run b waiting for it in the queue."""
    ws, gate = tmp_path / "ws", tmp_path / "gate"
    gate.write_text("hold")
    first = start(kit, ws, "a", gate)
    wait_for("a holds the GPU, in train", Path(f"{gate}.held").exists, first)
    second = start(kit, ws, "b")
    wait_for("b waits in the queue", lambda: waiter(ws, "b") is not None, second)
    return ws, gate, first, second


@pytest.mark.long
@pytest.mark.timeout(420)
def test_two_queued_runs_on_one_gpu_run_one_after_the_other(kit: dict[str, Path], tmp_path: Path) -> None:
    ws, gate, first, second = a_holds_b_waits(kit, tmp_path)
    board = cli_json(ws, "queue")
    assert [(h["gpu"], h["uuid"], h["run"]) for h in board["holders"]] == [(0, "ASSUMED-0", "a")]
    assert [(q["position"], q["run"], q["engine"], q["gpus"]) for q in board["queue"]] == [
        (1, "b", "waiting", [{"gpu": 0, "uuid": "ASSUMED-0", "held_by": "a"}])]
    gate.unlink()
    finish(first)
    finish(second)
    assert_one_after_another(ws, ["a", "b"])


@pytest.mark.long
@pytest.mark.timeout(600)
def test_a_killed_waiter_resumed_keeps_its_place_ahead_of_a_later_run(kit: dict[str, Path], tmp_path: Path) -> None:
    ws, gate, first, second = a_holds_b_waits(kit, tmp_path)
    third = start(kit, ws, "c")
    wait_for("c waits in the queue", lambda: waiter(ws, "c") is not None, third)
    place = waiter(ws, "b")
    os.killpg(second.pid, signal.SIGKILL)
    second.wait(timeout=30)

    board = cli_json(ws, "queue")
    assert [(q["position"], q["run"], q["engine"].split(" ")[0]) for q in board["queue"]] == [
        (1, "b", "gone"), (2, "c", "waiting")]
    status = {run["name"]: run for run in cli_json(ws, "status")["runs"]}
    assert [h["run"] for h in cli_json(ws, "status")["gpus"]["holders"]] == ["a"]
    assert [h["gpu"] for h in status["a"]["gpus_held"]] == [0]
    assert (status["b"]["gpu_queue"]["position"], status["c"]["gpu_queue"]["position"]) == (1, 2)
    assert status["c"]["gpu_queue"]["gpus"] == [{"gpu": 0, "uuid": "ASSUMED-0", "held_by": "a"}]
    # Both are approved and queued (not "awaiting approval"); c's engine waits, b's is gone: resume keeps its place.
    assert (status["b"]["state"], status["c"]["state"]) == ("queued", "queued")
    assert status["c"]["next_command"] is None
    assert status["b"]["next_command"].startswith(f"ltx-pipeline resume --workspace {ws} --run b")

    resumed = subprocess.Popen([*ENGINE, "resume", "--workspace", str(ws), "--run", "b", "--queue"], env=env(kit),
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    wait_for("b re-attached to its entry", lambda: (waiter(ws, "b") or (0, 0))[1] == resumed.pid, resumed)
    assert waiter(ws, "b")[0] == place[0]  # the same entry: its place kept
    text = subprocess.run([*ENGINE, "queue", "--workspace", str(ws)], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "COLUMNS": "200"}).stdout
    assert text.index("│ b ") < text.index("│ c ") and "GPU 0 (held by run a)" in text
    gate.unlink()
    for proc in (first, resumed, third):
        finish(proc)
    assert_one_after_another(ws, ["a", "b", "c"])
