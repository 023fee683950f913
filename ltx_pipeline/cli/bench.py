"""``ltx-pipeline bench autotune --surface FILE [--json]``: what a sweep costs, beside the alternatives.

Owns the ``bench`` Typer sub-app (the lead registers it with ``app.add_typer(bench_app, name="bench")``).
``autotune`` creates a throw-away run on the ``simulated`` backend for one cost surface (a tiny
generated metadata dataset, the surface's GPU, ``--approve``), drives it through the same code
path as ``run`` up to and including the autotune phase, then reports what the sweep chose and
spent (simulated GPU seconds, summed from each trial's ``simulated_cost.json``) next to the
exhaustive optimum and the official skill's greedy procedure computed from the surface alone.
Benchmarks report; they assert nothing about time.
"""

from __future__ import annotations

import json
import math
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from ltx_pipeline.cli.console import err, out
from ltx_pipeline.errors import EXIT_FAILED, EXIT_OK, BadInput, RunFailed

if TYPE_CHECKING:
    from ltx_pipeline.ltx.recipe import Recipe

__all__ = ["bench_app", "bench_autotune"]

bench_app = typer.Typer(name="bench", add_completion=False, no_args_is_help=True, rich_markup_mode=None,
                        help="Benchmarks that report figures (they assert nothing).")


def bench_autotune(surface_file: Path, *, keep: Path | None = None, on_event: Any = None,
                   prior: bool = False) -> dict[str, Any]:
    """Run autotune on a throw-away simulated run for ``surface_file`` and return the figures.

    Args:
        surface_file: the cost surface YAML.
        keep: a folder to use as the workspace (kept); default a temporary folder, removed afterwards.
        on_event: the runner's event sink (None: silent).
        prior: first run the same surface once in the same workspace (its study seeds the second run's
            sweep as a prior), then report the second run, with the first one's figures as ``cold``.
    """
    from ltx_pipeline.backends.surface import load_surface

    surface_path = surface_file.expanduser().resolve()
    surface = load_surface(surface_path)
    if keep is not None:
        return _bench_runs(surface_path, surface, keep, on_event, prior)
    with tempfile.TemporaryDirectory(prefix="ltx-bench-") as tmp:
        return _bench_runs(surface_path, surface, Path(tmp), on_event, prior)


def _bench_runs(surface_path: Path, surface: Any, root: Path, on_event: Any, prior: bool) -> dict[str, Any]:
    if not prior:
        return _bench(surface_path, surface, root, on_event, "bench")
    cold = _bench(surface_path, surface, root, on_event, "bench-cold")
    warm = _bench(surface_path, surface, root, on_event, "bench")
    return {**warm, "cold": {k: cold[k] for k in ("chosen", "objective", "trials_run", "trials_oom", "trial_seconds",
                                                  "end_to_end_seconds", "end_to_end_vs_best_anchor")}}


