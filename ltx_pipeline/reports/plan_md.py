"""``plan.md``'s Markdown: the user's contract, in the official plan template's section order.

Owns the words of the plan, never its decisions: the plan phase decides (recipe, preparation, autotune,
audio, validation sources, blockers) and hands them over as a ``PlanDocument``; each section here only
words them. Invariant: the same document renders the same text, byte for byte, since its digest is
what the user approves (a changed word voids every earlier approval). No durations are invented:
training time stays unknown until a step has been measured.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from ltx_pipeline.backends.base import DEFAULT_MAIN_PORT
from ltx_pipeline.ltx.audio_choice import AudioPlan, trained_mode
from ltx_pipeline.ltx.autotune.availability import AutotunePlan
from ltx_pipeline.ltx.launch_checks import device_placement_line
from ltx_pipeline.ltx.modes import Mode, generated_media, get_mode
from ltx_pipeline.ltx.preparation import PreparationPlan
from ltx_pipeline.ltx.recipe import Recipe, schedule_lines
from ltx_pipeline.ltx.validation_sources import ValidationSources, plan_lines
from ltx_pipeline.outputs.probe import ProbeOutputs
from ltx_pipeline.phase_context import LtxContext
from ltx_pipeline.probing import DatasetInfo, Finding
from ltx_pipeline.request import RunRequest

__all__ = ["PlanDocument", "render_plan"]


@dataclass(frozen=True)
class PlanDocument:
    """What the plan phase decided, for ``render_plan`` to word.

    Attributes:
        recipe: the recipe rules applied to the request and the probe (``ltx.recipe``).
        probe: the probe's outputs (GPUs, dataset, model files, host).
        missing: the probe findings that are not ok and concern this backend.
        warnings: the plan's warnings (the recipe's and the clips').
        preparation: what the prepare phase will do to the dataset, or why it is skipped.
        autotune: whether the sanity trial and the sweep run, and why.
        audio: whether the run trains sound, and which clips it leaves out.
        validation: where the validation samples' conditions come from (None: nothing to choose).
    """

    recipe: Recipe
    probe: ProbeOutputs
    missing: list[Finding]
    warnings: list[str]
    preparation: PreparationPlan
    autotune: AutotunePlan
    audio: AudioPlan
    validation: ValidationSources | None


def render_plan(ctx: LtxContext, doc: PlanDocument) -> str:
    """The plan's Markdown, in the official template's section order.

    Args:
        ctx: the run (its name, workspace, paths, request and backend).
        doc: what the plan phase decided.

    Returns:
        The text of ``plan.md`` before its provenance line (the text whose digest is approved).
    """
    mode = get_mode(ctx.request.mode)
    lines = [f"# Training plan: {ctx.run_name}", ""]
    lines += _goal_and_mode(ctx, doc, mode)
    lines += _dataset_section(ctx, doc, mode)
    lines += _preprocessing_section(doc.recipe)
    lines += _config_table(doc.recipe, ctx.request)
    lines += schedule_lines(doc.recipe, _target(ctx))
    lines += _hardware_section(ctx, doc)
    lines += _autotune_lines(ctx, doc.autotune)
    lines += _monitoring_and_outputs(ctx, doc.probe)
    lines += _assumptions_and_warnings(doc)
    lines += _cost_and_approval(ctx, doc)
    return "\n".join(lines)


def _target(ctx: LtxContext) -> str:
    """The options that name this run on a command line."""
    return f"--workspace {ctx.workspace} --run {ctx.run_name}"


def _goal_and_mode(ctx: LtxContext, doc: PlanDocument, mode: Mode) -> list[str]:
    request, recipe = ctx.request, doc.recipe
    generates = generated_media(mode, doc.audio.to_dict())
    lines = ["## Goal", "",
             f"Train a {'LoRA' if recipe.training_mode == 'lora' else 'full fine-tune'} for {mode.title} "
             f"(generates: {generates}) on the dataset at `{request.dataset}`"
             + (f", with trigger word `{request.trigger}`." if request.trigger else ", with no trigger word."), ""]
    return [*lines, "## Mode", "", f"- Mode: **{mode.name}** ({mode.title})",
            f"- Config base: `{recipe.template}` (copied into the run, never edited in place)",
            f"- Generates: {generates}", f"- Training mode: {recipe.training_mode}",
            f"- Trainer backend: {ctx.backend.description}", *_model_lines(doc.probe), ""]


def _dataset_section(ctx: LtxContext, doc: PlanDocument, mode: Mode) -> list[str]:
    """The dataset as found, then what the run does to it: sound, preparation, validation media."""
    audio = doc.audio
    lines = ["## Dataset", "", f"- Path: `{ctx.request.dataset}` ({doc.probe.dataset.kind})"]
    lines += _dataset_lines(doc.probe.dataset)
    lines += [f"- Required metadata columns for {mode.name}: {', '.join(mode.columns)}",
              "- Required precomputed folders: " + ", ".join(trained_mode(mode, audio).precomputed_dirs), ""]
    if audio.trains != "as-mode" or audio.silent:
        lines += audio.plan_lines(_target(ctx))
    lines += _preparation_lines(ctx, doc.preparation)
    if doc.validation is not None:
        lines += plan_lines(doc.validation, _target(ctx), ctx.request.trigger)
    return lines


def _dataset_lines(dataset: DatasetInfo) -> list[str]:
    """What the probe found at the dataset path (rows, columns, media, missing files) and its warnings."""
    return [f"- Found: {dataset.to_finding().detail}", *(f"- Warning: {w}" for w in dataset.warnings)]


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


def _preprocessing_section(recipe: Recipe) -> list[str]:
    lines = ["## Preprocessing", "", f"- Strategy: {recipe.strategy}"]
    for stage in recipe.stages:
        pairs = zip(stage.buckets, stage.tokens, strict=True)
        tokens = ", ".join(f"{b} = {t:,} video tokens per clip" for b, t in pairs)
        lines.append(f"- Stage {stage.index}: {tokens}"
                     + (" (continues the finished training, on the same latents)" if stage.start_step else ""))
    return [*lines, "- Output: `dataset/.precomputed/` in the run folder (one folder per stage when chained); "
            "existing precomputed data is verified, never overwritten", ""]


def _config_table(recipe: Recipe, request: RunRequest) -> list[str]:
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
            ("checkpoints keep_last_n", recipe.keep_last_n),
            *((f"{key} (your --set, applied last)", _yaml_value(value)) for key, value in request.config_set.items())]
    table = ["## Training Config", "", "| setting | value |", "|---|---|"] + [f"| {k} | {v} |" for k, v in rows]
    if recipe.training_mode != "lora":
        return [*table, "", "Full fine-tune: every transformer weight is trained.", ""]
    return [*table, "", "Rank guidance (seed 002): motion or camera 8-16; a character or style 32-64; a dense "
            "multi-character world 96-128. Alpha is kept equal to rank.", ""]


def _yaml_value(value: object) -> str:
    """A --set value as the trainer config will hold it: text as written, the rest as flow YAML (null, true, [1, 2])."""
    return value if isinstance(value, str) else json.dumps(value)


def _steps_words(recipe: Recipe) -> str:
    """The planned stages' steps, and each continuation's steps of the run (``ltx.recipe``)."""
    more = [f"stage {s.index} steps {s.start_step + 1}-{s.start_step + (s.steps or 0)}"
            for s in recipe.stages if s.start_step]
    return f"{recipe.steps}" + (f"; continued: {', '.join(more)}" if more else "")


def _hardware_section(ctx: LtxContext, doc: PlanDocument) -> list[str]:
    request, recipe = ctx.request, doc.recipe
    base = "low-VRAM" if recipe.base == "low_vram" else "standard"
    placement = device_placement_line(ctx.backend.checkout_root, recipe.num_processes // max(1, request.nodes))
    across = (f" ({request.nodes} node(s) x {recipe.num_processes // request.nodes} process(es))"
              if request.nodes > 1 else "")
    return ["## Hardware", "", f"- GPUs: {doc.probe.gpu_summary}",
            f"- VRAM tier: **{recipe.tier_name}** (base: {base} config)", f"- Launch: {recipe.launch}",
            *([placement] if placement else []),
            f"- Effective batch: {recipe.effective_batch} = batch {recipe.knobs['batch_size']} x accumulation "
            f"{recipe.knobs['gradient_accumulation_steps']} x {recipe.num_processes} process(es){across}",
            *_node_lines(ctx), *_slurm_lines(ctx, recipe), ""]


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


def _slurm_lines(ctx: LtxContext, recipe: Recipe) -> list[str]:
    """What ``--slurm`` changes: training is submitted to the cluster, not launched here."""
    request = ctx.request
    if not request.slurm:
        return []
    extra = " ".join(f"`{a}`" for a in request.slurm_args) or "none"
    return [f"- Cluster: each stage's training will be submitted to SLURM with {request.nodes or 1} node(s) x "
            f"{recipe.num_processes} GPU(s) each (`sbatch` of `{ctx.paths.root / 'slurm'}/train*.sbatch`, one task "
            f"per node, requeue-safe); your #SBATCH options: {extra}"]


def _autotune_lines(ctx: LtxContext, autotune: AutotunePlan) -> list[str]:
    """Whether the sanity trial and the sweep run (``ltx.autotune.availability``), and what that means."""
    lines = ["## Sanity Check + Autotune", ""]
    if autotune.runs:
        return [*lines, "Before the full preprocess, a short trial at the full target resolution (the largest bucket) "
                "checks that training and a validation pass fit in memory, then a few variants of the memory/speed "
                "knobs are measured and the fastest that fits is kept. Loss is not a success criterion.", "",
                f"- Autotune: {autotune.reason}", ""]
    target = _target(ctx)
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


def _monitoring_and_outputs(ctx: LtxContext, probe: ProbeOutputs) -> list[str]:
    outputs = ctx.paths.outputs
    return ["## Monitoring", "",
            "- W&B: " + ("credentials resolve; logging can be enabled" if probe.host.wandb_credentials
                         else "not logged in — run `wandb login` to enable it"),
            f"- `ltx-pipeline status {_target(ctx)}`", "",
            "## Outputs", "", f"- Config: `{ctx.paths.config_file}`",
            f"- Checkpoints: `{outputs / 'checkpoints'}`",
            f"- Validation samples: `{outputs / 'samples'}`",
            f"- Autotune log: `{ctx.paths.root / 'autotune.log'}`",
            f"- Evaluation renders of the final weights (3 training captions, 3 out-of-distribution prompts or "
            f"yours, up to 5 held-out; `--skip-eval` leaves them out): `{outputs / 'eval'}`",
            *_hub_lines(ctx), ""]


def _hub_lines(ctx: LtxContext) -> list[str]:
    """Where the trainer uploads the final weights (``--push-to-hub``): the repo, never the token."""
    repo = ctx.request.push_to_hub
    if not repo:
        return []
    return [f"- Hugging Face Hub: at the end of training the trainer itself uploads the final weights and a model "
            f"card it writes (with GIFs of the last validation samples, when there are any) to `{repo}` "
            f"(`hub.push_to_hub: true`, `hub.hub_model_id: {repo}` in the last stage's config), creating the repo "
            "if it does not exist (public unless its owner's default is private). The token is read from HF_TOKEN "
            "(or HUGGING_FACE_HUB_TOKEN) in the training's environment and written nowhere"]


def _assumptions_and_warnings(doc: PlanDocument) -> list[str]:
    lines = ["## Assumptions", ""] + [f"- {a}" for a in doc.recipe.assumptions] + [""]
    if doc.warnings:
        lines += ["## Warnings", ""] + [f"- {w}" for w in doc.warnings] + [""]
    if doc.missing:
        lines += ["## Missing prerequisites and warnings", ""]
        lines += [f"- **{f.item}** ({f.status}): {f.detail}. Next step: {f.next_step or 'see status'}"
                  for f in doc.missing] + [""]
    return lines


def _cost_and_approval(ctx: LtxContext, doc: PlanDocument) -> list[str]:
    measured = ("the sanity check measures step time" if doc.autotune.runs
                else "training measures its step time (no sanity trial runs)")
    target = _target(ctx)
    return ["## Cost / Time", "",
            f"- {doc.recipe.steps} optimizer steps per stage x {len(doc.recipe.stages)} stage(s)",
            f"- Training duration: TBD until {measured}; then measured step time x steps",
            "- Free disk at the workspace: see the probe findings in `ltx-pipeline status`", "",
            "## Approve to proceed", "", "Nothing heavy (preprocessing, autotune, training) runs before approval.",
            "", "```", f"ltx-pipeline approve {target}", f"ltx-pipeline resume {target}", "```", ""]


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
