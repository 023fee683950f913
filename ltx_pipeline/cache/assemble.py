"""Assembling a run's ``.precomputed`` from the cache: link what is there, name what must be encoded.

Owns putting an entry's data at ``<precomputed>/<subfolder>/<name>.pt``: a hard link when the run and the
cache share a file system, else a symbolic link (the trainer follows it), else a copy, in that order, each
made under a temporary name and renamed into place (a reader never sees half a file; an existing file
there is replaced). Before linking, the run's use record says which keys it now uses (so ``prune`` keeps
them), and each entry is checked (its size, and by default its sha256): a bad one is quarantined and
counted as missing, never linked. The caller assembles only folders its run owns.
"""

from __future__ import annotations

import errno
import os
import shutil
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path, PurePosixPath

from ltx_pipeline.cache._locks import held
from ltx_pipeline.cache.entries import EntryStore
from ltx_pipeline.cache.keys import SUBFOLDERS, CacheKey
from ltx_pipeline.cache.uses import record_uses
from ltx_pipeline.cache.verify import verify_entry
from ltx_pipeline.errors import UnsafePath
from ltx_pipeline.workspace import ensure_inside

__all__ = ["Assembly", "LinkKind", "Linked", "Want", "assemble", "link_entry"]

_LOCK_WAIT_S = 30.0


class LinkKind(StrEnum):
    """How an entry reached a run: hard link, symbolic link or copy."""

    HARDLINK = "hardlink"
    SYMLINK = "symlink"
    COPY = "copy"


@dataclass(frozen=True)
class Want:
    """One file a run's ``.precomputed`` needs: its key, and its name inside the modality's subfolder (``a/b.pt``)."""

    key: CacheKey
    name: str

    def relative(self) -> PurePosixPath:
        return PurePosixPath(SUBFOLDERS[self.key.modality]) / self.name


@dataclass(frozen=True)
class Linked:
    """One file placed from the cache."""

    want: Want
    path: Path
    how: LinkKind


@dataclass(frozen=True)
class Assembly:
    """What ``assemble`` did: files placed from the cache, and the wants left to encode (with why, if known)."""

    linked: tuple[Linked, ...]
    missing: tuple[Want, ...]
    problems: tuple[str, ...]  # bad entries quarantined on the way, one line each

    def counts(self) -> dict[str, int]:
        """``{"hardlink": n, "symlink": n, "copy": n}`` (only kinds used)."""
        return dict(Counter(link.how.value for link in self.linked))


def link_entry(source: Path, dest: Path) -> LinkKind:
    """Place ``source`` at ``dest``: hard link, else symlink, else copy; atomically replacing what is there."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = dest.with_name(f".{dest.name}.cache-{os.getpid()}")
    tmp.unlink(missing_ok=True)
    try:
        try:
            os.link(source, tmp)
            how = LinkKind.HARDLINK
        except OSError as exc:
            if exc.errno == errno.ENOENT and not source.exists():
                raise  # the entry went away: not a reason to fall back
            try:
                os.symlink(source.absolute(), tmp)
                how = LinkKind.SYMLINK
            except OSError:
                shutil.copyfile(source, tmp)
                how = LinkKind.COPY
        os.replace(tmp, dest)
        tmp.unlink(missing_ok=True)  # dest was already a link to this file: rename() did nothing (POSIX)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return how


def _destination(precomputed: Path, want: Want) -> Path:
    relative = want.relative()
    if relative.is_absolute() or ".." in relative.parts or not want.name.endswith(".pt"):
        raise UnsafePath(f"Cache entry name {want.name!r} is not a relative .pt path", where=str(precomputed),
                         fix="name entries as the trainer names outputs: the media path relative to the "
                             "dataset, with .pt")
    return ensure_inside(precomputed, precomputed / relative)


def assemble(store: EntryStore, precomputed: Path, wants: Sequence[Want], *, workspace: Path, run: str,
             run_root: Path, deep: bool = True) -> Assembly:
    """Place every want that has a good entry into ``precomputed``; return what was placed and what is missing.

    Args:
        store: the cache.
        precomputed: the run's ``.precomputed`` folder (inside ``run_root``).
        wants: the files it needs.
        workspace: the run's workspace, and ``run`` its name: the use record's owner.
        run_root: the run's folder; the use record names files relative to it.
        deep: check each entry's sha256 before linking it (reads it once).

    Raises:
        UnsafePath: a want's name or ``precomputed`` would leave the run's folder.
    """
    ensure_inside(run_root, precomputed)
    good: list[tuple[Want, Path]] = []
    missing: list[Want] = []
    problems: list[str] = []
    for want in wants:
        dest = _destination(precomputed, want)
        folder = store.folder(want.key)
        if not folder.is_dir():  # entry folders appear whole: one there but bad is corrupted (verified next)
            missing.append(want)
            continue
        verdict = verify_entry(store, folder, deep=deep)
        if not verdict.ok:
            problems.append(f"{want.key.short} ({want.name}): {verdict.problem}; quarantined")
            missing.append(want)
            continue
        good.append((want, dest))
    folder_text = precomputed.resolve().relative_to(run_root.resolve()).as_posix()
    record_uses(store.root, workspace, run, folder_text,
                {dest.relative_to(run_root.resolve()).as_posix(): want.key.name for want, dest in good})
    linked: list[Linked] = []
    for want, dest in good:
        # Shared: links of one key proceed together; prune and quarantine (exclusive) wait for them.
        with held(store.lock_path(want.key.name), exclusive=False, timeout=_LOCK_WAIT_S):
            source = store.get(want.key)
            try:
                how = link_entry(source, dest) if source is not None else None
            except FileNotFoundError:
                how = None  # pruned or quarantined between the check and the link
        if how is None:
            missing.append(want)
        else:
            linked.append(Linked(want, dest, how))
    return Assembly(tuple(linked), tuple(missing), tuple(problems))
