"""Plan phase: write ``<run>/plan.md``, the user's contract, and stop for its approval.

The plan follows the official plan template's sections and is derived, not fixed: the recipe
rules in ``ltx/recipe.py`` applied to the request and to what the probe found. Its content hash is
the approval subject, so any change that alters the plan voids an earlier approval. Missing
prerequisites do not stop the plan; each is listed with its next step, and ``approve`` refuses
until the ones heavy phases need are present. No durations are invented: training time stays
unknown until the sanity check has measured a step.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

from ltx_pipeline.backends.base import DEFAULT_MAIN_PORT
from ltx_pipeline.code_identity import code_identity
from ltx_pipeline.engine import PhaseResult
from ltx_pipeline.engine.fingerprint import digest
from ltx_pipeline.errors import BadInput
from ltx_pipeline.ltx.audio_choice import AudioPlan, decide_audio, trained_mode
from ltx_pipeline.ltx.autotune.availability import AutotunePlan, autotune_plan
from ltx_pipeline.ltx.launch_checks import device_placement_line
from ltx_pipeline.ltx.launch_plan import launch_shape
from ltx_pipeline.ltx.metadata import read_metadata_rows
from ltx_pipeline.ltx.modes import Mode, generated_media, get_mode
from ltx_pipeline.ltx.plan_provenance import with_provenance
from ltx_pipeline.ltx.preparation import PreparationPlan, plan_preparation, smallest_bucket_frames, videos_to_scan
from ltx_pipeline.ltx.recipe import Recipe, build_recipe, schedule_lines
from ltx_pipeline.ltx.tiers import Tier
from ltx_pipeline.ltx.validation_sources import ValidationSources, choose_sources, plan_lines
from ltx_pipeline.outputs.plan import PlannedAutotune, PlanOutputs
from ltx_pipeline.outputs.probe import ProbeOutputs
from ltx_pipeline.phase_context import LtxContext
from ltx_pipeline.probing import DatasetInfo, Finding, to_plain
from ltx_pipeline.probing.nvidia_smi import nvidia_smi_found
from ltx_pipeline.request import EVAL_ONLY_FIELDS, RENDEZVOUS_FIELDS
from ltx_pipeline.scenes.detect import DETECTOR, find_cuts
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
        request = ctx.request
        if request.slurm:
            check_paths(ctx.workspace)  # a path SLURM would misread is refused now, not at submission
        mode = get_mode(request.mode)
        tier = Tier(probe.tier.key, probe.tier.name, probe.tier.base)
        # The launch is computed here, once: validate and training read it from the plan's outputs.
        launch = launch_shape(backend=request.backend, gpu_count=probe.gpu_count, requested=request.processes,
                              training_mode=request.training_mode, nodes=request.nodes)
        gpu_names = tuple(g.name for g in probe.gpus.gpus)
        recipe = build_recipe(mode=mode, tier=tier, gpu_count=probe.gpu_count, launch=launch, gpu_names=gpu_names,
                              training_mode=request.training_mode, strategy=request.strategy,
                              stages=request.stages(), buckets_given=request.buckets is not None,
                              rank=request.rank, steps=request.steps, learning_rate=request.learning_rate,
                              effective_batch=request.effective_batch,
                              checkpoint_interval=request.checkpoint_interval,
                              validation_interval=request.validation_interval,
                              continued_from=tuple(request.continued_from))
        facts = probe.clip_frames.facts_plain()
        dataset = to_plain(probe.dataset)  # the ltx rules read the probe's dataset record as plain data
        preparation = plan_preparation(
            dataset=dataset, facts=facts, mode=mode, captioner=request.captioner, holdout=request.holdout,
            holdout_file=request.holdout_file, scans=find_cuts(ctx, videos_to_scan(dataset, facts)),
            min_frames=smallest_bucket_frames(recipe), detector=DETECTOR.words)
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
        blockers += [autotune.blocker] if autotune.blocker else []
        audio = decide_audio(mode, request.audio, facts)
        blockers += [audio.blocker] if audio.blocker else []
        validation = _validation_sources(ctx, recipe, trained_mode(mode, audio), audio, facts)
        if validation is not None and validation.blocker and audio.blocker:
            # One cause, said once: the clips' sound blocks the run itself; validation's need follows from it.
            validation = replace(validation, blocker=None)
        blockers += [validation.blocker] if validation is not None and validation.blocker else []
        outputs = PlanOutputs(plan_file=str(ctx.paths.plan_file), plan_hash="", recipe=recipe,
                              warnings=tuple(warnings), missing=tuple(f.item for f in missing),
                              blockers=tuple(blockers), preparation=preparation,
                              autotune=PlannedAutotune(runs=autotune.runs, reason=autotune.reason,
                                                       blocker=autotune.blocker),
                              audio=audio, launch=launch, validation=validation)
        text = render_plan(ctx, recipe, probe, missing, warnings, preparation, autotune, audio, validation)
        # What you approve is the plan as the pipeline words it; which version wrote it is said beside it, outside
        # the approved text, so the version's own identity never voids an approval (#49).
        subject = digest(text)
        text = with_provenance(text, subject, code_identity(), _previous_plan(ctx.paths.plan_file))
        atomic_write(ctx.paths.plan_file, text, root=ctx.workspace)
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
                                              ("trainer_python", None))

# Prerequisites only the official trainer needs; the toy and simulated backends run without them.
_LTX_ONLY = ("uv", "LTX checkpoint", "Gemma text encoder", "LTX-2 trainer checkout")


def _autotune(ctx: LtxContext) -> AutotunePlan:
    """Whether autotune runs (``ltx.autotune.availability``): the choice, the backend, the probe's GPUs and,
    for assumed GPUs, whether this machine has an nvidia-smi to measure a trial's memory with."""
    request = ctx.request
    return autotune_plan(request.autotune, request.backend, gpus_assumed=ctx.output(ProbeOutputs).assumed_gpu,
                         nvidia_smi_found=nvidia_smi_found(request.nvidia_smi))


