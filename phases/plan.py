"""Plan phase: write ``<run>/plan.md``, the user's contract, and stop for its approval.

The plan is derived, not fixed: the recipe rules in ``ltx/recipe.py`` applied to the request and
to what the probe found; ``reports/plan_md.py`` words it in the official plan template's sections. Its content hash is
the approval subject, so any change that alters the plan voids an earlier approval. Missing
prerequisites do not stop the plan; each is listed with its next step, and ``approve`` refuses
until the ones heavy phases need are present. No durations are invented: training time stays
unknown until the sanity check has measured a step.
"""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path
from typing import Any

from ltx_pipeline.backends.base import MakesBaseWeights, TrainerBackend
from ltx_pipeline.code_identity import code_identity
from ltx_pipeline.engine import PhaseResult
from ltx_pipeline.engine.fingerprint import digest
from ltx_pipeline.errors import BadInput
from ltx_pipeline.holdout.forecast import at_plan
from ltx_pipeline.ltx.audio_choice import AudioPlan, decide_audio, trained_mode
from ltx_pipeline.ltx.autotune.availability import AutotunePlan, autotune_plan
from ltx_pipeline.ltx.hub import require_token
from ltx_pipeline.ltx.launch_plan import LaunchShape, launch_shape
from ltx_pipeline.ltx.metadata import read_metadata_rows
from ltx_pipeline.ltx.modes import Mode, get_mode
from ltx_pipeline.ltx.plan_provenance import with_provenance
from ltx_pipeline.ltx.preparation import (
    PreparationPlan,
    plan_preparation,
    samples_to_train,
    smallest_bucket_frames,
    videos_to_scan,
)
from ltx_pipeline.ltx.recipe import Recipe, build_recipe
from ltx_pipeline.ltx.tiers import Tier
from ltx_pipeline.ltx.validation_sources import ValidationSources, choose_sources
from ltx_pipeline.outputs.plan import PlannedAutotune, PlanOutputs
from ltx_pipeline.outputs.probe import ProbeOutputs
from ltx_pipeline.phase_context import LtxContext
from ltx_pipeline.preprocessing.run import model_paths
from ltx_pipeline.probing import to_plain
from ltx_pipeline.probing.nvidia_smi import nvidia_smi_found
from ltx_pipeline.reports.holdout_cost import HOLDOUT_SECTION, holdout_lines
from ltx_pipeline.reports.plan_cache import (
    CACHE_SECTION,
    RunShape,
    forecast_section,
    note_section,
    pending_section,
)
from ltx_pipeline.reports.plan_md import PlanDocument, render_plan
from ltx_pipeline.request import EVAL_ONLY_FIELDS, RENDEZVOUS_FIELDS
from ltx_pipeline.scenes import DETECTOR, find_cuts
from ltx_pipeline.slurm import check_paths
from ltx_pipeline.validation_media import candidates_from_folder, candidates_from_rows, template_samples
from ltx_pipeline.workspace import atomic_write

__all__ = ["PHASE"]


