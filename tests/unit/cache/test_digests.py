"""Identities read from files: media digests remembered by path, size, mtime and inode; the encoder's code."""

from __future__ import annotations

import json
import os
from pathlib import Path

from ltx_pipeline.cache import MediaDigests, encoder_identity, trainer_identity
from ltx_pipeline.cache.digests import MEDIA_DIGESTS
from ltx_pipeline.code_identity import code_identity


def test_an_unchanged_file_is_read_once_per_workspace(tmp_path: Path) -> None:
    workspace, clip = tmp_path / "ws", tmp_path / "data" / "a.mp4"
    clip.parent.mkdir()
    clip.write_bytes(b"frames" * 1000)
    with MediaDigests(workspace) as digests:
        first = digests.of(clip)
        assert digests.of(clip) == first and digests.hashed == 1
    assert first.label == "a.mp4" and first.value.startswith("sha256:")
    saved = json.loads((workspace / MEDIA_DIGESTS).read_text())
    assert saved["files"][str(clip.resolve())]["digest"] == first.value
    again = MediaDigests(workspace)
    assert again.of(clip) == first and again.hashed == 0  # from the file, not re-read
    copy = tmp_path / "data" / "renamed.mp4"
    copy.write_bytes(clip.read_bytes())
    assert again.of(copy).value == first.value  # content-addressed: the name does not count


def test_a_rewritten_or_replaced_file_is_hashed_again(tmp_path: Path) -> None:
    workspace, clip = tmp_path / "ws", tmp_path / "a.mp4"
    clip.write_bytes(b"one" * 10)
    with MediaDigests(workspace) as digests:
        old = digests.of(clip)
    stat = clip.stat()
    replacement = tmp_path / "b.mp4"
    replacement.write_bytes(b"two" * 10)  # same size
    os.utime(replacement, ns=(stat.st_atime_ns, stat.st_mtime_ns))  # and the same mtime (cp -p, rsync -t)
    os.replace(replacement, clip)
    digests = MediaDigests(workspace)
    assert digests.of(clip).value != old.value and digests.hashed == 1


def test_two_writers_digests_are_merged(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    (tmp_path / "a").write_bytes(b"a")
    (tmp_path / "b").write_bytes(b"b")
    first, second = MediaDigests(workspace), MediaDigests(workspace)
    first.of(tmp_path / "a")
    second.of(tmp_path / "b")
    first.save()
    second.save()
    files = json.loads((workspace / MEDIA_DIGESTS).read_text())["files"]
    assert sorted(Path(name).name for name in files) == ["a", "b"]


def _checkout(root: Path, version: str = "1.2.0") -> Path:
    for folder in ("packages/ltx-trainer/src/ltx_trainer", "packages/ltx-trainer/scripts", "packages/ltx-core/src"):
        (root / folder).mkdir(parents=True, exist_ok=True)
    pyproject = f'[project]\nname = "ltx-trainer"\nversion = "{version}"\n'
    (root / "packages/ltx-trainer/pyproject.toml").write_text(pyproject)
    (root / "packages/ltx-trainer/scripts/process_videos.py").write_text("print('encode')\n")
    (root / "uv.lock").write_text("torch 2.7\n")
    return root


def test_the_trainer_identity_follows_its_version_source_and_lock(tmp_path: Path) -> None:
    root = _checkout(tmp_path / "ltx2")
    base = trainer_identity(root)
    assert base.label.startswith("ltx-trainer 1.2.0 (source ") and base.value.startswith("ltx-trainer 1.2.0 sha256:")
    assert trainer_identity(root) == base
    script = root / "packages/ltx-trainer/scripts/process_videos.py"
    script.write_text("print('encode differently')\n")
    changed = trainer_identity(root)
    assert changed.value != base.value
    (root / "uv.lock").write_text("torch 2.8\n")
    assert trainer_identity(root).value != changed.value
    assert encoder_identity(root) == trainer_identity(root)
    assert encoder_identity(None).value == code_identity()  # the toy backends' own preprocessing
