"""Benchmark: what preprocessing costs over a campaign of runs on one dataset, with the latent cache and without.

A LoRA is rarely one run. The campaign mirrors how people iterate, each step a new run of the installed
``ltx-pipeline run`` on the reference backend (the toy trainer; autotune on, as a user has it; evaluation
renders skipped, they preprocess nothing): 1 the baseline, 2 another learning rate, 3 another rank,
4 one caption edited, 5 one clip added, and (``--runs 6``) 6 a continuation of run 5 with more steps.
The dataset is real H.264 mp4s written with PyAV (96x64, 25 frames; every third clip silent, so the
runs use ``--audio on``: sound trained on the clips that have it). The campaign runs twice, in fresh
workspaces over fresh copies of the dataset: with the cache (the default) and with
``LTX_PIPELINE_LATENT_CACHE=off``, step by step in turn (run 1 with, run 1 without, run 2 with, ...), so
the machine's load drifts over both alike.

Everything printed is measured, never estimated: for each run and in total, the preprocessing processes
the engine started (its store's process records of kind ``preprocess``, sanity set and stages alike),
their wall seconds (each record's start to its recorded end), the rows and files they encoded (each
script's own ``Wrote ...`` line in the run's ``logs/preprocess.log``), and the whole run's wall time as
the user waits for it; then the ratios without / with the cache. Prints figures; asserts nothing.

    python benchmarks/bench_campaign.py [--runs 5] [--steps 4] [--clips 4] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections import defaultdict, deque
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ltx_pipeline.env_names import LATENT_CACHE_ENV, STORE_ENV, WORKSPACE_ENV

ENGINE = [sys.executable, "-c", "from ltx_pipeline.cli import main; main()"]
GPU = "NVIDIA GeForce RTX 5090,32607"  # the demo's default tier: plans as a 32 GB card
BUCKETS = "96x64x25"
MODES = {"cache": "with the cache (default)", "off": f"without ({LATENT_CACHE_ENV}=off)"}
# The script each module is, in the words the engine narrates ("encoding 1 row(s) with the videos script").
SCRIPTS = {"preprocess": "dataset", "process_videos": "videos", "process_captions": "captions"}
_WROTE = re.compile(r"✅ Wrote (?P<counts>.*?) to (?P<folder>.+?); kept ")
_COUNT = re.compile(r"(\d+) (audio latents|latents|conditions)")


# -- the dataset and the campaign ------------------------------------------------------------------
def write_dataset(folder: Path, clips: int) -> Path:
    """``clips`` real mp4s (every third silent) and their ``dataset.json``; returns the metadata file."""
    rows = [_write_row(folder, index) for index in range(clips)]
    (folder / "dataset.json").write_text(json.dumps(rows, indent=2))
    return folder / "dataset.json"


def _write_row(folder: Path, index: int) -> dict[str, str]:
    from ltx_pipeline.ltx.sample_clips import COLOURS, write_clip

    colours = sorted(COLOURS)
    colour, background = colours[index % len(colours)], colours[(index + 3) % len(colours)]
    name = f"videos/clip-{index:02d}.mp4"
    write_clip(folder / name, 25, 64, 96, colour=colour, background=background, fps=24.0, audio=index % 3 != 2,
               phase=index / 7)
    return {"caption": f"a {colour} square slides across a plain {background} background", "video": name}


def edit_caption(dataset: Path) -> None:
    """The user fixes one caption (the second row's)."""
    rows = json.loads(dataset.read_text())
    rows[1]["caption"] += ", filmed from a fixed camera"
    dataset.write_text(json.dumps(rows, indent=2))


def add_clip(dataset: Path) -> None:
    """The user adds one clip (with sound) to the dataset."""
    rows = json.loads(dataset.read_text())
    index = len(rows) + (1 if len(rows) % 3 == 2 else 0)  # an index whose clip has sound
    rows.append(_write_row(dataset.parent, index))
    dataset.write_text(json.dumps(rows, indent=2))


@dataclass(frozen=True)
class Step:
    """One run of the campaign: its name, what changed, its options, and an edit of the dataset before it."""

    run: str
    change: str
    options: tuple[str, ...]
    edit: Callable[[Path], None] | None = None
    continues: bool = False  # the same run with more steps: only -w, --run, --steps, --approve


def campaign(steps: int) -> list[Step]:
    base = ("--learning-rate", "1e-2", "--rank", "8")
    return [Step("c1", "baseline", base),
            Step("c2", "another learning rate", ("--learning-rate", "5e-3", "--rank", "8")),
            Step("c3", "another rank", ("--learning-rate", "1e-2", "--rank", "16")),
            Step("c4", "one caption edited", base, edit=edit_caption),
            Step("c5", "one clip added", base, edit=add_clip),
            Step("c5", f"continuation of c5 to {2 * steps} steps", (), continues=True)]


# -- what was measured -----------------------------------------------------------------------------
@dataclass(frozen=True)
class Preprocess:
    """One preprocessing process the engine started, as its record and its script's log say."""

    phase: str
    stage: int  # 0: the autotune sanity set
    script: str  # dataset, videos or captions
    seconds: float | None  # None: no recorded end
    rows: int | None  # None: no ``Wrote`` line (the script failed or was killed)
    files: int | None


@dataclass
class RunFigures:
    run: str
    change: str
    wall_s: float
    processes: list[Preprocess] = field(default_factory=list)


def wrote_counts(log_text: str) -> dict[str, deque[dict[str, int]]]:
    """Per output folder, in order, the counts of each ``✅ Wrote ...`` line of the toy's three scripts."""
    found: dict[str, deque[dict[str, int]]] = defaultdict(deque)
    for match in _WROTE.finditer(log_text):
        counts = {kind: int(number) for number, kind in _COUNT.findall(match["counts"])}
        found[str(Path(match["folder"]))].append(counts)
    return found


def _argv_value(argv: list[str], option: str) -> str | None:
    return argv[argv.index(option) + 1] if option in argv[:-1] else None


def preprocess_figures(workspace: Path, run: str) -> list[Preprocess]:
    """The run's ``preprocess`` process records, each with its seconds and its script's counts."""
    from ltx_pipeline.store import Store

    store = Store.open(workspace / "ltx-pipeline.db")
    try:
        record = store.get_run(run)
        records = [] if record is None or record.id is None else store.processes(record.id, "preprocess")
    finally:
        store.close()
    logs: dict[str, dict[str, deque[dict[str, int]]]] = {}
    figures = []
    for process in records:
        if process.log_path not in logs:
            log = Path(process.log_path)
            logs[process.log_path] = wrote_counts(log.read_text(errors="replace") if log.is_file() else "")
        folder = _argv_value(process.argv, "--output-dir")
        queue = logs[process.log_path].get(str(Path(folder))) if folder else None
        counts = queue.popleft() if queue else None  # the same folder twice: matched in order
        ended = process.ended_at
        figures.append(Preprocess(
            phase=process.phase, stage=process.stage, script=SCRIPTS.get(process.argv[2].rsplit(".", 1)[-1], "?"),
            seconds=None if ended is None else (ended - process.started_at).total_seconds(),
            rows=None if counts is None else max(counts.values(), default=0),
            files=None if counts is None else sum(counts.values())))
    return figures


# -- running it --------------------------------------------------------------------------------------
@dataclass
class Campaign:
    """One mode's fresh workspace, its own copy of the dataset, its environment and what it measured."""

    mode: str
    workspace: Path
    dataset: Path
    env: dict[str, str]
    figures: list[RunFigures] = field(default_factory=list)


def new_campaign(root: Path, pristine: Path, mode: str) -> Campaign:
    data = shutil.copytree(pristine, root / f"data-{mode}")
    env = {k: v for k, v in os.environ.items() if k not in (STORE_ENV, WORKSPACE_ENV, LATENT_CACHE_ENV)}
    if mode == "off":
        env[LATENT_CACHE_ENV] = "off"
    return Campaign(mode, root / f"ws-{mode}", data / "dataset.json", env)


def run_step(campaign: Campaign, step: Step, train_steps: int) -> None:
    """One run of the campaign as the user starts it, timed; then its preprocessing records read back."""
    if step.edit is not None:
        step.edit(campaign.dataset)
    argv = _run_argv(campaign.workspace, campaign.dataset, step, train_steps)
    started = time.perf_counter()
    done = subprocess.run([*ENGINE, *argv], capture_output=True, text=True, env=campaign.env)
    wall = time.perf_counter() - started
    if done.returncode != 0:
        sys.exit(f"{campaign.mode}: run {step.run} ({step.change}) exited {done.returncode}: "
                 f"{done.stderr.strip()[-800:]}")
    processes = preprocess_figures(campaign.workspace, step.run)
    if step.continues:  # the same run's records: keep only the processes this command started
        earlier = next(f for f in campaign.figures if f.run == step.run)
        processes = processes[len(earlier.processes):]
    campaign.figures.append(RunFigures(step.run, step.change, wall, processes))
    print(f"{campaign.mode}: {step.run} ({step.change}) {wall:.1f} s, {len(processes)} preprocessing "
          "process(es)", file=sys.stderr)  # progress: the campaign takes minutes


def run_campaigns(root: Path, pristine: Path, steps: list[Step], train_steps: int) -> dict[str, list[RunFigures]]:
    """Both modes, step by step in turn, so a change in the machine's load weighs on both alike."""
    campaigns = [new_campaign(root, pristine, mode) for mode in MODES]
    for step in steps:
        for campaign in campaigns:
            run_step(campaign, step, train_steps)
    return {campaign.mode: campaign.figures for campaign in campaigns}


def _run_argv(workspace: Path, dataset: Path, step: Step, train_steps: int) -> list[str]:
    common = ["run", "--workspace", str(workspace), "--run", step.run, "--approve"]
    if step.continues:
        return [*common, "--steps", str(2 * train_steps)]
    return [*common, "--dataset", str(dataset), "--backend", "reference", "--assume-gpu", GPU, "--buckets", BUCKETS,
            "--audio", "on", "--trigger", "fxclp", "--steps", str(train_steps), "--skip-eval", *step.options]


def source_identity() -> str:
    """ltx-pipeline's version and source digest, read again now (``code_identity`` remembers its first)."""
    from ltx_pipeline.code_identity import code_identity

    return str(code_identity.__wrapped__())


# -- the report --------------------------------------------------------------------------------------
def _sum(values: list[float | None] | list[int | None]) -> float | None:
    """The total, or None when any part was not measured."""
    return None if any(v is None for v in values) else sum(v for v in values if v is not None)


def run_summary(figures: RunFigures) -> dict[str, Any]:
    p = figures.processes
    return {"run": figures.run, "change": figures.change, "processes": len(p),
            "scripts": [f"{'sanity' if x.stage == 0 else f'stage {x.stage}'} {x.script} {x.rows}" for x in p],
            "process_s": _sum([x.seconds for x in p]), "rows": _sum([x.rows for x in p]),
            "files": _sum([x.files for x in p]), "wall_s": figures.wall_s}


def totals(runs: list[dict[str, Any]]) -> dict[str, Any]:
    return {key: _sum([r[key] for r in runs]) for key in ("processes", "process_s", "rows", "files", "wall_s")}


def ratio(without: float | None, with_cache: float | None) -> float | None:
    """without / with, or None when either is unmeasured or the cached figure is 0."""
    return None if without is None or not with_cache else without / with_cache


def report(modes: dict[str, list[RunFigures]], settings: dict[str, Any]) -> dict[str, Any]:
    """The whole result as one dict: per mode its runs and totals, then the ratios off / cache."""
    result: dict[str, Any] = {"settings": settings, "modes": {}}
    for mode, figures in modes.items():
        runs = [run_summary(f) for f in figures]
        result["modes"][mode] = {"runs": runs, "total": totals(runs)}
    if {"cache", "off"} <= set(modes):
        on, off = result["modes"]["cache"]["total"], result["modes"]["off"]["total"]
        result["ratios"] = {key: ratio(off[key], on[key]) for key in on}
    return result


def _cell(value: Any, digits: int = 1) -> str:
    return "n/a" if value is None else f"{value:.{digits}f}" if isinstance(value, float) else str(value)


def text_lines(result: dict[str, Any]) -> list[str]:
    s = result["settings"]
    lines = [f"{s['cores']} cores; {s['runs']} runs, {s['clips']} clips ({BUCKETS}, every third silent, --audio on), "
             f"{s['steps']} steps, reference backend, autotune on, evaluation skipped; {s['source']}"]
    if s.get("source_changed"):
        lines.append("WARNING: ltx-pipeline's source changed during the campaign (it is part of every key on the "
                     "reference backend): runs after the change missed the cache; these figures are not valid")
    head = f"{'run':4} {'change':34} {'procs':>5} {'proc s':>7} {'rows':>5} {'files':>5} {'run wall s':>10}  scripts"
    for mode, body in result["modes"].items():
        lines += ["", MODES[mode], head]
        for r in [*body["runs"], {"run": "all", "change": "total", "scripts": [], **body["total"]}]:
            lines.append(f"{r['run']:4} {r['change'][:34]:34} {r['processes']:>5} {_cell(r['process_s']):>7} "
                         f"{_cell(r['rows']):>5} {_cell(r['files']):>5} {_cell(r['wall_s']):>10}  "
                         + ", ".join(r["scripts"]))
    if "ratios" in result:
        lines += ["", "without / with the cache: " + ", ".join(
            f"{key} {'n/a' if value is None else f'{value:.2f}x'}" for key, value in result["ratios"].items())]
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5, choices=range(1, 7), metavar="1-6",
                        help="steps of the campaign to run (6 adds a continuation)")
    parser.add_argument("--steps", type=int, default=4, help="training steps of each run")
    parser.add_argument("--clips", type=int, default=4, help="clips in the dataset (at least 2)")
    parser.add_argument("--json", action="store_true", help="print the figures as one JSON object")
    args = parser.parse_args()
    if args.clips < 2:
        parser.error("--clips: at least 2 (run 4 edits the second clip's caption)")
    settings: dict[str, Any] = {"cores": os.cpu_count(), "runs": args.runs, "steps": args.steps, "clips": args.clips,
                                "source": source_identity()}
    with tempfile.TemporaryDirectory(prefix="bench-campaign-") as tmp:
        root = Path(tmp)
        write_dataset(root / "data", args.clips)
        steps = campaign(args.steps)[:args.runs]
        modes = run_campaigns(root, root / "data", steps, args.steps)
    # On the reference backend the trainer's identity (part of every key) is ltx-pipeline's own source
    # digest: an edit of the source during the campaign makes every later run miss.
    settings["source_changed"] = source_identity() != settings["source"]
    result = report(modes, settings)
    print(json.dumps(result, indent=2) if args.json else "\n".join(text_lines(result)))


if __name__ == "__main__":
    main()
