"""GPU leases (``ltx_pipeline.gpus``): atomic taking across store handles, liveness from evidence only, foreign
memory use read from nvidia-smi, and the queue's strict first-come-first-served order."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest

from ltx_pipeline.engine.processes import host_id
from ltx_pipeline.errors import Refused
from ltx_pipeline.gpus import GpuRef, RunGpus, gpu_board, try_take
from ltx_pipeline.gpus import claim as claim_module
from ltx_pipeline.gpus.devices import GpuNeed
from ltx_pipeline.store import Process, Store, saved_id

GPU0 = GpuRef(0, "GPU-11111111-2222-3333-4444-555555555555")
GPU1 = GpuRef(1, "GPU-66666666-2222-3333-4444-555555555555")


def all_of(*gpus: GpuRef) -> GpuNeed:
    """A need for exactly these GPUs (every one of them)."""
    return GpuNeed(tuple(gpus), len(gpus), len(gpus))


def me() -> tuple[int, float, str]:
    return os.getpid(), psutil.Process().create_time(), host_id()


@pytest.fixture
def dead() -> Iterator[tuple[int, float, str]]:
    """A holder that was alive and is gone: a real pid and start time, ended."""
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    created = psutil.Process(proc.pid).create_time()
    proc.kill()
    proc.wait()
    yield proc.pid, created, host_id()


@pytest.fixture
def sleeper() -> Iterator[subprocess.Popen[bytes]]:
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    yield proc
    proc.kill()
    proc.wait()


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "ltx-pipeline.db"


def runs(store: Store, *names: str) -> list[int]:
    return [saved_id(store.create_run(name, {})) for name in names]


def test_two_store_handles_never_lease_one_gpu_twice(db: Path) -> None:
    first, second = Store.open(db), Store.open(db)
    a, b = runs(first, "a", "b")
    assert first.take_gpus(a, "run", [(0, GPU0.uuid)], me())
    assert not second.take_gpus(b, "run", [(0, GPU0.uuid)], me())  # the unique (host, uuid) refuses it
    verdict = try_take(second, b, "run", all_of(GPU0), me())
    assert not verdict.taken
    assert verdict.blockers == (f"GPU 0 is held by run a (run, pid {os.getpid()})",)
    assert [(lease.run_id, lease.gpu_uuid) for lease in second.gpu_leases()] == [(a, GPU0.uuid)]


def test_engines_racing_for_one_gpu_give_it_to_exactly_one(db: Path) -> None:
    ids = runs(Store.open(db), *(f"r{i}" for i in range(6)))
    handles = [Store.open(db) for _ in ids]
    start = threading.Barrier(len(ids))
    won: list[int] = []

    def race(store: Store, run_id: int) -> None:
        start.wait()
        if try_take(store, run_id, "run", all_of(GPU0), me()).taken:
            won.append(run_id)

    threads = [threading.Thread(target=race, args=(h, i)) for h, i in zip(handles, ids, strict=True)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(won) == 1
    assert [lease.run_id for lease in handles[0].gpu_leases()] == won


def test_a_dead_holders_lease_is_free_however_young(db: Path, dead: tuple[int, float, str]) -> None:
    store = Store.open(db)
    a, b = runs(store, "a", "b")
    assert store.take_gpus(a, "run", [(0, GPU0.uuid)], dead)
    assert gpu_board(store)["holders"] == []  # status and queue show it free
    assert try_take(store, b, "run", all_of(GPU0), me()).taken
    assert [lease.run_id for lease in store.gpu_leases()] == [b]


def test_a_live_holder_keeps_its_lease_however_old(db: Path) -> None:
    store = Store.open(db)
    a, b = runs(store, "a", "b")
    assert store.take_gpus(a, "run", [(0, GPU0.uuid)], me())
    with store._session() as s:  # taken a year ago: age alone never frees it
        for lease in store.gpu_leases():
            lease.taken_at = lease.taken_at.replace(year=lease.taken_at.year - 1)
            s.add(lease)
    assert not try_take(store, b, "run", all_of(GPU0), me()).taken


def test_a_dead_engines_lease_stays_while_its_runs_trainer_lives(db: Path, dead: tuple[int, float, str],
                                                                  sleeper: subprocess.Popen[bytes],
                                                                  tmp_path: Path) -> None:
    store = Store.open(db)
    a, b = runs(store, "a", "b")
    assert store.take_gpus(a, "run", [(0, GPU0.uuid)], dead)
    row = store.add_process(Process(run_id=a, phase="train", kind="train", pid=sleeper.pid,
                                    create_time=psutil.Process(sleeper.pid).create_time(), host=host_id(), cwd="/",
                                    printable="trainer", log_path=str(tmp_path / "train.log")))
    verdict = try_take(store, b, "run", all_of(GPU0), me())
    assert verdict.blockers == (f"GPU 0 is held by run a (run, pid {dead[0]})",)
    assert [h["run"] for h in gpu_board(store)["holders"]] == ["a"]
    sleeper.kill()
    sleeper.wait()
    assert row.id is not None
    assert try_take(store, b, "run", all_of(GPU0), me()).taken


def test_the_same_run_retakes_its_own_lease_on_resume(db: Path) -> None:
    store = Store.open(db)
    (a,) = runs(store, "a")
    assert store.take_gpus(a, "run", [(0, GPU0.uuid)], me())
    assert try_take(store, a, "run", all_of(GPU0, GPU1), me()).taken
    assert sorted(lease.gpu_index for lease in store.gpu_leases()) == [0, 1]


@pytest.mark.parametrize(("used", "free"), [(5000, False), (300, True)])
def test_foreign_memory_use_on_nvidia_smi_is_respected(db: Path, fake_smi: Any, used: int, free: bool) -> None:
    smi = fake_smi(f"0, {GPU0.uuid}, {used}\n1, {GPU1.uuid}, 0\n")
    store = Store.open(db)
    (a,) = runs(store, "a")
    verdict = try_take(store, a, "run", all_of(GPU0), me(), smi=smi)
    assert verdict.taken is free
    if not free:
        assert verdict.blockers == ("GPU 0 has 5000 MiB in use by a process ltx-pipeline did not start",)
    assert try_take(store, a, "run", all_of(GPU1), me(), smi=smi).taken


def test_the_queue_is_first_come_first_served_and_a_fitting_later_run_does_not_jump(db: Path) -> None:
    store = Store.open(db)
    a, b, c = runs(store, "a", "b", "c")
    assert store.take_gpus(a, "run", [(0, GPU0.uuid)], me())
    b_entry = store.enter_queue(b, "run", [(0, GPU0.uuid), (1, GPU1.uuid)], me())
    c_entry = store.enter_queue(c, "run", [(1, GPU1.uuid)], me())
    # GPU 1 is free and would fit c, but b waits for it first: c waits behind it.
    verdict = try_take(store, c, "run", all_of(GPU1), me(), queued_id=c_entry.id)
    assert (verdict.taken, verdict.position) == (False, 2)
    assert verdict.blockers == ("run b waits ahead of it in the GPU queue for GPU 1",)
    board = gpu_board(store)
    assert [(q["position"], q["run"], [g["held_by"] for g in q["gpus"]]) for q in board["queue"]] == [
        (1, "b", ["a", None]), (2, "c", [None])]
    # Not queued at all: every live waiter for its GPUs is ahead of it.
    assert not try_take(store, a, "run", all_of(GPU1), me()).taken
    store.release_gpus(a)
    assert try_take(store, b, "run", all_of(GPU0, GPU1), me(), queued_id=b_entry.id).taken
    assert [w.run_id for w in store.gpu_waiters()] == [c]  # taking left the queue in the same transaction


def test_a_dead_waiter_is_skipped_and_keeps_its_place_on_reattach(db: Path, dead: tuple[int, float, str]) -> None:
    store = Store.open(db)
    b, c, d = runs(store, "b", "c", "d")
    b_entry = store.enter_queue(b, "run", [(0, GPU0.uuid)], dead)
    c_entry = store.enter_queue(c, "run", [(0, GPU0.uuid)], me())
    d_entry = store.enter_queue(d, "run", [(0, GPU0.uuid)], me())
    assert gpu_board(store)["queue"][0]["engine"].startswith("gone")
    # b's engine died: it blocks nobody; c is first among the living.
    assert not try_take(store, d, "run", all_of(GPU0), me(), queued_id=d_entry.id).taken
    assert store.enter_queue(b, "run", [(0, GPU0.uuid)], me()).id == b_entry.id  # resume: same place
    assert not try_take(store, c, "run", all_of(GPU0), me(), queued_id=c_entry.id).taken
    assert try_take(store, b, "run", all_of(GPU0), me(), queued_id=b_entry.id).taken


class _Journal:
    """What a phase's journal keeps of a claim: the GPUs its launches are pinned to."""

    def __init__(self) -> None:
        self.pinned: tuple[int, ...] | None = None
        self.narrow_to: Any = None

    def pin(self, indices: list[int], narrow: Any = None) -> None:
        self.pinned, self.narrow_to = tuple(indices) or None, narrow