class PlanPhase:
    name = "plan"
    heavy = False
    outputs_type = PlanOutputs

    def fingerprint(self, ctx: LtxContext) -> dict[str, Any]:
        # The evaluation's own choices are read by the evaluate phase alone: changing them re-renders, never re-plans.
        # Where the nodes meet is validate's (the launch command); one node is every earlier run's fingerprint.
        skip = {*EVAL_ONLY_FIELDS, *RENDEZVOUS_FIELDS, *(("nodes",) if ctx.request.nodes == 1 else ())}
        request = ctx.request.model_dump(mode="json", exclude=skip)  # as asked: a resolved default stays None
        for key, default in _LATER_FIELDS:  # at their defaults, an existing run's plan stays approved
            if request.get(key) == default:
                request.pop(key, None)
        parts = {"run request": request, "probe": ctx.output_digest("probe")}
        autotune = _autotune(ctx)
        if autotune.cannot_run:  # absent where autotune can run: every earlier run's fingerprint stays as it was
            parts["autotune"] = "cannot run here (assumed GPUs, no nvidia-smi)"
        return parts

    def run(self, ctx: LtxContext) -> PhaseResult[PlanOutputs]:
        ctx.narrate("Writing plan.md: every setting, where it comes from, and what runs next. Nothing heavy "
                    "runs until you approve this exact plan.")
        probe = ctx.output(ProbeOutputs)
        if ctx.request.slurm:
            check_paths(ctx.workspace)  # a path SLURM would misread is refused now, not at submission
        if ctx.request.push_to_hub:  # refused now, not after the whole training when the trainer uploads
            require_token(ctx.request.push_to_hub, os.environ)
        mode = get_mode(ctx.request.mode)
        recipe, launch = _recipe(ctx, probe, mode)
        facts = probe.clip_frames.facts_plain()
        dataset = to_plain(probe.dataset)  # the ltx rules read the probe's dataset record as plain data
        preparation = plan_preparation(
            dataset=dataset, facts=facts, mode=mode, captioner=ctx.request.captioner, holdout=ctx.request.holdout,
            holdout_file=ctx.request.holdout_file, scans=find_cuts(ctx, videos_to_scan(dataset, facts)),
            min_frames=smallest_bucket_frames(recipe), detector=DETECTOR.words)
        samples = samples_to_train(dataset, preparation, holdout=ctx.request.holdout,
                                   holdout_file=ctx.request.holdout_file)
        if samples is not None and ctx.request.processes is None and samples < launch.processes:  # planned again
            recipe, launch = _recipe(ctx, probe, mode, samples=samples)
        warnings = list(recipe.warnings) + ([] if preparation.split_videos else _clip_warnings(probe, recipe))
        for warning in warnings:
            ctx.warn(warning)
        blockers: list[str] = []
        _check_template(ctx.backend, recipe.template, blockers)
        missing = [f for f in probe.findings if f.status != "ok" and _applies(f.item, ctx.backend)]
        blockers += [f"{f.item}: {f.detail}" for f in missing
                     if f.status == "missing" and f.item in ctx.backend.heavy_prerequisites]
        blockers += _captioner_blockers(probe, preparation)
        autotune = _autotune(ctx)
        audio = decide_audio(mode, ctx.request.audio, facts)
        validation = _validation_sources(ctx, recipe, trained_mode(mode, audio), audio, facts)
        if validation is not None and validation.blocker and audio.blocker:
            # One cause, said once: the clips' sound blocks the run itself; validation's need follows from it.
            validation = replace(validation, blocker=None)
        blockers += [b for b in (autotune.blocker, audio.blocker, validation.blocker if validation else None) if b]
        outputs = PlanOutputs(plan_file=str(ctx.paths.plan_file), plan_hash="", recipe=recipe,
                              warnings=tuple(warnings), missing=tuple(f.item for f in missing),
                              blockers=tuple(blockers), preparation=preparation,
                              autotune=PlannedAutotune(runs=autotune.runs, reason=autotune.reason,
                                                       blocker=autotune.blocker),
                              audio=audio, launch=launch, validation=validation)
        doc = PlanDocument(recipe=recipe, probe=probe, missing=missing, warnings=warnings, preparation=preparation,
                           autotune=autotune, audio=audio, validation=validation)
        section = _cache_section(ctx, probe, recipe, launch, preparation, audio, autotune.runs)
        holdout = holdout_lines(at_plan(ctx, recipe, preparation, probe.dataset, autotune))
        subject = _write_plan(ctx, render_plan(ctx, doc), section, holdout)
        outputs = outputs.model_copy(update={"plan_hash": subject})
        return PhaseResult(outputs, approval_subject=subject, approval_blockers=blockers)

    def summary(self, outputs: PlanOutputs) -> str:
        recipe = outputs.recipe
        stages = "; ".join("+".join(s.buckets) for s in recipe.stages)
        blocked = f", {len(outputs.blockers)} prerequisite(s) missing" if outputs.blockers else ""
        prep = outputs.preparation
        prepare = f"; prepare: {prep.summary()}" if prep is not None and prep.needed else ""
        autotune = outputs.autotune
        tune = "" if outputs.autotune_runs else ("; autotune cannot run here" if autotune and autotune.blocker
                                                  else "; autotune off (the baseline config as is)")
        return (f"plan.md written: {recipe.mode} {recipe.training_mode} on {recipe.tier_name}, "
                f"{stages}{blocked}{prepare}{tune}")


