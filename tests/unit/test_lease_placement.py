"""Which GPUs a run gets (#46): any free ones among those visible, not the first ones; a phase's span (one
preprocessing rank or autotune trial per free GPU) taken up to what is free; what a later phase cannot use given
back; and every process a phase launches pinned to the GPUs its run holds."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import psutil
import pytest

from ltx_pipeline.engine.journal import RunJournal
from ltx_pipeline.engine.processes import host_id
from ltx_pipeline.gpus import GpuRef, RunGpus, try_take
from ltx_pipeline.gpus import claim as claim_module
from ltx_pipeline.gpus.devices import GpuNeed, run_gpus
from ltx_pipeline.probing.gpu_list import Gpu
from ltx_pipeline.store import Store, saved_id

GPUS = tuple(GpuRef(i, f"GPU-{i}0000000-2222-3333-4444-555555555555") for i in range(4))


def me() -> tuple[int, float, str]:
    return os.getpid(), psutil.Process().create_time(), host_id()


@pytest.fixture
def store(tmp_path: Path) -> Store:
    return Store.open(tmp_path / "ltx-pipeline.db")


def runs(store: Store, *names: str) -> list[int]:
    return [saved_id(store.create_run(name, {})) for name in names]


def held(store: Store, run_id: int) -> list[int]:
    return sorted(lease.gpu_index for lease in store.gpu_leases() if lease.run_id == run_id)


def test_a_run_takes_the_free_gpus_not_the_first_ones(store: Store) -> None:
    a, b, c = runs(store, "a", "b", "c")
    assert try_take(store, a, "run", GpuNeed(GPUS, 1, 1), me()).gpus == (GPUS[0],)
    verdict = try_take(store, b, "run", GpuNeed(GPUS, 2, 2), me())
    assert verdict.taken and verdict.gpus == GPUS[1:3]  # GPU 0 is a's: b runs beside it
    assert held(store, b) == [1, 2]
    refused = try_take(store, c, "run", GpuNeed(GPUS, 2, 2), me())  # one left: too few
    assert not refused.taken and len(refused.blockers) == 3 and held(store, c) == []


@pytest.mark.parametrize("busy", [0, 1, 3])
def test_a_span_takes_every_free_gpu_up_to_its_most(store: Store, busy: int) -> None:
    other, mine = runs(store, "other", "mine")
    if busy:
        assert store.take_gpus(other, "run", [(g.index, g.uuid) for g in GPUS[:busy]], me())
    verdict = try_take(store, mine, "run", GpuNeed(GPUS, 1, 3), me())
    assert verdict.taken
    assert [g.index for g in verdict.gpus] == list(range(busy, 4))[:3]


def test_run_gpus_caps_a_span_at_what_is_visible() -> None:
    visible = [Gpu(index=i, name="Toy", memory_mib=1024, uuid=g.uuid, driver="") for i, g in enumerate(GPUS[:2])]
    assert run_gpus(visible, 1, None) == GpuNeed(GPUS[:2], 1, 1)
    assert run_gpus(visible, 1, (1, 8)) == GpuNeed(GPUS[:2], 1, 2)
    assert run_gpus(visible, None, None) == GpuNeed(GPUS[:2], 2, 2)
    assert run_gpus(visible, 1, (4, 4)) == GpuNeed(GPUS[:2], 2, 2)


class _Ctx:
    def __init__(self, journal: Any) -> None:
        self.journal = journal
        self.phase = journal.phase
        self.lines: list[str] = []

    def narrate(self, message: str) -> None:
        self.lines.append(message)

    warn = narrate


def test_a_later_phase_keeps_what_it_uses_and_gives_back_the_rest(store: Store,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    (a,) = runs(store, "a")
    visible = [Gpu(index=g.index, name="Toy", memory_mib=1024, uuid=g.uuid, driver="") for g in GPUS]
    monkeypatch.setattr(claim_module, "_wanted", lambda ctx, span: (run_gpus(visible, 1, span), None))
    gpus = RunGpus(store, a, "a", "/ws")
    autotune = RunJournal(store, a, "autotune")
    gpus.claim(_Ctx(autotune), (1, 4))  # one trial per free GPU
    assert autotune.pinned == (0, 1, 2, 3) and held(store, a) == [0, 1, 2, 3]
    assert {lease.kind for lease in store.gpu_leases()} == {"autotune"}
    train = RunJournal(store, a, "train")
    said = _Ctx(train)
    gpus.claim(said, (1, 3))  # preprocessing on three, then one trainer process
    assert train.pinned == (0, 1, 2) and held(store, a) == [0, 1, 2]
    assert {lease.kind for lease in store.gpu_leases()} == {"train"}  # what the board says they are held for
    train.narrow(1)
    narrowed: tuple[int, ...] | None = train.pinned
    assert narrowed == (0,) and held(store, a) == [0]
    # Each give-back is said, naming what went back and what is still held (the "Holding" line promised it).
    assert said.lines == ["Gave back GPU 3: train uses 3; holding GPU 0, GPU 1, GPU 2.",
                          "Gave back GPU 1, GPU 2: train uses 1; holding GPU 0."]
    gpus.release()
    assert store.gpu_leases() == []


def test_every_process_a_phase_launches_is_pinned_to_the_gpus_held(store: Store, tmp_path: Path) -> None:
    from ltx_pipeline.backends.base import LaunchSpec

    (a,) = runs(store, "a")
    journal = RunJournal(store, a, "train")
    journal.pin([2, 3])
    plain = journal.run_to_end("preprocess", 1, LaunchSpec((sys.executable, "-c", "pass"), tmp_path), tmp_path / "p")
    own = LaunchSpec((sys.executable, "-c", "pass"), tmp_path, {"CUDA_VISIBLE_DEVICES": "3"})
    trial = journal.run_to_end("preprocess", 2, own, tmp_path / "t")
    rows = {row.stage: row for row in store.processes(a)}
    assert rows[plain.stage].env == {"CUDA_DEVICE_ORDER": "PCI_BUS_ID", "CUDA_VISIBLE_DEVICES": "2,3"}
    assert rows[trial.stage].env == {"CUDA_VISIBLE_DEVICES": "3"}  # a trial's own GPU wins


def test_the_board_names_the_live_process_pinned_on_each_gpu(store: Store, tmp_path: Path) -> None:
    import subprocess

    from ltx_pipeline.gpus import gpu_board
    from ltx_pipeline.store import Process

    (a,) = runs(store, "a")
    assert store.take_gpus(a, "autotune", [(g.index, g.uuid) for g in GPUS[:2]], me())
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        store.add_process(Process(run_id=a, phase="autotune", kind="trial", stage=3, pid=sleeper.pid,
                                  create_time=psutil.Process(sleeper.pid).create_time(), host=host_id(), cwd="/",
                                  env={"CUDA_VISIBLE_DEVICES": "1"}, printable="trial",
                                  log_path=str(tmp_path / "trial.log")))
        running = {h["gpu"]: h["running"] for h in gpu_board(store)["holders"]}
        assert running == {0: [], 1: [f"trial 3 (pid {sleeper.pid})"]}
    finally:
        sleeper.kill()
        sleeper.wait()
    assert {h["gpu"]: h["running"] for h in gpu_board(store)["holders"]} == {0: [], 1: []}


def test_the_train_phase_asks_only_for_its_trainer_when_it_follows_a_live_one(monkeypatch: pytest.MonkeyPatch) -> None:
    import phases.train as train_phase

    class _Validate:
        per_node = 2

    class _Journal:
        def __init__(self, live: object) -> None:
            self._live = live

        def live(self, kind: str) -> object:
            return self._live

    class _TrainCtx:
        def __init__(self, live: object) -> None:
            self.journal = _Journal(live)

        def output(self, kind: object) -> _Validate:
            return _Validate()

    monkeypatch.setattr(train_phase, "preprocess_span", lambda ctx, least: (least, 8))  # 8 GPUs free to encode on
    phase = train_phase.TrainPhase()
    assert phase.gpu_span(_TrainCtx(None)) == (2, 8)  # type: ignore[arg-type]
    assert phase.gpu_span(_TrainCtx(object())) == (2, 2)  # type: ignore[arg-type]  # a trainer runs: follow it


def test_a_sequential_sweep_gives_back_the_gpus_its_preprocessing_used(store: Store,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    from ltx_pipeline.autotune.sweep import Sweep

    (a,) = runs(store, "a")
    visible = [Gpu(index=g.index, name="Toy", memory_mib=1024, uuid=g.uuid, driver="") for g in GPUS]
    monkeypatch.setattr(claim_module, "_wanted", lambda ctx, span: (run_gpus(visible, 1, span), None))
    journal = RunJournal(store, a, "autotune")
    RunGpus(store, a, "a", "/ws").claim(_Ctx(journal), (1, 4))  # the sanity set's preprocessing on every GPU
    sweep = Sweep.__new__(Sweep)  # only what keep_trial_gpus reads
    sweep.ctx, sweep.gpu_indices = _Ctx(journal), [0, 1, 2, 3]  # type: ignore[assignment]
    shared_with_the_trial_runner = sweep.gpu_indices
    sweep.keep_trial_gpus(1)  # one trial at a time
    assert journal.pinned == (0,) and held(store, a) == [0] and shared_with_the_trial_runner == [0]
    sweep.keep_trial_gpus(2)  # never takes more back
    assert held(store, a) == [0]