class _Ctx:
    def __init__(self) -> None:
        self.lines: list[str] = []
        self.journal = _Journal()

    def narrate(self, message: str) -> None:
        self.lines.append(message)

    warn = narrate


def test_a_busy_gpu_refuses_a_run_without_queue_in_one_line(db: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = Store.open(db)
    a, b = runs(store, "a", "b")
    assert store.take_gpus(a, "run", [(0, GPU0.uuid)], me())
    monkeypatch.setattr(claim_module, "_wanted", lambda ctx, span: (all_of(GPU0), None))
    with pytest.raises(Refused) as refused:
        RunGpus(store, b, "b", "/ws").claim(_Ctx())
    assert refused.value.line() == (
        f"Run b needs 1 of GPU(s) 0, and too few are free: GPU 0 is held by run a (run, pid {os.getpid()}) "
        f"(GPU 0 ({GPU0.uuid})). Fix: wait your turn with `ltx-pipeline resume --workspace /ws --run b --queue`, "
        "or resume once it is free.")
    assert store.gpu_waiters() == []


def test_ctrl_c_while_queued_leaves_the_queue_and_says_so(db: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = Store.open(db)
    a, b = runs(store, "a", "b")
    assert store.take_gpus(a, "run", [(0, GPU0.uuid)], me())
    monkeypatch.setattr(claim_module, "_wanted", lambda ctx, span: (all_of(GPU0), None))

    def interrupt(_: float) -> None:
        assert [w.run_id for w in store.gpu_waiters()] == [b]  # it did wait in the queue
        raise KeyboardInterrupt

    monkeypatch.setattr("ltx_pipeline.gpus.claim.time.sleep", interrupt)
    ctx = _Ctx()
    with pytest.raises(KeyboardInterrupt):
        RunGpus(store, b, "b", "/ws", queue=True).claim(ctx)
    assert store.gpu_waiters() == []
    assert ctx.lines[0].startswith("Waiting in the GPU queue, position 1: GPU 0 is held by run a")
    assert ctx.lines[-1] == ("Run b left the GPU queue (Ctrl-C); `ltx-pipeline resume --workspace /ws --run b "
                             "--queue` queues it again, at the end.")


def test_release_gives_back_only_when_nothing_the_run_launched_lives(db: Path, monkeypatch: pytest.MonkeyPatch,
                                                                     sleeper: subprocess.Popen[bytes],
                                                                     tmp_path: Path) -> None:
    store = Store.open(db)
    (a,) = runs(store, "a")
    monkeypatch.setattr(claim_module, "_wanted", lambda ctx, span: (all_of(GPU0), None))
    gpus = RunGpus(store, a, "a", "/ws")
    gpus.claim(_Ctx())
    store.add_process(Process(run_id=a, phase="train", kind="train", pid=sleeper.pid,
                              create_time=psutil.Process(sleeper.pid).create_time(), host=host_id(), cwd="/",
                              printable="trainer", log_path=str(tmp_path / "train.log")))
    gpus.release()  # a detached trainer still runs on it
    assert len(store.gpu_leases()) == 1
    gpus.claim(_Ctx())
    sleeper.kill()
    sleeper.wait()
    gpus.release()
    assert store.gpu_leases() == []