def _bench(surface_path: Path, surface: Any, root: Path, on_event: Any, run_name: str) -> dict[str, Any]:
    from ltx_pipeline.backends import make_backend
    from ltx_pipeline.engine import Outcome, Runner, approve_plan
    from ltx_pipeline.ltx.autotune import end_to_end_anchors, search_space, skill_greedy
    from ltx_pipeline.ltx.sample_clips import write_clip
    from ltx_pipeline.outputs.autotune import AutotuneOutputs
    from ltx_pipeline.outputs.plan import PlanOutputs
    from ltx_pipeline.outputs.probe import ProbeOutputs
    from ltx_pipeline.request import build_request
    from ltx_pipeline.store import Store, saved_id
    from ltx_pipeline.workspace import Workspace, atomic_write

    data = root / "data"
    rows = [{"caption": f"bench clip {i}", "video": f"videos/clip{i}.mp4"} for i in range(4)]
    # Real clips, read by the probe and the data check: 321 frames outlast every bucket (the chained
    # default's longest); one small clip (with sound: t2v trains on audio) is encoded and copied, the
    # simulated trainer reads no pixels.
    if not (data / "dataset.json").is_file():
        clip = write_clip(data / "videos" / "clip0.mp4", 321, 32, 32, audio=True)
        for i in range(1, len(rows)):
            atomic_write(data / "videos" / f"clip{i}.mp4", clip.read_bytes())
        atomic_write(data / "dataset.json", json.dumps(rows))
    ws = Workspace.at(root / "workspace")
    ws.create()
    store = Store.open(ws.db_file)  # a benchmark's throw-away store: always the embedded one
    request = build_request({"dataset": str(data / "dataset.json"), "backend": "simulated",
                             "surface": str(surface_path), "strategy": _strategy(surface_path),
                             **_buckets(surface_path),
                             "effective_batch": surface.per_gpu_batch * surface.gpu.count})
    run = store.create_run(run_name, request.model_dump(mode="json"))
    backend = make_backend("simulated", surface=str(surface_path))
    runner = Runner(store, ws, _phases_through_autotune(), backend=backend,
                    on_event=on_event or (lambda *_: None))
    failure: str | None = None
    try:
        report = runner.drive(run, request)
        if report.outcome is Outcome.AWAITING_APPROVAL:
            approve_plan(store, run, approved_by="bench")
            runner.drive(run, request)
    except RunFailed as exc:  # nothing fitted: still a figure (winner null), compared with the baselines
        failure = exc.what
    phase_runs = store.latest_phase_runs(saved_id(run))
    plan, probe = phase_runs["plan"], phase_runs["probe"]
    recipe = PlanOutputs.from_stored(plan.outputs, plan.outputs_version).recipe
    if failure is None:  # the sweep as stored, read through its versioned model
        row = phase_runs["autotune"]
        outputs = AutotuneOutputs.from_stored(row.outputs, row.outputs_version).to_stored()
    else:
        outputs = _failed_outputs(root / "workspace" / run_name, recipe, request.headroom)
    seconds = 0.0
    for log in [t["log"] for t in outputs["trials"] if t.get("log") and not t.get("from_prior")]:
        cost = Path(log).parent / "outputs" / "simulated_cost.json"
        if cost.is_file():
            seconds += float(json.loads(cost.read_text(encoding="utf-8"))["gpu_seconds"])
    # The anchors search the space the sweep searched: one process's batch x accumulation kept fixed.
    per_gpu, headroom = outputs["per_gpu_batch"], outputs["headroom"]
    multi = any(len(s.buckets) > 1 for s in recipe.stages)
    base = ProbeOutputs.from_stored(probe.outputs, probe.outputs_version).tier.base
    space = search_space(base, per_gpu, multi, outputs["baseline"])
    training_steps = recipe.steps * len(recipe.stages)
    anchors = end_to_end_anchors(surface, space, headroom, per_gpu, training_steps=training_steps,
                                 trial_steps=SIMULATED_TRIAL_STEPS, multi_bucket=multi)
    skill, exhaustive = anchors["greedy"], anchors["exhaustive"]
    greedy = skill_greedy(surface, outputs["baseline"], per_gpu, headroom, multi_bucket=multi)
    objective = outputs["objective"]
    ran = [t for t in outputs["trials"] if not t.get("from_prior")]
    end_to_end = seconds + training_steps * objective if objective is not None else None
    best_anchor = min((a["end_to_end_seconds"] for a in (skill, exhaustive) if a["end_to_end_seconds"] is not None),
                      default=None)
    return {
        "failure": failure,
        "surface": str(surface_path), "gpu": surface.gpu.name, "capacity_gb": round(surface.capacity_gb, 2),
        "chosen": outputs["winner"], "objective": objective, "trials_run": len(ran),
        "trials_oom": sum(1 for t in ran if t["outcome"].startswith("oom")),
        "trial_seconds": round(seconds, 1), "pruned": len(outputs["pruned"]), "study": outputs["study"],
        "prior": outputs.get("prior"),
        "training_steps": training_steps,
        "end_to_end_seconds": round(end_to_end, 1) if end_to_end is not None else None,
        "end_to_end_vs_best_anchor": _ratio(end_to_end, best_anchor),
        "end_to_end_vs_perfect_knowledge": _ratio(end_to_end, anchors["perfect_knowledge"]["end_to_end_seconds"]),
        "anchors": anchors,
        "exhaustive": {"chosen": exhaustive["chosen"], "objective": exhaustive["objective"]},
        "skill": {"chosen": skill["chosen"], "trials_run": greedy["trials_run"], "trials_oom": greedy["trials_oom"],
                  "trial_seconds": skill["sweep_seconds"], "objective": skill["objective"]},
        "seconds_vs_skill": _ratio(seconds, skill["sweep_seconds"]),
        "objective_vs_optimum": _ratio(objective, exhaustive["objective"]),
        "skill_objective_vs_optimum": _ratio(skill["objective"], exhaustive["objective"]),
    }


SIMULATED_TRIAL_STEPS = 41  # what a simulated trial runs (autotune.trial_settings)


def _failed_outputs(run_root: Path, recipe: Recipe, headroom: float) -> dict[str, Any]:
    """What a sweep that found no fitting config leaves: its trials (from their logs) and the plan's knobs."""
    trials = []
    for log in sorted((run_root / "overfit").glob("trial-*/train.log")):
        text = log.read_text(encoding="utf-8", errors="replace")
        trials.append({"log": str(log), "outcome": "oom" if "OutOfMemoryError" in text else "failed"})
    knobs = dict(recipe.knobs)
    per_gpu = int(knobs["batch_size"]) * int(knobs.get("gradient_accumulation_steps") or 1)
    baseline = {k: knobs[k] for k in ("quantization", "optimizer_type", "batch_size",
                                      "enable_gradient_checkpointing", "gradient_accumulation_steps") if k in knobs}
    return {"trials": trials, "pruned": [], "winner": None, "objective": None, "study": None,
            "per_gpu_batch": per_gpu, "headroom": headroom, "baseline": baseline}