def _applies(item: str, backend: Any) -> bool:
    """Whether a probe finding concerns this backend (``uv`` is nothing to a reference run)."""
    return backend.name == "ltx" or item not in _LTX_ONLY


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


def _check_template(backend: Any, template: str, blockers: list[str]) -> None:
    """The backend must have the mode's template; the toy backends cover fewer modes than the trainer."""
    try:
        backend.template(template)
    except BadInput as exc:
        if backend.name != "ltx":
            raise
        if getattr(backend, "_root", None) is not None:  # no checkout at all is already a blocker
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


def _preparation_lines(ctx: LtxContext, preparation: PreparationPlan) -> list[str]:
    lines = ["## Data preparation", ""]
    if not preparation.needed:
        return [*lines, f"- Skipped: {preparation.reason}.", ""]
    lines += [f"- Input: {preparation.reason}; staged under `{ctx.paths.dataset}` (symlinks, or copies across "
              "file systems; your files are never moved or edited)",
              f"- Will: {preparation.summary()}"]
    lines += preparation.scene_lines()
    lines += [f"- Captioner: {preparation.captioner}"
              + (" (measured facts of each clip: colours, motion, duration; not a language model)"
                 if preparation.captioner == "offline" else " (ltx-trainer's scripts/caption_videos.py)"),
              "- Captions never contain the trigger word (the config prepends it at preprocessing)",
              "- After captioning, three captions are shown in full and the run stops at a second approval gate "
              "bound to the captions file's hash", ""]
    return lines



def _previous_plan(path: Path) -> str | None:
    """The plan.md this plan replaces (its lines are compared), None for a first plan."""
    try:
        return path.read_text(encoding="utf-8")
    except OSError:
        return None


