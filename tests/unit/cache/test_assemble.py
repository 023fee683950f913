"""Assembling a run's .precomputed: hard link, else symlink, else copy; uses recorded; bad entries never linked."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest

from ltx_pipeline.cache import EntryStore, LinkKind, Modality, Want, assemble, condition_key, read_uses
from ltx_pipeline.cache.entries import DATA_FILE
from ltx_pipeline.cache.keys import Identity
from ltx_pipeline.errors import UnsafePath
from tests.unit.cache.conftest import put, video_key


def _run(tmp_path: Path) -> tuple[Path, Path, Path]:
    workspace = tmp_path / "ws"
    run_root = workspace / "runs" / "r1"
    return workspace, run_root, run_root / "dataset" / ".precomputed"


def _no_link(*_args: object, **_kwargs: object) -> None:
    raise OSError(errno.EXDEV, "Invalid cross-device link")


def _no_symlink(*_args: object, **_kwargs: object) -> None:
    raise OSError(errno.EPERM, "Operation not permitted")


@pytest.mark.parametrize(("broken", "how"), [((), LinkKind.HARDLINK), (("link",), LinkKind.SYMLINK),
                                             (("link", "symlink"), LinkKind.COPY)])
def test_entries_are_linked_by_the_first_way_that_works(store: EntryStore, tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch, broken: tuple[str, ...],
                                                        how: LinkKind) -> None:
    workspace, run_root, precomputed = _run(tmp_path)
    key = video_key()
    entry = put(store, key, b"v" * 64)
    if "link" in broken:
        monkeypatch.setattr(os, "link", _no_link)
    if "symlink" in broken:
        monkeypatch.setattr(os, "symlink", _no_symlink)
    done = assemble(store, precomputed, [Want(key, "clips/a.pt")], workspace=workspace, run="r1", run_root=run_root)
    dest = precomputed / "latents" / "clips" / "a.pt"
    assert [(link.path, link.how) for link in done.linked] == [(dest, how)] and done.missing == ()
    assert done.counts() == {how.value: 1}
    assert dest.read_bytes() == b"v" * 64
    assert dest.is_symlink() == (how is LinkKind.SYMLINK)
    assert os.path.samefile(dest, entry) == (how is not LinkKind.COPY)
    assert not list(dest.parent.glob(".*"))  # no temporary name left behind


def test_the_use_record_names_each_linked_file_and_reassembly_replaces_a_folder(store: EntryStore,
                                                                                tmp_path: Path) -> None:
    workspace, run_root, precomputed = _run(tmp_path)
    video, other = video_key("m-a"), video_key("m-b", subject="b.mp4")
    text = condition_key(prompt="tok a cat", text_encoder=Identity("g", "g"), checkpoint=Identity("c", "c"),
                         trainer=Identity("t", "t"), load_in_8bit=False)
    for key in (video, other, text):
        put(store, key)
    assemble(store, precomputed, [Want(video, "a.pt"), Want(text, "a.pt")], workspace=workspace, run="r1",
             run_root=run_root)
    sanity = run_root / "overfit" / ".precomputed"
    assemble(store, sanity, [Want(video, "a.pt")], workspace=workspace, run="r1", run_root=run_root)
    [record] = read_uses(store.root)
    assert record.run == "r1" and record.workspace == str(workspace.resolve())
    assert dict(record.links) == {"dataset/.precomputed/latents/a.pt": video.name,
                                  "dataset/.precomputed/conditions/a.pt": text.name,
                                  "overfit/.precomputed/latents/a.pt": video.name}
    assemble(store, precomputed, [Want(other, "b.pt")], workspace=workspace, run="r1", run_root=run_root)
    [record] = read_uses(store.root)
    assert record.keys == {other.name, video.name}  # dataset's old links replaced; overfit's kept
    assert Modality.CONDITION.value not in {name.split("-")[0] for name in record.keys}


def test_a_missing_or_corrupted_entry_is_not_linked(store: EntryStore, tmp_path: Path) -> None:
    workspace, run_root, precomputed = _run(tmp_path)
    good, bad, absent = video_key("m-1", "1.mp4"), video_key("m-2", "2.mp4"), video_key("m-3", "3.mp4")
    put(store, good)
    put(store, bad, b"q" * 700)
    data = store.folder(bad) / DATA_FILE
    os.chmod(data, 0o644)
    data.write_bytes(b"Q" * 700)
    wants = [Want(good, "1.pt"), Want(bad, "2.pt"), Want(absent, "3.pt")]
    done = assemble(store, precomputed, wants, workspace=workspace, run="r1", run_root=run_root)
    assert [link.want.name for link in done.linked] == ["1.pt"]
    assert [want.name for want in done.missing] == ["2.pt", "3.pt"]
    assert len(done.problems) == 1 and "recorded sha256; quarantined" in done.problems[0]
    assert not (precomputed / "latents" / "2.pt").exists() and store.get(bad) is None


@pytest.mark.parametrize("name", ["../escape.pt", "/abs.pt", "a.safetensors"])
def test_a_want_cannot_leave_its_folder(store: EntryStore, tmp_path: Path, name: str) -> None:
    workspace, run_root, precomputed = _run(tmp_path)
    key = video_key()
    put(store, key)
    with pytest.raises(UnsafePath):
        assemble(store, precomputed, [Want(key, name)], workspace=workspace, run="r1", run_root=run_root)
