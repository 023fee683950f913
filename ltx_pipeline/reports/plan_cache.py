"""plan.md's "Latent cache" section: what each preprocessing takes from the cache, what it encodes, and why.

Owns the words of ``preprocessing.forecast.Forecast`` and where they sit in plan.md: after "Preprocessing",
outside the text whose digest the user approves (the cache is shared: another run filling it must never void an
approval). The plan phase writes the section when the rows and model files are known before approval; the data
check writes it again from the rows it checked. Either way the section's first line says which wrote it.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ltx_pipeline.ltx.buckets import parse_buckets
from ltx_pipeline.ltx.modes import Mode
from ltx_pipeline.ltx.recipe import Recipe
from ltx_pipeline.preprocessing.forecast import (
    FolderForecast,
    Forecast,
    StepForecast,
    forecast,
    run_steps,
    sanity_rows,
)
from ltx_pipeline.reports.sections import PlanSection

__all__ = ["CACHE_SECTION", "HEADING", "RunShape", "cache_section", "forecast_section", "note_section",
           "pending_section"]

HEADING = "## Latent cache"
# The section goes right after Preprocessing, before Training Config.
CACHE_SECTION = PlanSection(HEADING, "## Training Config")
_WORDS = {"latents": "latents", "audio_latents": "audio latents", "conditions": "conditions"}
_BY_PLAN = ("written with the plan, from the metadata file and the cache as they were then; the data check "
            "writes it again from the rows it checks, before anything is encoded")
_BY_DATA_CHECK = ("written by the data check, after your approval, from the rows it checked and the cache as it "
                  "was then; preprocessing narrates the same counts when it runs, unless another run has changed "
                  "the cache since")


@dataclass(frozen=True)
class RunShape:
    """What decides a run's preprocessings: the recipe's stages, the sanity set's size, the mode, the models.

    Attributes:
        recipe: the plan's recipe (its stages; its knobs size the sanity set).
        launch_total: training processes over every node (the sanity set feeds each a batch).
        tier_base: the VRAM tier's base config (``low_vram`` or ``standard``: autotune's search space).
        autotune_runs: whether autotune's sanity trial runs (its set is preprocessed first).
        mode: the trained mode (a video-only run encodes no sound).
        models: the checkpoint and text encoder preprocessing is given.
    """

    recipe: Recipe
    launch_total: int
    tier_base: str
    autotune_runs: bool
    mode: Mode
    models: tuple[str, str]


def forecast_section(ctx: Any, shape: RunShape, metadata_file: Path, samples: int, *, by_data_check: bool,
                     own_first: str | None = None) -> list[str]:
    """The section for a run whose rows are in ``metadata_file`` (``samples`` of them): each preprocessing, in
    the order it runs, against the cache (``ctx``: the phase's context; ``own_first``: stage 1 reuses your own
    ``.precomputed`` there). Loads no model."""
    if not ctx.backend.capabilities.uses_real_files:
        return note_section(f"the {ctx.request.backend} backend reads no files: nothing is preprocessed or cached")
    recipe = shape.recipe
    stages = [parse_buckets(";".join(s.buckets)) for s in recipe.stages if not s.start_step]
    sanity = sanity_rows(recipe, shape.tier_base, shape.launch_total, samples) if shape.autotune_runs else None
    steps, sanity_set = run_steps(ctx.paths, metadata_file, stages, shape.mode, sanity,
                                  reuse_first=own_first is not None)
    try:
        found = forecast(ctx, steps, sanity_set, mode=shape.mode, model_path=shape.models[0],
                         text_encoder_path=shape.models[1])
    except OSError as exc:  # the forecast informs; it never stops a run (preprocessing meets the same error)
        return note_section(f"no forecast: {exc}")
    return cache_section(found, by_data_check=by_data_check, own_first=own_first)


def cache_section(found: Forecast, *, by_data_check: bool, own_first: str | None = None) -> list[str]:
    """The section's lines for ``found``; ``by_data_check`` says who wrote it (else the plan phase)."""
    lines = [HEADING, "", f"_A forecast, not part of what you approve (other runs fill the cache): "
             f"{_BY_DATA_CHECK if by_data_check else _BY_PLAN}._", ""]
    if found.off is not None:
        return [*lines, f"- The latent cache is off ({found.off}): each stage is preprocessed whole, "
                "and nothing is kept for later runs", ""]
    lines.append(f"- Cache: `{found.root}` ({found.entries} entr{'y' if found.entries == 1 else 'ies'})")
    if own_first is not None:
        lines.append(f"- Stage 1: your own `{own_first}` is verified and reused as it is (nothing from the cache, "
                     "nothing encoded)")
    if not found.steps and own_first is None:
        lines.append("- Nothing is preprocessed in this run")
    for step in found.steps:
        lines += _step_lines(step)
    return [*lines, ""]


def note_section(line: str) -> list[str]:
    """The section when nothing is forecast because nothing is encoded (``line`` says why)."""
    return [HEADING, "", f"- {line[0].upper()}{line[1:]}", ""]


def pending_section(why: str) -> list[str]:
    """The section before the data check can forecast: why not yet (e.g. the clips are captioned after approval)."""
    return [HEADING, "", f"- Not forecast yet: {why}. The data check writes this section once it knows the rows, "
            "before anything is encoded (not part of what you approve)", ""]


def _step_lines(step: StepForecast) -> list[str]:
    name = f"{step.step.label} ({_scope(step)})"
    if step.reused:
        return [f"- {name}: the run's folder `{step.step.output_dir}` already holds it; verified and reused as it "
                "is (nothing from the cache, nothing encoded)"]
    if step.whole is not None:
        return [f"- {name}: preprocessed whole, without the cache: {step.whole}"]
    earlier = f" ({step.made_before} encoded by an earlier step of this run)" if step.made_before else ""
    head = (f"- {name}: {step.cached} of {step.files} file(s) from the cache{earlier}, "
            f"{step.encode} to encode")
    return [head, *(f"  - {_folder_line(f)}" for f in step.folders)]


def _scope(step: StepForecast) -> str:
    buckets = ";".join(str(b) for b in step.step.buckets)
    rows, holder = step.step.indices, step.step.holder
    if rows is None:
        return buckets
    if holder is None:
        return f"the first {len(rows)} row(s), at {buckets}"
    return f"{len(rows)} row(s) whose clips land in {buckets} in stage {holder}, linked from its entries"


def _folder_line(folder: FolderForecast) -> str:
    why = ", ".join(f"{count} {reason}" for reason, count in folder.reasons)
    return (f"{_WORDS.get(folder.folder, folder.folder)}: {folder.cached} from the cache, {folder.encode} to encode"
            + (f" ({why})" if why else ""))