def render_plan(ctx: LtxContext, recipe: Recipe, probe: ProbeOutputs, missing: list[Finding],
                warnings: list[str], preparation: PreparationPlan | None = None,
                autotune: AutotunePlan | None = None, audio: AudioPlan | None = None,
                validation: ValidationSources | None = None) -> str:
    """The plan's Markdown, in the official template's section order."""
    request = ctx.request
    autotune = autotune or _autotune(ctx)
    mode = get_mode(request.mode)
    dataset = probe.dataset
    generates = generated_media(mode, audio.to_dict() if audio is not None else None)
    lines = [f"# Training plan: {ctx.run_name}", ""]
    lines += ["## Goal", "",
              f"Train a {'LoRA' if recipe.training_mode == 'lora' else 'full fine-tune'} for {mode.title} "
              f"(generates: {generates}) on the dataset at `{request.dataset}`"
              + (f", with trigger word `{request.trigger}`." if request.trigger else ", with no trigger word."), ""]
    lines += ["## Mode", "", f"- Mode: **{mode.name}** ({mode.title})",
              f"- Config base: `{recipe.template}` (copied into the run, never edited in place)",
              f"- Generates: {generates}", f"- Training mode: {recipe.training_mode}",
              f"- Trainer backend: {_backend_words(ctx.backend)}", *_model_lines(probe), ""]
    lines += ["## Dataset", "", f"- Path: `{request.dataset}` ({dataset.kind})"]
    lines += _dataset_lines(dataset)
    lines += [f"- Required metadata columns for {mode.name}: {', '.join(mode.columns)}",
              "- Required precomputed folders: "
              + ", ".join(trained_mode(mode, audio).precomputed_dirs), ""]
    if audio is not None and (audio.trains != "as-mode" or audio.silent):
        lines += audio.plan_lines(f"--workspace {ctx.workspace} --run {ctx.run_name}")
    if preparation is not None:
        lines += _preparation_lines(ctx, preparation)
    if validation is not None:
        lines += plan_lines(validation, f"--workspace {ctx.workspace} --run {ctx.run_name}", request.trigger)
    lines += ["## Preprocessing", "", f"- Strategy: {recipe.strategy}"]
    for stage in recipe.stages:
        pairs = zip(stage.buckets, stage.tokens, strict=True)
        tokens = ", ".join(f"{b} = {t:,} video tokens per clip" for b, t in pairs)
        lines.append(f"- Stage {stage.index}: {tokens}"
                     + (" (continues the finished training, on the same latents)" if stage.start_step else ""))
    lines += ["- Output: `dataset/.precomputed/` in the run folder (one folder per stage when chained); existing "
              "precomputed data is verified, never overwritten", ""]
    lines += _config_table(recipe, request)
    lines += schedule_lines(recipe, f"--workspace {ctx.workspace} --run {ctx.run_name}")
    lines += ["## Hardware", "", f"- GPUs: {probe.gpu_summary}",
              f"- VRAM tier: **{recipe.tier_name}** (base: {'low-VRAM' if recipe.base == 'low_vram' else 'standard'}"
              " config)", f"- Launch: {recipe.launch}",
              *filter(None, [device_placement_line(getattr(ctx.backend, "_root", None),
                                                   recipe.num_processes // max(1, request.nodes))]),
              f"- Effective batch: {recipe.effective_batch} = batch {recipe.knobs['batch_size']} x accumulation "
              f"{recipe.knobs['gradient_accumulation_steps']} x {recipe.num_processes} process(es)"
              + (f" ({request.nodes} node(s) x {recipe.num_processes // request.nodes} process(es))"
                 if request.nodes > 1 else ""), *_node_lines(ctx), *_slurm_lines(ctx, recipe), ""]
    lines += _autotune_lines(ctx, autotune)
    lines += ["## Monitoring", "",
              "- W&B: " + ("credentials resolve; logging can be enabled" if probe.host.wandb_credentials
                           else "not logged in — run `wandb login` to enable it"),
              f"- `ltx-pipeline status --workspace {ctx.workspace} --run {ctx.run_name}`", ""]
    lines += ["## Outputs", "", f"- Config: `{ctx.paths.config_file}`",
              f"- Checkpoints: `{ctx.paths.outputs / 'checkpoints'}`",
              f"- Validation samples: `{ctx.paths.outputs / 'samples'}`",
              f"- Autotune log: `{ctx.paths.root / 'autotune.log'}`",
              f"- Evaluation renders of the final weights (3 training captions, 3 out-of-distribution prompts or "
              f"yours, up to 5 held-out; `--skip-eval` leaves them out): `{ctx.paths.outputs / 'eval'}`", ""]
    lines += ["## Assumptions", ""] + [f"- {a}" for a in recipe.assumptions] + [""]
    if warnings:
        lines += ["## Warnings", ""] + [f"- {w}" for w in warnings] + [""]
    if missing:
        lines += ["## Missing prerequisites and warnings", ""]
        lines += [f"- **{f.item}** ({f.status}): {f.detail}. Next step: {f.next_step or 'see status'}"
                  for f in missing] + [""]
    lines += ["## Cost / Time", "",
              f"- {recipe.steps} optimizer steps per stage x {len(recipe.stages)} stage(s)",
              "- Training duration: TBD until " + ("the sanity check measures step time" if autotune.runs
                                                   else "training measures its step time (no sanity trial runs)")
              + "; then measured step time x steps",
              "- Free disk at the workspace: see the probe findings in `ltx-pipeline status`", ""]
    approve = f"ltx-pipeline approve --workspace {ctx.workspace} --run {ctx.run_name}"
    lines += ["## Approve to proceed", "", "Nothing heavy (preprocessing, autotune, training) runs before approval.",
              "", "```", approve, f"ltx-pipeline resume --workspace {ctx.workspace} --run {ctx.run_name}", "```", ""]
    return "\n".join(lines)


def _autotune_lines(ctx: LtxContext, autotune: AutotunePlan) -> list[str]:
    """Whether the sanity trial and the sweep run (``ltx.autotune.availability``), and what that means."""
    lines = ["## Sanity Check + Autotune", ""]
    if autotune.runs:
        return [*lines, "Before the full preprocess, a short trial at the full target resolution (the largest bucket) "
                "checks that training and a validation pass fit in memory, then a few variants of the memory/speed "
                "knobs are measured and the fastest that fits is kept. Loss is not a success criterion.", "",
                f"- Autotune: {autotune.reason}", ""]
    target = f"--workspace {ctx.workspace} --run {ctx.run_name}"
    if autotune.blocker:
        return [*lines, f"- Autotune: **{autotune.reason}**",
                "- This blocks approval. Next step: `ltx-pipeline run " + target + " --autotune off` (or "
                "`autotune: off` in run.yaml, then `ltx-pipeline resume " + target + "`) trains with the baseline "
                "config in the Training Config table as is; or run on the training machine without `--assume-gpu`, "
                "so that its GPUs are probed and autotune can measure them", ""]
    return [*lines, f"- Autotune: **{autotune.reason}**",
            "- Nothing checks before training that this config fits in GPU memory or how fast it steps: the "
            "training's own log, `ltx-pipeline status` and run-summary.md report both. To sweep for the fastest "
            f"config that fits: `ltx-pipeline run {target} --autotune on`", ""]


def _slurm_lines(ctx: LtxContext, recipe: Recipe) -> list[str]:
    """What ``--slurm`` changes: training is submitted to the cluster, not launched here."""
    request = ctx.request
    if not request.slurm:
        return []
    nodes = getattr(request, "nodes", None) or 1
    extra = " ".join(f"`{a}`" for a in request.slurm_args) or "none"
    return [f"- Cluster: each stage's training will be submitted to SLURM with {nodes} node(s) x "
            f"{recipe.num_processes} GPU(s) each (`sbatch` of `{ctx.paths.root / 'slurm'}/train*.sbatch`, one task "
            f"per node, requeue-safe); your #SBATCH options: {extra}"]


def _config_table(recipe: Recipe, request: Any) -> list[str]:
    knobs = recipe.knobs
    rows = [("optimizer_type", knobs["optimizer_type"]), ("mixed_precision_mode", knobs["mixed_precision_mode"]),
            ("quantization", knobs["quantization"] or "null"),
            ("enable_gradient_checkpointing", str(knobs["enable_gradient_checkpointing"]).lower()),
            ("load_text_encoder_in_8bit", str(knobs["load_text_encoder_in_8bit"]).lower()),
            ("offload_optimizer_during_validation", str(knobs["offload_optimizer_during_validation"]).lower()),
            ("batch_size", knobs["batch_size"]), ("gradient_accumulation_steps", knobs["gradient_accumulation_steps"]),
            ("effective batch (all GPUs)", recipe.effective_batch), ("steps", _steps_words(recipe)),
            ("learning_rate", ", ".join(f"{s.learning_rate:g}" for s in recipe.stages)),
            *([("lora rank / alpha", f"{recipe.rank} / {recipe.alpha}")] if recipe.training_mode == "lora" else []),
            ("trigger word", request.trigger or "none"), ("validation interval", recipe.validation_interval),
            ("validation video_dims", recipe.validation_dims), ("checkpoint interval", recipe.checkpoint_interval),
            ("checkpoints keep_last_n", recipe.keep_last_n)]
    table = ["## Training Config", "", "| setting | value |", "|---|---|"] + [f"| {k} | {v} |" for k, v in rows]
    if recipe.training_mode != "lora":
        return [*table, "", "Full fine-tune: every transformer weight is trained.", ""]
    return [*table, "", "Rank guidance (seed 002): motion or camera 8-16; a character or style 32-64; a dense "
            "multi-character world 96-128. Alpha is kept equal to rank.", ""]


def _steps_words(recipe: Recipe) -> str:
    """The planned stages' steps, and each continuation's steps of the run (``ltx.recipe``)."""
    more = [f"stage {s.index} steps {s.start_step + 1}-{s.start_step + (s.steps or 0)}"
            for s in recipe.stages if s.start_step]
    return f"{recipe.steps}" + (f"; continued: {', '.join(more)}" if more else "")


def _node_lines(ctx: LtxContext) -> list[str]:
    """How the other nodes join a multi-node launch (nothing for one node)."""
    request = ctx.request
    if request.nodes == 1:
        return []
    port = request.main_port or DEFAULT_MAIN_PORT
    return [f"- Nodes: this machine is rank 0 and hosts the rendezvous at {request.main_ip}:{port}; each other node "
            f"(ranks 1..{request.nodes - 1}) runs `ltx-pipeline node-launch --workspace {ctx.workspace} --run "
            f"{ctx.run_name} --machine-rank R` once training starts (the exact commands are printed then). The "
            "workspace must be the same path on every node (a shared file system)"]


def _model_lines(probe: ProbeOutputs) -> list[str]:
    """The model files training will use, as the probe recognised them by content (ltx backend only)."""
    files = probe.models.files if probe.models is not None else None
    if files is None:
        return []
    searched = ", ".join(files.searched) or "no folder"
    return ["- LTX checkpoint: " + (f"`{files.checkpoint}`" if files.checkpoint
                                     else f"not found (searched {searched})"),
            "- Gemma text encoder: " + (f"`{files.text_encoder}`" if files.text_encoder
                                         else f"not found (searched {searched})")]


def _backend_words(backend: Any) -> str:
    if backend.name == "ltx":
        root = getattr(backend, "_root", None)
        return f"ltx (the official ltx-trainer{' at ' + str(root) if root else ''})"
    if backend.name == "reference":
        return "reference (the built-in toy trainer: real training at toy scale, not LTX-2)"
    return "simulated (a cost surface stands in for the trainer; nothing is trained)"


def _dataset_lines(dataset: DatasetInfo) -> list[str]:
    """What the probe found at the dataset path (rows, columns, media, missing files) and its warnings."""
    return [f"- Found: {dataset.to_finding().detail}", *(f"- Warning: {w}" for w in dataset.warnings)]


PHASE = PlanPhase()