def _phases_through_autotune() -> tuple[Any, ...]:
    """The registry up to and including autotune (a bench never trains)."""
    from phases import PHASES

    names = [p.name for p in PHASES]
    if "autotune" in names:
        return tuple(PHASES[: names.index("autotune") + 1])
    from phases.autotune import PHASE as AUTOTUNE  # not registered yet: it runs right after validate

    at = names.index("validate") + 1
    return (*PHASES[:at], AUTOTUNE)


def _surface_plan(surface_path: Path) -> dict[str, Any]:

    from ltx_pipeline.yaml_io import load_yaml

    data = load_yaml(surface_path.read_text(encoding="utf-8")) or {}
    return data.get("plan") or {}


def _strategy(surface_path: Path) -> str:
    """A multi-bucket surface (its name says so, or its ``plan.strategy``) benches a mixed plan."""
    plan = _surface_plan(surface_path)
    if plan.get("strategy"):
        return str(plan["strategy"])
    return "mixed" if "multibucket" in surface_path.stem.replace("-", "").replace("_", "") else "single"


def _buckets(surface_path: Path) -> dict[str, str]:
    plan = _surface_plan(surface_path)
    return {"buckets": str(plan["buckets"])} if plan.get("buckets") else {}


def _finite(value: float | None) -> float | None:
    """None for "nothing fits" (an infinite objective): JSON has no Infinity."""
    return value if value is not None and math.isfinite(value) else None


def _ratio(a: float | None, b: float | None) -> float | None:
    if a is None or b is None or not math.isfinite(a) or not math.isfinite(b) or b == 0:
        return None
    return round(a / b, 3)


def _knobs(knobs: dict[str, Any] | None) -> str:
    if not knobs:
        return "-"
    from ltx_pipeline.ltx.autotune import format_knobs

    return format_knobs(knobs)


@bench_app.command("autotune")
def autotune_cmd(
    surface: Annotated[Path, typer.Option("--surface", help="Cost surface YAML (see the README).")],
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
    prior: Annotated[bool, typer.Option("--prior", help="Run the surface once first, in the same workspace, so "
                                        "its study is the second run's prior; report both.")] = False,
) -> int:
    """Run autotune on a throw-away simulated run and compare it with the optimum and the skill."""
    if not surface.expanduser().is_file():
        raise BadInput(f"{surface} does not exist", where="--surface", fix="pass a cost surface YAML file")
    figures = bench_autotune(surface, prior=prior)
    code = EXIT_OK if figures["failure"] is None else EXIT_FAILED
    if figures["failure"] is not None:
        err.print(f"autotune found no config that fits: {figures['failure']}", markup=False)
    if as_json:
        out.print_json(json.dumps(figures, default=str))
        return code
    from rich.table import Table

    table = Table(title=f"autotune on {Path(figures['surface']).name} ({figures['gpu']})")
    for column in ("", "chosen", "s / optimizer step", "trials", "OOM", "GPU seconds"):
        table.add_column(column)
    table.add_row("ltx-pipeline", _knobs(figures["chosen"]), _fmt(figures["objective"]), str(figures["trials_run"]),
                  str(figures["trials_oom"]), f"{figures['trial_seconds']:.0f} ({figures['pruned']} pruned)")
    skill = figures["skill"]
    table.add_row("skill (greedy)", _knobs(skill["chosen"]), _fmt(skill["objective"]), str(skill["trials_run"]),
                  str(skill["trials_oom"]), f"{skill['trial_seconds']:.0f}")
    table.add_row("exhaustive optimum", _knobs(figures["exhaustive"]["chosen"]),
                  _fmt(figures["exhaustive"]["objective"]), "-", "-", "-")
    out.print(table)
    out.print(f"GPU seconds vs the skill: {_fmt(figures['seconds_vs_skill'])}; objective vs the optimum: "
              f"{_fmt(figures['objective_vs_optimum'])} (skill: {_fmt(figures['skill_objective_vs_optimum'])})",
              markup=False)
    anchors = figures["anchors"]
    out.print(f"End to end (sweep + {figures['training_steps']} training steps), GPU seconds: ours "
              f"{_fmt(figures['end_to_end_seconds'])}; greedy {_fmt(anchors['greedy']['end_to_end_seconds'])}, "
              f"exhaustive {_fmt(anchors['exhaustive']['end_to_end_seconds'])}, perfect knowledge "
              f"{_fmt(anchors['perfect_knowledge']['end_to_end_seconds'])}; ours vs the better anchor "
              f"{_fmt(figures['end_to_end_vs_best_anchor'])}", markup=False)
    if figures.get("cold"):
        cold = figures["cold"]
        out.print(f"Cold run (no prior): {cold['trials_run']} trial(s), end to end {_fmt(cold['end_to_end_seconds'])}"
                  f" ({_fmt(cold['end_to_end_vs_best_anchor'])} of the better anchor); with its study as prior: "
                  f"{figures['trials_run']} trial(s)", markup=False)
    return code


def _fmt(value: float | None) -> str:
    return "-" if value is None or not math.isfinite(value) else f"{value:.3f}"