# Request fields added after runs existed, with their defaults (left out of the plan's fingerprint at them).
# The request is not a versioned phase output, so this stays; a default resolved in the request (captioner,
# vllm_url) dumps as None when not asked and needs no entry here.
_LATER_FIELDS: tuple[tuple[str, Any], ...] = (("slurm", False), ("slurm_args", []), ("autotune", "on"),
                                              ("continued_from", []), ("audio", "auto"), ("validation_media", "auto"),
                                              ("trainer_python", None), ("push_to_hub", None),
                                              ("config_set", {}))

# Prerequisites only a backend that runs the official trainer needs; the toy and simulated backends run without them.
_REAL_TRAINER_ONLY = ("uv", "LTX checkpoint", "Gemma text encoder", "LTX-2 trainer checkout")


def _recipe(ctx: LtxContext, probe: ProbeOutputs, mode: Mode,
            samples: int | None = None) -> tuple[Recipe, LaunchShape]:
    """The recipe rules (``ltx.recipe``) applied to the request and the probe, and the launch they plan for.

    The launch is computed here (again with ``samples`` when the dataset gives fewer samples than GPUs):
    validate and training read it from the plan's outputs.
    """
    request = ctx.request
    tier = Tier(probe.tier.key, probe.tier.name, probe.tier.base)
    launch = launch_shape(backend=request.backend, gpu_count=probe.gpu_count, requested=request.processes,
                          training_mode=request.training_mode, nodes=request.nodes, samples=samples)
    gpu_names = tuple(g.name for g in probe.gpus.gpus)
    recipe = build_recipe(mode=mode, tier=tier, gpu_count=probe.gpu_count, launch=launch, gpu_names=gpu_names,
                          training_mode=request.training_mode, strategy=request.strategy,
                          stages=request.stages(), buckets_given=request.buckets is not None,
                          rank=request.rank, steps=request.steps, learning_rate=request.learning_rate,
                          effective_batch=request.effective_batch,
                          checkpoint_interval=request.checkpoint_interval,
                          validation_interval=request.validation_interval,
                          continued_from=tuple(request.continued_from))
    return recipe, launch


def _write_plan(ctx: LtxContext, text: str, section: list[str], holdout: list[str]) -> str:
    """Write plan.md with its provenance line, its latent cache and holdout-loss sections; returns the digest the
    user approves.

    What you approve is the plan as the pipeline words it; which version wrote it is said beside it, outside
    the approved text, so the version's own identity never voids an approval (#49). So is the latent cache's
    forecast: other runs fill the cache, and that must not void an approval either (#44); and so are the holdout
    loss's counts, which autotune rewrites with the step time it measures (#45).
    """
    subject = digest(text)
    text = with_provenance(text, subject, code_identity(), _previous_plan(ctx.paths.plan_file))
    atomic_write(ctx.paths.plan_file, HOLDOUT_SECTION.put(CACHE_SECTION.put(text, section), holdout),
                 root=ctx.workspace)
    return subject


def _cache_section(ctx: LtxContext, probe: ProbeOutputs, recipe: Recipe, launch: LaunchShape,
                   preparation: PreparationPlan, audio: AudioPlan, autotune_runs: bool) -> list[str]:
    """plan.md's latent cache forecast when the rows and model files are known before approval, else why not yet
    (the data check writes it then)."""
    request = ctx.request
    if not ctx.backend.capabilities.uses_real_files:
        return note_section(f"the {request.backend} backend reads no files: nothing is preprocessed or cached")
    dataset = probe.dataset
    own = dataset.metadata.precomputed if dataset.metadata is not None else None
    why = ("the prepare phase makes the dataset after approval" if preparation.needed
           else "the data check finds the rows to preprocess" if dataset.kind != "metadata"
           else f"the data check first leaves the {len(audio.left_out)} silent clip(s) out" if audio.left_out
           else "the data check first verifies your .precomputed beside the metadata"
           if own is not None and not request.fresh_preprocess
           else f"the {request.backend} backend's base weights are made by the data check"
           if isinstance(ctx.backend, MakesBaseWeights) and not request.model_path else None)
    try:
        models = model_paths(ctx) if why is None else None
    except BadInput:
        why = "the probe found no checkpoint or text encoder"
    if why is not None or models is None:
        return pending_section(why or "the model files are not known yet")
    shape = RunShape(recipe, launch.total, probe.tier.base, autotune_runs,
                     trained_mode(get_mode(request.mode), audio), models)
    metadata = Path(dataset.path)
    try:
        return forecast_section(ctx, shape, metadata, len(read_metadata_rows(metadata)), by_data_check=False)
    except BadInput:  # rows the data check has not checked yet: it reports them, then forecasts
        return pending_section("the data check checks the rows first")


