"""A stage's ``.precomputed`` assembled from the latent cache, with only the misses encoded.

Owns the fill: link every file whose entry exists (``cache.assemble``), claim each missing key (one maker
per key across runs), write a metadata file of just the rows to make into a staging folder on the
cache's file system, run the narrowest of the trainer's three scripts per group of rows (``script_for``:
``process_captions`` when only conditions are missing, ``process_videos`` when only latents, else
``process_dataset``), check each file it wrote loads, ``put`` it into its entry (moved: same file
system), then link again. Keys another run is making are waited for, not made twice. The caller writes
the identity file, checks the assembled folder and reconciles dropped clips exactly as without the cache.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import resource
import shutil
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ltx_pipeline.cache import Assembly, Claim, ClaimState, Want, assemble
from ltx_pipeline.cache.hits import record_hits, stage_label
from ltx_pipeline.errors import PhaseFailed
from ltx_pipeline.ltx.metadata import sample_name
from ltx_pipeline.ltx.precomputed_layout import PlannedOutput, PreprocessScript, dataset_roles, script_for
from ltx_pipeline.preprocessing.cache_plan import CachePlan, RowPlan
from ltx_pipeline.preprocessing.processes import ProcessBudget
from ltx_pipeline.trainer_log import read_tail
from ltx_pipeline.workspace import atomic_write

__all__ = ["Encode", "fill_from_cache"]

_ROUNDS = 2  # a key another run was making, whose maker died, is made in the second round


@dataclass(frozen=True)
class Encode:
    """What the scripts are started with (as the stage would start ``process_dataset.py``)."""

    metadata_file: Path
    bucket_text: str
    model_path: str
    text_encoder_path: str
    extra_flags: Sequence[str]
    stage: int
    log: Path
    load: Callable[[Path], object]
    processes: ProcessBudget = ProcessBudget(1, "one process")  # ranks per command, at most its rows


def fill_from_cache(ctx: Any, plan: CachePlan, output_dir: Path, encode: Encode) -> Assembly:
    """Assemble ``output_dir`` from ``plan``'s entries, encoding what is missing; the final assembly."""
    assembly = _assemble(ctx, plan, output_dir)
    hits = len(assembly.linked)
    for problem in assembly.problems:
        ctx.warn(f"Latent cache: {problem}")
    for _ in range(_ROUNDS):
        if not assembly.missing:
            break
        waited = _make(ctx, plan, {want.key.name for want in assembly.missing}, encode)
        assembly = _assemble(ctx, plan, output_dir, deep=False)  # the hits were read in full just now
        if not waited:
            break
    made = len(assembly.linked) - hits
    ctx.narrate(f"{_label(encode.stage)}: {hits} of {len(plan.wants())} file(s) came from the latent cache "
                f"({plan.store.root}); {made} encoded and added to it.")
    record_hits(ctx.paths.root, encode.stage, wanted=len(plan.wants()), hits=hits, encoded=made,
                cache=plan.store.root, workspace=ctx.workspace)  # what status and the dashboard show
    return assembly


def _label(stage: int) -> str:
    return stage_label(stage).capitalize()


def _assemble(ctx: Any, plan: CachePlan, output_dir: Path, *, deep: bool = True) -> Assembly:
    """Link every entry there is (again: the use record names all of a folder's files) into ``output_dir``."""
    return assemble(plan.store, output_dir, plan.wants(), workspace=ctx.workspace, run=ctx.paths.root.name,
                    run_root=ctx.paths.root, deep=deep)


def _make(ctx: Any, plan: CachePlan, missing: set[str], encode: Encode) -> bool:
    """Claim and make the missing keys; wait for those another process holds. True when some were busy."""
    _allow_open_files(len(missing))
    busy: list[Want] = []
    with contextlib.ExitStack() as stack:
        claims: dict[str, Claim] = {}
        # All of a fill's claims at once, one fill at a time: two runs claiming the same rows key by key would
        # split a row between them, and each one's script would encode the whole row (a key twice).
        with plan.store.claiming():
            for want in plan.wants():
                name = want.key.name
                if name in missing and name not in claims:
                    claims[name] = stack.enter_context(plan.store.claim(want.key, wait=False))
                    if claims[name].state is ClaimState.BUSY:
                        busy.append(want)
        groups: dict[PreprocessScript, list[tuple[RowPlan, list[tuple[PlannedOutput, Claim]]]]] = defaultdict(list)
        for row in plan.rows:
            make = [(output, claims[want.key.name]) for output, want in row.outputs
                    if want.key.name in claims and claims[want.key.name].must_make]
            script = script_for(output for output, _ in make)
            if script is not None:
                groups[script].append((row, make))
        _add_short_clips(plan, groups)
        for script, rows in groups.items():
            _run_script(ctx, plan, script, rows, encode)
    for want in busy:  # another run is making it: wait for its maker (made, or ours to make next round)
        with plan.store.claim(want.key, wait=True):
            pass
    return bool(busy)


