"""Writing the export folder all at once: a temporary sibling filled, checked, then renamed into place.

Invariant: ``DIR`` either does not change or becomes the complete folder; a reader never sees half of it.
The temporary folder (``.<DIR>.export-*``) sits beside ``DIR`` so the rename stays on one file system, and
is removed on any failure. An existing ``DIR`` is replaced only when asked (``force``): it is moved aside,
the new folder renamed in, and only then the old one removed. Copied files are copied byte for byte and
their sha256 checked against the source; texts go through ``workspace.atomic_write``.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
from pathlib import Path

from ltx_pipeline.errors import BadInput, BadRequest
from ltx_pipeline.workspace import atomic_write

__all__ = ["sha256_of", "write_folder"]


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def write_folder(target: Path, copies: dict[str, Path], texts: dict[str, str], *, force: bool) -> Path:
    """Create ``target`` holding ``copies`` (name -> source file, copied unchanged) and ``texts`` (name -> text).

    Returns:
        ``target``, resolved.

    Raises:
        BadRequest: ``target`` exists and ``force`` is off, or it is not a folder.
        BadInput: a copy differs from its source, or the disk refused a write.
    """
    target = target.expanduser().resolve()
    if target.exists() and not target.is_dir():
        raise BadRequest(f"{target} exists and is not a folder", where="--to",
                         fix="choose a new folder for the export")
    if target.exists() and not force:
        raise BadRequest(f"{target} already exists", where="--to",
                         fix="choose a new folder, or pass --force to replace it")
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{target.name}.export-", dir=target.parent))
    try:
        for name, source in copies.items():
            _copy_checked(source, staging / name)
        for name, text in texts.items():
            atomic_write(staging / name, text, root=staging)
        _shareable(staging)
        _swap_in(staging, target)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return target


def _shareable(staging: Path) -> None:
    """The modes a plain ``mkdir`` and ``open`` would give (temp files and folders are private): the folder is
    made to be shared."""
    umask = os.umask(0)
    os.umask(umask)
    for path in staging.iterdir():
        path.chmod(0o666 & ~umask)
    staging.chmod(0o777 & ~umask)


def _copy_checked(source: Path, destination: Path) -> None:
    try:
        shutil.copyfile(source, destination)
    except OSError as exc:
        raise BadInput(f"Could not copy {source} to {destination}: {exc.strerror or exc}", where=str(destination),
                       fix="free disk space on the export's file system, then export again") from exc
    if sha256_of(source) != sha256_of(destination):
        raise BadInput(f"The copy of {source} differs from it", where=str(destination),
                       fix="check the disk, then export again")


def _swap_in(staging: Path, target: Path) -> None:
    """Rename ``staging`` to ``target``; an existing ``target`` is moved aside first and removed last."""
    if not target.exists():
        os.rename(staging, target)
        return
    aside = Path(tempfile.mkdtemp(prefix=f".{target.name}.replaced-", dir=target.parent))
    os.rename(target, aside / target.name)
    try:
        os.rename(staging, target)
    except BaseException:
        os.rename(aside / target.name, target)  # put the old folder back: DIR never goes missing
        shutil.rmtree(aside, ignore_errors=True)
        raise
    shutil.rmtree(aside, ignore_errors=True)