def _autotune(ctx: LtxContext) -> AutotunePlan:
    """Whether autotune runs (``ltx.autotune.availability``): the choice, the backend, the probe's GPUs and,
    for assumed GPUs, whether this machine has an nvidia-smi to measure a trial's memory with."""
    request = ctx.request
    return autotune_plan(request.autotune, request.backend, gpus_assumed=ctx.output(ProbeOutputs).assumed_gpu,
                         nvidia_smi_found=nvidia_smi_found(request.nvidia_smi))


def _applies(item: str, backend: TrainerBackend) -> bool:
    """Whether a probe finding concerns this backend (``uv`` is nothing to a reference run)."""
    return backend.capabilities.runs_real_trainer or item not in _REAL_TRAINER_ONLY


def _validation_sources(ctx: LtxContext, recipe: Recipe, mode: Mode, audio: AudioPlan,
                        facts: dict[str, dict[str, Any]]) -> ValidationSources | None:
    """Which rows the validation samples' conditions come from (None: nothing to choose, or no template here)."""
    try:
        template = ctx.backend.template(recipe.template)
    except BadInput:
        return None  # a missing template is already an approval blocker
    samples, _ = template_samples(template)
    dataset = ctx.output(ProbeOutputs).dataset
    left_out = audio.left_out
    if dataset.kind == "metadata":
        path = Path(dataset.path)
        candidates = candidates_from_rows(read_metadata_rows(path), path.parent, facts, left_out=left_out)
    else:
        candidates = candidates_from_folder(facts, left_out=left_out)
    if ctx.request.holdout_file:
        held = Path(ctx.request.holdout_file)
        candidates = candidates_from_rows(read_metadata_rows(held), held.parent, facts, held_out=True) + candidates
    sources = choose_sources([list(s.get("conditions") or []) for s in samples], candidates,
                             video_media=mode.video_media, choice=ctx.request.validation_media)
    # Nothing to choose (the samples name no media) is stored as nothing: such a plan stores what it always did.
    return sources if sources.needs or sources.validation_off else None


def _check_template(backend: TrainerBackend, template: str, blockers: list[str]) -> None:
    """The backend must have the mode's template; the toy backends cover fewer modes than the trainer, and
    refuse at once (their templates ship with the project), while a checkout's missing one is a blocker."""
    try:
        backend.template(template)
    except BadInput as exc:
        if not backend.capabilities.runs_real_trainer:
            raise
        if backend.checkout_root is not None:  # no checkout at all is already a blocker
            blockers.append(exc.what)


def _clip_warnings(probe: ProbeOutputs, recipe: Recipe) -> list[str]:
    """Clips shorter than the smallest bucket's frames are skipped by preprocessing without an error."""
    counts = probe.clip_frames.counts
    if not counts:
        return []
    smallest = min(int(b.split("x")[2]) for s in recipe.stages for b in s.buckets)
    short = sorted(path for path, n in counts.items() if n is not None and n < smallest)
    if not short:
        return []
    names = ", ".join(short[:5]) + (f" and {len(short) - 5} more" if len(short) > 5 else "")
    return [f"{len(short)} of {len(counts)} clips have fewer than {smallest} frames and would be skipped by "
            f"preprocessing: {names}. Options: a smaller bucket, an extra shorter bucket (multi-bucket forces "
            "batch 1), or accept the loss."]


def _captioner_blockers(probe: ProbeOutputs, preparation: PreparationPlan) -> list[str]:
    """Captioning needs its captioner: one that is not available blocks approval, with the command that fixes it."""
    if not preparation.needed:
        return []
    found = probe.finding("Captioner")
    if found is None or found.status == "ok":
        return []
    step = found.next_step or "see status"
    return [f"Captioner {preparation.captioner}: {found.detail}. Next step: {step}"]


def _previous_plan(path: Path) -> str | None:
    """The plan.md this plan replaces (its lines are compared), None for a first plan."""
    try:
        # Neither the forecast nor the holdout loss's counts are the plan's text.
        return HOLDOUT_SECTION.drop(CACHE_SECTION.drop(path.read_text(encoding="utf-8")))
    except OSError:
        return None


PHASE = PlanPhase()