def _add_short_clips(plan: CachePlan,
                     groups: dict[PreprocessScript, list[tuple[RowPlan, list[tuple[PlannedOutput, Claim]]]]]) -> None:
    """Give the clips too short for every bucket to a script that reads clips and runs anyway: it writes
    nothing for them and its log says why in the trainer's words (a run with nothing to encode starts no
    script; the prediction's reason is narrated instead)."""
    script = next((name for name in ("dataset", "videos") if name in groups), None)
    if script is not None:
        groups[script].extend((row, []) for row in plan.rows if not row.outputs)


def _allow_open_files(claims: int) -> None:
    """Each held claim keeps its lock file open: raise the soft limit of open files toward the hard one."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = claims + 256
    if soft != resource.RLIM_INFINITY and soft < wanted:
        ceiling = wanted if hard == resource.RLIM_INFINITY else min(wanted, hard)
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(resource.RLIMIT_NOFILE, (ceiling, hard))


def _run_script(ctx: Any, plan: CachePlan, script: PreprocessScript,
                rows: list[tuple[RowPlan, list[tuple[PlannedOutput, Claim]]]], encode: Encode) -> None:
    """Run ``script`` over just ``rows`` into a staging folder in the cache, then put each claimed file."""
    staging = plan.store.staging_dir / _staging_name(ctx, script, rows, encode.stage)
    try:
        # The rows given to the script stay in the run's logs: what a run encoded can be read back, and the
        # process record's argv names a file that exists after the staging folder is gone.
        subset = ctx.paths.logs / "encoded" / f"stage{encode.stage}-{script}-{staging.name}.json"
        values = _subset_metadata(ctx, subset, [row for row, _ in rows], encode.metadata_file)
        out = staging / "precomputed"
        folders = ", ".join(sorted({output.folder for _, make in rows for output, _ in make}))
        processes = encode.processes.for_rows(len(rows))
        ctx.narrate(f"{_label(encode.stage)}: encoding {sum(1 for _, make in rows if make)} row(s) with the "
                    f"{script} script ({folders}).{encode.processes.words(processes)}")
        spec = ctx.backend.preprocess_command(subset, encode.bucket_text, out, model_path=encode.model_path,
                                              text_encoder_path=encode.text_encoder_path,
                                              trigger=ctx.request.trigger, extra_flags=list(encode.extra_flags),
                                              script=script, num_processes=processes)
        record = ctx.journal.run_to_end("preprocess", encode.stage, spec, encode.log).exit()
        if record is None or record["exit_code"] != 0:
            tail = " | ".join(line.strip() for line in read_tail(encode.log, 3) if line.strip())
            raise PhaseFailed(ctx.phase, 0, f"preprocessing failed ({'killed' if record is None else record})"
                              f": {tail}", str(encode.log))
        for row, make in rows:
            staged_name = sample_name(subset.parent, values[row.index])
            for output, claim in make:
                _put(ctx, claim, out / output.folder / staged_name, encode.load)
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def _staging_name(ctx: Any, script: PreprocessScript, rows: list[tuple[RowPlan, list[tuple[PlannedOutput, Claim]]]],
                  stage: int) -> str:
    """``encode-<digest>`` of the run, stage, script and keys to make: a resumed run whose script is still
    alive (the journal re-attaches to it) finds the folder it writes into, and any file left in it was made
    for exactly these keys. No host or pid in the name: ``clean_leftovers`` keeps it for a day."""
    keys = sorted(claim.key.name for _, make in rows for _, claim in make)
    text = json.dumps([str(ctx.paths.root.resolve()), stage, script, keys])
    return f"encode-{hashlib.sha256(text.encode('utf-8')).hexdigest()[:24]}"


def _subset_metadata(ctx: Any, target: Path, rows: list[RowPlan], metadata_file: Path) -> dict[int, str]:
    """Write the rows to make, media paths absolute, to ``target``; return each row's media value."""
    roles = dataset_roles(rows[0].row)
    values: dict[int, str] = {}
    data = []
    for row in rows:
        copy = dict(row.row)
        value = str(copy[roles["video"]]).strip()
        path = Path(value)
        copy[roles["video"]] = str(path if path.is_absolute() else (metadata_file.parent / path).resolve())
        values[row.index] = copy[roles["video"]]
        data.append(copy)
    atomic_write(target, json.dumps(data, indent=2), root=ctx.workspace)
    return values


def _put(ctx: Any, claim: Claim, staged: Path, load: Callable[[Path], object]) -> None:
    """Move one staged file into its entry when it loads as a sample; else leave the key missing (the
    folder check after assembly names the clip, with the script's reason from its log)."""
    if not claim.must_make or not staged.is_file():
        return  # made already: two rows with one key (e.g. the same caption) share the entry
    try:
        loaded = load(staged)
    except Exception as exc:  # noqa: BLE001 - any unreadable file stays out of the cache
        ctx.warn(f"Latent cache: {staged.name} written by preprocessing does not load ({exc}); not cached.")
        return
    if not isinstance(loaded, dict):
        ctx.warn(f"Latent cache: {staged.name} written by preprocessing is not a sample dict; not cached.")
        return
    claim.put(staged, move=True)
