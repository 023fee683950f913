"""The store of entries: one maker per key, nothing half-written ever returned, bad entries quarantined."""

from __future__ import annotations

import multiprocessing
import os
import shutil
import signal
import time
from pathlib import Path
from typing import Any

import pytest

from ltx_pipeline.cache import ClaimState, EntryStore, clean_leftovers, verify_entries
from ltx_pipeline.cache.entries import DATA_FILE, RECORD_FILE
from tests.unit.cache.conftest import put, video_key

_FORK = multiprocessing.get_context("fork")


def test_an_entry_put_is_got_back_whole_and_read_only(store: EntryStore) -> None:
    key = video_key()
    assert store.get(key) is None
    path = put(store, key, b"x" * 5000)
    assert store.get(key) == path and path.read_bytes() == b"x" * 5000
    assert not os.access(path, os.W_OK) or os.geteuid() == 0  # a hard link in a run cannot write through
    entry = store.read(path.parent)
    assert entry is not None and entry.key == key and entry.size == 5000 and entry.sha256.startswith("sha256:")
    with store.claim(key) as claim:  # made: nobody makes it again
        assert claim.state is ClaimState.MADE and claim.path == path
        with pytest.raises(RuntimeError, match="only a MAKE claim puts"):
            claim.put(path)


def _claimant(root: str, log: str, barrier: Any) -> None:
    store = EntryStore(Path(root))
    key = video_key()
    barrier.wait()
    with store.claim(key) as claim:
        if claim.must_make:
            with open(log, "a", encoding="utf-8") as handle:
                handle.write(f"{os.getpid()}\n")
            time.sleep(0.2)  # encoding: the other claimant waits on the key's lock meanwhile
            source = Path(root) / f"src-{os.getpid()}"
            source.write_bytes(b"made once")
            claim.put(source, move=True)
    assert store.get(key) is not None


def test_two_processes_claiming_one_key_make_it_exactly_once(store: EntryStore, tmp_path: Path) -> None:
    store.root.mkdir(parents=True)
    log = tmp_path / "makers.log"
    barrier = _FORK.Barrier(2)
    workers = [_FORK.Process(target=_claimant, args=(str(store.root), str(log), barrier)) for _ in range(2)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(10)
    assert [worker.exitcode for worker in workers] == [0, 0]
    assert len(log.read_text().split()) == 1
    assert store.get(video_key()) is not None


def test_a_claim_that_does_not_wait_says_busy(store: EntryStore) -> None:
    key = video_key()
    with store.claim(key) as first:
        assert first.must_make
        child = _FORK.Process(target=_busy_child, args=(str(store.root),))
        child.start()
        child.join(10)
        assert child.exitcode == 0


def _busy_child(root: str) -> None:
    with EntryStore(Path(root)).claim(video_key(), wait=False) as claim:
        assert claim.state is ClaimState.BUSY and claim.path is None


def _writer(root: str, stop_at: str, ready: Any) -> None:
    """Put an entry, stopping for good (to be SIGKILLed) at ``stop_at``."""
    import ltx_pipeline.cache.entries as entries

    def stop(*_args: Any, **_kwargs: Any) -> None:
        ready.set()
        time.sleep(60)

    if stop_at == "data":  # half the data written
        def half(src: Any, dst: Any, **_kwargs: Any) -> None:
            Path(dst).write_bytes(Path(src).read_bytes()[:100])
            stop()
        entries.shutil.copyfile = half  # type: ignore[assignment]
    elif stop_at == "rename":  # data and record written, not yet renamed into place
        entries.os.rename = stop  # type: ignore[assignment]
    store = EntryStore(Path(root))
    source = Path(root) / "src"
    source.write_bytes(b"z" * 1000)
    with store.claim(video_key()) as claim:
        claim.put(source)


@pytest.mark.parametrize("stop_at", ["data", "rename"])
def test_a_sigkilled_writer_leaves_no_entry_and_the_key_free(store: EntryStore, stop_at: str) -> None:
    store.root.mkdir(parents=True)
    ready = _FORK.Event()
    writer = _FORK.Process(target=_writer, args=(str(store.root), stop_at, ready))
    writer.start()
    assert ready.wait(10)
    assert any(store.staging_dir.iterdir())  # it was mid-put
    os.kill(writer.pid or 0, signal.SIGKILL)
    writer.join(10)
    key = video_key()
    assert store.get(key) is None and list(store.entries()) == []
    assert [p.parent.name for p in clean_leftovers(store) if p.parent == store.staging_dir] == ["tmp"]
    with store.claim(key, timeout=2) as claim:  # the kernel released the dead writer's lock
        assert claim.must_make
        source = store.root / "again"
        source.write_bytes(b"whole")
        claim.put(source)
    assert store.get(key) is not None and store.get(key).read_bytes() == b"whole"  # type: ignore[union-attr]


def _rewrite(path: Path, data: bytes) -> None:
    os.chmod(path, 0o644)
    path.write_bytes(data)


def test_a_corrupted_entry_is_quarantined_by_verify_and_never_got(store: EntryStore) -> None:
    good, flipped, cut = video_key("m-1"), video_key("m-2"), video_key("m-3")
    for key in (good, flipped, cut):
        put(store, key, b"a" * 300)
    _rewrite(store.folder(flipped) / DATA_FILE, b"b" * 300)  # same size, other bytes
    _rewrite(store.folder(cut) / DATA_FILE, b"a" * 10)
    assert store.get(cut) is None  # a short file is never returned, verified or not
    verdicts = {v.name: v for v in verify_entries(store)}
    assert verdicts[good.name].ok and verdicts[good.name].quarantined is None
    assert "recorded sha256" in str(verdicts[flipped.name].problem)
    assert "10 bytes, its record says 300" in str(verdicts[cut.name].problem)
    for key in (flipped, cut):
        moved = verdicts[key.name].quarantined
        assert moved is not None and moved.parent == store.quarantine_dir and (moved / "reason.json").is_file()
        assert store.get(key) is None and not store.folder(key).exists()
    assert store.get(good) is not None


def test_a_loader_hook_finds_a_wrong_shape(store: EntryStore) -> None:
    key = video_key()
    put(store, key)
    verdicts = verify_entries(store, deep=False, loader=lambda path, entry: "latents are 1x2, bucket wants 4x2")
    assert verdicts[0].problem == "latents are 1x2, bucket wants 4x2" and store.get(key) is None
    put(store, key)
    crash = verify_entries(store, loader=lambda path, entry: {}["x"])
    assert "could not be loaded: KeyError" in str(crash[0].problem)


def test_an_entry_whose_record_names_another_key_is_not_got(store: EntryStore) -> None:
    a, b = video_key("m-a"), video_key("m-b")
    put(store, a)
    put(store, b)
    shutil.copyfile(store.folder(a) / RECORD_FILE, store.folder(b) / RECORD_FILE)
    assert store.get(b) is None and store.get(a) is not None
    verdicts = {v.name: v for v in verify_entries(store, deep=False)}
    assert verdicts[b.name].problem == "entry.json does not describe this entry" and verdicts[a.name].ok


def test_a_claim_on_a_bad_entry_makes_it_again_and_sets_the_bad_one_aside(store: EntryStore) -> None:
    key = video_key()
    put(store, key, b"a" * 300)
    (store.folder(key) / RECORD_FILE).write_text("{not json")
    assert store.get(key) is None
    path = put(store, key, b"b" * 300)
    assert store.get(key) == path and path.read_bytes() == b"b" * 300
    [aside] = store.quarantine_dir.iterdir()
    assert "made again" in (aside / "reason.json").read_text()
