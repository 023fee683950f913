"""``ltx-pipeline cache ls|verify|prune|import``: look at, check, trim and fill the latent cache.

Owns the ``cache`` Typer sub-app (registered in ``cli/app.py`` with ``app.add_typer(cache_app, name="cache")``):
parsing the options (``--older-than 30d``), calling ``driving.cache`` (``driving.cache_import``) and showing
what comes back, as a table and lines or as JSON. Exit codes: 0 done (also when the cache is off: it says so);
2 ``verify`` found bad entries (each printed, each quarantined), ``import`` refused a file, or bad input.
"""

from __future__ import annotations

import json
import re
import time
from dataclasses import asdict
from pathlib import Path
from typing import Annotated, Any

import typer

from ltx_pipeline.cli import Ending
from ltx_pipeline.cli.options import WorkspaceOpt
from ltx_pipeline.errors import BadInput

__all__ = ["cache_app", "parse_duration"]

cache_app = typer.Typer(name="cache", add_completion=False, no_args_is_help=True, rich_markup_mode=None,
                        help="The latent cache: preprocessed samples shared by every run of the workspace.")

CacheDirOpt = Annotated[Path | None, typer.Option("--cache-dir", help="The cache's folder, e.g. one shared by a "
                                                  "team (default: the one runs use: $LTX_PIPELINE_LATENT_CACHE, "
                                                  "else the workspace's cache/latents).")]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print JSON.")]
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}
_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhdw])\s*$")


def parse_duration(text: str, where: str = "--older-than") -> float:
    """``30d`` -> seconds (units s, m, h, d, w).

    Raises:
        BadInput: not a number followed by one of those units.
    """
    match = _DURATION.match(text.lower())
    if not match:
        raise BadInput(f"{text!r} is not a duration", where=where, fix="write a number and a unit: 30d, 12h, 90m, 2w")
    return float(match.group(1)) * _UNITS[match.group(2)]


def _size(count: int) -> str:
    value = float(count)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if value < 1024:
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{value:.1f} TiB"


def _count(entries: int) -> str:
    return f"{entries} entr{'y' if entries == 1 else 'ies'}"


def _ago(seconds: float) -> str:
    seconds = max(0.0, seconds)
    for unit, span in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= span:
            return f"{seconds / span:.0f}{unit} ago"
    return "just now"


@cache_app.command("ls")
def ls_cmd(workspace: WorkspaceOpt = None, cache_dir: CacheDirOpt = None, as_json: JsonOpt = False) -> Ending:
    """List the cache's entries: what each holds, its size, age, last use and the runs that use it."""
    from ltx_pipeline.cli.console import out
    from ltx_pipeline.driving.cache import list_cache

    listing = list_cache(workspace, cache_dir)
    if listing is None:
        return _off(as_json)
    if as_json:
        out.print_json(json.dumps({"root": str(listing.root), "entries": [asdict(row) for row in listing.rows],
                                   "total_bytes": listing.total_bytes, "quarantined": listing.quarantined,
                                   "unreadable": listing.unreadable}))
        return Ending.DONE
    if listing.rows:
        from rich.table import Table

        now = time.time()
        table = Table(title=f"Latent cache {listing.root}")
        for column in ("entry", "kind", "clip", "bucket", "size", "made", "last used", "runs"):
            table.add_column(column)
        for row in listing.rows:
            table.add_row(row.name[: len(row.modality) + 13], row.modality, row.subject or "-", row.bucket or "-",
                          _size(row.size), _ago(now - row.created_at), _ago(now - row.last_used),
                          ", ".join(row.runs) or "-")
        out.print(table)
    set_aside = f"; {listing.quarantined} quarantined" if listing.quarantined else ""
    unreadable = f"; {listing.unreadable} unreadable (run `ltx-pipeline cache verify`)" if listing.unreadable else ""
    out.print(f"{_count(len(listing.rows))}, {_size(listing.total_bytes)} in {listing.root}{set_aside}{unreadable}.",
              markup=False)
    return Ending.DONE


@cache_app.command("verify")
def verify_cmd(workspace: WorkspaceOpt = None, cache_dir: CacheDirOpt = None, as_json: JsonOpt = False,
               quick: Annotated[bool, typer.Option("--quick", help="Check sizes and records only, not each "
                                                   "file's sha256.")] = False) -> Ending:
    """Check every entry; move bad ones to the quarantine (the next run that needs them makes them again)."""
    from ltx_pipeline.cli.console import out
    from ltx_pipeline.driving.cache import verify_cache

    checked = verify_cache(workspace, cache_dir, deep=not quick)
    if checked is None:
        return _off(as_json)
    ending = Ending.INVALID if checked.bad else Ending.DONE
    if as_json:
        out.print_json(json.dumps({"root": str(checked.root), "checked": len(checked.verdicts),
                                   "bad": [_verdict(v) for v in checked.bad],
                                   "leftovers_removed": checked.leftovers_removed}))
        return ending
    for verdict in checked.bad:
        where = f"quarantined in {verdict.quarantined}" if verdict.quarantined else "left in place: its key was busy"
        out.print(f"bad entry {verdict.name}: {verdict.problem}; {where}", markup=False)
    out.print(f"{_count(len(checked.verdicts))} checked in {checked.root}: {len(checked.bad)} bad.", markup=False)
    return ending


