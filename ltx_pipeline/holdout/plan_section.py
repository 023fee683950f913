"""plan.md's "Holdout loss" section, written again once autotune has measured (or skipped) a training step.

The plan wrote the section from its settings before approval (``forecast.at_plan``); after autotune the run knows
more, and the section is rewritten from it: the held-out rows as the evaluate phase will take them
(``rows.holdout_rows``: the prepared holdout less any clip that is also a training row), the checked training
rows, the last stage's config as the trainer reads it, and autotune's winner. It sits outside the approved text,
so rewriting it never voids an approval; a section that cannot be written is skipped, never a failed phase.
"""

from __future__ import annotations

from pathlib import Path

from ltx_pipeline.holdout.forecast import Rows, after_autotune
from ltx_pipeline.holdout.rows import holdout_rows
from ltx_pipeline.outputs.autotune import AutotuneOutputs
from ltx_pipeline.outputs.config_patch import ConfigPatchOutputs
from ltx_pipeline.outputs.data_check import DataCheckOutputs
from ltx_pipeline.outputs.plan import PlanOutputs
from ltx_pipeline.phase_context import LtxContext
from ltx_pipeline.reports.holdout_cost import HOLDOUT_SECTION, holdout_lines

__all__ = ["write_after_autotune"]


def write_after_autotune(ctx: LtxContext, autotune: AutotuneOutputs) -> bool:
    """Rewrite plan.md's holdout section from what the run knows after autotune; False when it was not written."""
    last = ctx.output(ConfigPatchOutputs).configs[-1]
    start = next((s.start_step for s in ctx.output(PlanOutputs).recipe.stages if s.index == last.stage), 0)
    held = holdout_rows(ctx)
    rows = Rows(len(held.indices) or None, ctx.output(DataCheckOutputs).samples, held.why_none)
    try:
        plan = after_autotune(ctx, Path(last.config), last.stage, start, rows, autotune)
        return HOLDOUT_SECTION.write(ctx.paths.plan_file, holdout_lines(plan), root=ctx.workspace)
    except (OSError, ValueError) as exc:  # the section informs; it never stops a run
        ctx.warn(f"plan.md's holdout-loss section was not rewritten: {exc}")
        return False
