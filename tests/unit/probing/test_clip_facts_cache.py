"""Issue 12: what reading a clip found is kept in the workspace's store, keyed by path, size and mtime.

A second probe of the same clips decodes none of them; a changed clip (new size or mtime) is read
again and its new facts replace the old; an unreadable clip is never cached (the user may fix it).
"""

from __future__ import annotations

from pathlib import Path

import pytest

import ltx_pipeline.probing._clips as clips_module
from ltx_pipeline.engine.journal import RunJournal
from ltx_pipeline.probing.dataset import read_clips
from ltx_pipeline.store import Store
from tests.conftest import mp4_bytes


@pytest.fixture
def journal(tmp_path: Path) -> RunJournal:
    store = Store.open(tmp_path / "ltx-pipeline.db")
    run = store.create_run("r1", {})
    assert run.id is not None
    return RunJournal(store, run.id, "probe")


@pytest.fixture
def decoded(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The clips read_clips actually opened with PyAV."""
    opened: list[str] = []
    real = clips_module.read_media_info

    def counting(path: Path):  # noqa: ANN202
        opened.append(path.name)
        return real(path)

    monkeypatch.setattr(clips_module, "read_media_info", counting)
    return opened


def test_unchanged_clips_come_from_the_store_and_changed_ones_are_read_again(tmp_path, journal, decoded) -> None:
    a, b = tmp_path / "a.mp4", tmp_path / "b.mp4"
    a.write_bytes(mp4_bytes(frames=25))
    b.write_bytes(mp4_bytes(frames=33))
    listed = [(1, a), (2, b)]
    first = read_clips(listed, cache=journal)
    assert (first.from_cache, sorted(decoded)) == (0, ["a.mp4", "b.mp4"])

    decoded.clear()
    second = read_clips(listed, cache=journal)
    assert (second.from_cache, decoded) == (2, [])
    assert second.facts == first.facts

    b.write_bytes(mp4_bytes(frames=49))  # the user replaced a clip: another size
    third = read_clips(listed, cache=journal)
    assert (third.from_cache, decoded) == (1, ["b.mp4"])
    assert third.facts[str(b)]["frames"] == 49 and third.facts[str(a)]["frames"] == 25
    decoded.clear()
    assert read_clips(listed, cache=journal).facts[str(b)]["frames"] == 49 and decoded == []


def test_a_touched_clip_is_read_again_and_unreadable_clips_are_never_cached(tmp_path, journal, decoded) -> None:
    import os

    good, broken = tmp_path / "good.mp4", tmp_path / "broken.mp4"
    good.write_bytes(mp4_bytes(frames=25))
    broken.write_bytes(mp4_bytes(frames=25)[:200])
    listed = [(1, good), (2, broken)]
    assert list(read_clips(listed, cache=journal).unreadable) == [str(broken)]
    stat = good.stat()
    os.utime(good, ns=(stat.st_atime_ns, stat.st_mtime_ns + 10**9))  # same bytes, a new mtime
    decoded.clear()
    again = read_clips(listed, cache=journal)
    assert sorted(decoded) == ["broken.mp4", "good.mp4"] and list(again.unreadable) == [str(broken)]
