"""``ltx-pipeline bench autotune --surface FILE [--json]``: what a sweep costs, beside the alternatives.

Owns the ``bench`` Typer sub-app (the lead registers it with ``app.add_typer(bench_app, name="bench")``).
``autotune`` prints the figures ``driving.bench.bench_autotune`` measures on a throw-away simulated run
(what the sweep chose and spent, next to the exhaustive optimum and the official skill's greedy
procedure), as a table or as JSON. Benchmarks report; they assert nothing about time.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Annotated, Any

import typer

from ltx_pipeline.cli import Ending
from ltx_pipeline.cli.console import err, out
from ltx_pipeline.errors import BadInput

__all__ = ["bench_app"]

bench_app = typer.Typer(name="bench", add_completion=False, no_args_is_help=True, rich_markup_mode=None,
                        help="Benchmarks that report figures (they assert nothing).")


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
    parallel: Annotated[int | None, typer.Option("--parallel", min=2, help="Also simulate the sweep with N trials at "
                                                 "once (one GPU each) and report winners, GPU-seconds and wall "
                                                 "time against one at a time.")] = None,
) -> Ending:
    """Run autotune on a throw-away simulated run and compare it with the optimum and the skill."""
    from ltx_pipeline.driving.bench import bench_autotune

    if not surface.expanduser().is_file():
        raise BadInput(f"{surface} does not exist", where="--surface", fix="pass a cost surface YAML file")
    figures = bench_autotune(surface, prior=prior, parallel=parallel)
    ending = Ending.DONE if figures["failure"] is None else Ending.FAILED
    if figures["failure"] is not None:
        err.print(f"autotune found no config that fits: {figures['failure']}", markup=False)
    if as_json:
        out.print_json(json.dumps(figures, default=str))
    else:
        _print_figures(figures)
    return ending


def _print_figures(figures: dict[str, Any]) -> None:
    """The figures as a table beside the skill and the optimum, then the end-to-end comparison."""
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
    if figures.get("parallel"):
        par = figures["parallel"]
        one, many = par["sequential"], par["parallel"]
        out.print(f"{par['slots']} trials at once (simulated): winner "
                  f"{'unchanged' if par['winner_unchanged'] else 'CHANGED'}; GPU seconds {many['gpu_seconds']:.0f} vs "
                  f"{one['gpu_seconds']:.0f} one at a time ({_fmt(par['gpu_seconds_vs_sequential'])}); wall time "
                  f"{many['wall_seconds']:.0f} s vs {one['wall_seconds']:.0f} s ({_fmt(par['wall_vs_sequential'])})",
                  markup=False)
    if figures.get("cold"):
        cold = figures["cold"]
        out.print(f"Cold run (no prior): {cold['trials_run']} trial(s), end to end {_fmt(cold['end_to_end_seconds'])}"
                  f" ({_fmt(cold['end_to_end_vs_best_anchor'])} of the better anchor); with its study as prior: "
                  f"{figures['trials_run']} trial(s)", markup=False)


def _fmt(value: float | None) -> str:
    return "-" if value is None or not math.isfinite(value) else f"{value:.3f}"