def _off(as_json: bool) -> Ending:
    """Runs use no cache ($LTX_PIPELINE_LATENT_CACHE=off) and no --cache-dir names one: say so; nothing to do."""
    from ltx_pipeline.cli.console import out
    from ltx_pipeline.driving.cache import CACHE_OFF

    if as_json:
        out.print_json(json.dumps({"root": None, "off": True, "message": CACHE_OFF}))
    else:
        out.print(CACHE_OFF, markup=False)
    return Ending.DONE


def _verdict(verdict: Any) -> dict[str, Any]:
    return {"name": verdict.name, "problem": verdict.problem,
            "quarantined": str(verdict.quarantined) if verdict.quarantined else None}


@cache_app.command("prune")
def prune_cmd(workspace: WorkspaceOpt = None, cache_dir: CacheDirOpt = None, as_json: JsonOpt = False,
              older_than: Annotated[str | None, typer.Option("--older-than", metavar="AGE", help="Only entries "
                                    "unused for longer than AGE (30d, 12h, 2w); default: any age.")] = None,
              keep_used: Annotated[bool, typer.Option("--keep-used", help="Keep every entry any run used, "
                                   "finished runs' too.")] = False) -> Ending:
    """Remove entries no live or resumable run uses (a run that has not finished always keeps its entries)."""
    from ltx_pipeline.cli.console import out
    from ltx_pipeline.driving.cache import prune_cache

    age = parse_duration(older_than) if older_than is not None else None
    done = prune_cache(workspace, cache_dir, older_than=age, keep_used=keep_used)
    if done is None:
        return _off(as_json)
    root, pruned = done
    if as_json:
        out.print_json(json.dumps({"root": str(root), "removed": [asdict(e) for e in pruned.removed],
                                   "bytes_freed": pruned.bytes_freed, "kept_protected": pruned.kept_protected,
                                   "kept_recent": pruned.kept_recent, "busy": list(pruned.busy),
                                   "quarantine_removed": pruned.quarantine_removed,
                                   "leftovers_removed": pruned.leftovers_removed}))
        return Ending.DONE
    held = sum(1 for e in pruned.removed if e.freed < e.size)
    still = f" ({held} still hard-linked in runs' folders)" if held else ""
    out.print(f"Removed {_count(len(pruned.removed))} from {root}, {_size(pruned.bytes_freed)} freed{still}.",
              markup=False)
    recent = f", {pruned.kept_recent} used within {older_than}" if older_than is not None else ""
    out.print(f"Kept {pruned.kept_protected} in use{recent}" + (f", {len(pruned.busy)} busy" if pruned.busy else "")
              + ".", markup=False)
    return Ending.DONE


@cache_app.command("import")
def import_cmd(folder: Annotated[Path, typer.Argument(metavar="DIR", help="A .precomputed folder ltx-pipeline "
                                                      "preprocessed (a run's <run>/dataset/.precomputed, or your own "
                                                      "that a run verified).")],
               workspace: WorkspaceOpt = None, cache_dir: CacheDirOpt = None, as_json: JsonOpt = False,
               metadata: Annotated[Path | None, typer.Option("--metadata", metavar="FILE", help="The metadata the "
                                   "folder was made from (default: the one its identity record names).")] = None
               ) -> Ending:
    """Put a preprocessed folder's files into the cache, keyed as a run keys them; your files are only read.

    Each file is checked (it loads, its shapes fit its bucket, its clip or caption did not change after it was
    made) and copied in; one line per file says what was imported and what was refused and why. Exit 2 when
    any file was refused, or the folder cannot be keyed at all.
    """
    from ltx_pipeline.cli.console import out
    from ltx_pipeline.driving.cache_import import import_folder

    done = import_folder(workspace, folder, metadata=metadata, cache_dir=cache_dir)
    ending = Ending.INVALID if done.count("refused") else Ending.DONE
    if as_json:
        out.print_json(json.dumps({"root": str(done.root), "folder": str(done.folder), "metadata": str(done.metadata),
                                   "files": [asdict(line) for line in done.lines]}))
        return ending
    for line in done.lines:
        if line.outcome == "refused":
            out.print(f"refused {line.file}: {line.why}", markup=False)
        else:
            what = "imported" if line.outcome == "imported" else "already cached"
            out.print(f"{what} {line.file} ({line.entry})", markup=False)
    out.print(f"Imported {done.count('imported')} of {len(done.lines)} file(s) from {done.folder} into {done.root}; "
              f"{done.count('present')} already there, {done.count('refused')} refused.", markup=False)
    return ending
