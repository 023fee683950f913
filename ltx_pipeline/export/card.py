"""The exported folder's model card (``README.md``): the run's recorded facts, and how to load the weights.

Pure: ``model_card`` renders a ``CardFacts`` the caller gathered from the run's records. Every line states
a record or a measurement (a figure nobody measured says "not measured"); nothing predicts quality. The
loading instructions name only what the trainer's own source shows: the ``diffusion_model.`` key layout
ComfyUI reads, and ltx-core's ``SingleGPUModelBuilder.lora`` with ``LTXV_LORA_COMFY_RENAMING_MAP``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ltx_pipeline.outputs.holdout_figures import CheckpointLoss

__all__ = ["CardFacts", "Identity", "Measured", "model_card"]


@dataclass(frozen=True)
class Identity:
    """A model file as the data check identified it (``ltx.data_identity.model_identity``)."""

    path: str | None
    kind: str
    size: int | None
    content: str | None  # the digest of everything but the path


@dataclass(frozen=True)
class Measured:
    """What the run measured of its training (None: not measured)."""

    step_time_s: float | None  # monitor: the steady-state median of the trainer's Time/Step
    steps_per_second: float | None  # the trainer's closing "Training speed"
    peak_memory_gb: float | None  # the trainer's peak statistic, on a GPU
    peak_memory_note: str  # what the peak is, or why there is none
    autotune: str | None  # autotune's measured winner, in words (None: autotune did not sweep)


@dataclass(frozen=True)
class CardFacts:
    """Everything the model card says, each from the run's records."""

    run: str
    weights_file: str
    weights_sha256: str
    weights_size: int
    step: int
    chosen_by: str
    stage_final_step: int
    backend: str
    backend_is_ltx: bool
    base_model: Identity | None
    text_encoder: Identity | None
    trigger: str | None
    mode: str  # the recipe's mode (t2v, v2v, ...)
    training_mode: str  # lora
    rank: int | None
    alpha: int | None
    target_modules: tuple[str, ...]
    adapted_modules: int
    dtypes: tuple[str, ...]
    samples_trained: int | None
    samples_total: int | None
    measured: Measured
    holdout: CheckpointLoss | None
    lowest_holdout: CheckpointLoss | None
    metadata: dict[str, str] = field(default_factory=dict)
    pictures: dict[str, str] = field(default_factory=dict)  # file in the folder -> what it shows


def _size(count: int | None) -> str:
    if count is None:
        return "size unknown"
    return f"{count / 1024 / 1024:.1f} MiB ({count} bytes)" if count >= 1024 * 1024 else f"{count} bytes"


def _identity(label: str, ident: Identity | None) -> str:
    if ident is None:
        return f"- {label}: not recorded (a run made before model identities were recorded)"
    digest = f", content digest `{ident.content}`" if ident.content else ""
    return f"- {label}: `{ident.path}` ({ident.kind}, {_size(ident.size)}{digest})"


def _figure(value: float | None, unit: str, digits: int = 3) -> str:
    return "not measured" if value is None else f"{value:.{digits}f} {unit}"


def _facts(f: CardFacts) -> list[str]:
    rank = "not recorded" if f.rank is None else str(f.rank)
    alpha = "not recorded" if f.alpha is None else str(f.alpha)
    trained = "not recorded" if f.samples_trained is None else str(f.samples_trained)
    total = f" of {f.samples_total}" if f.samples_total is not None else ""
    lines = [
        f"- Run: `{f.run}`; checkpoint at step {f.step} of {f.stage_final_step} (chosen by {f.chosen_by})",
        f"- Weights: `{f.weights_file}`, {_size(f.weights_size)}, sha256 `{f.weights_sha256}`, copied byte for "
        "byte from the trainer's checkpoint",
        f"- Trained by: {f.backend}" + ("" if f.backend_is_ltx else " (not the LTX-2 trainer: these weights do not "
                                        "fit an LTX-2 model)"),
        _identity("Base model", f.base_model),
        _identity("Text encoder", f.text_encoder),
        f"- Trigger word: {f'`{f.trigger}`' if f.trigger else 'none'}",
        f"- Mode: {f.mode} ({f.training_mode})",
        f"- LoRA rank {rank}, alpha {alpha}; target modules: "
        + (", ".join(f"`{m}`" for m in f.target_modules) or "not recorded")
        + f"; {f.adapted_modules} adapted layer(s), stored as {', '.join(f.dtypes) or 'no tensors'}",
        f"- Dataset: {trained}{total} sample(s) trained on",
    ]
    if f.metadata:
        ic_lora = any(key.startswith("reference_") for key in f.metadata)
        lines.append("- Safetensors metadata, kept as the trainer wrote it"
                     + (" (the reference scale factors an IC-LoRA's inference needs)" if ic_lora else "") + ": "
                     + ", ".join(f"`{k}` = `{v}`" for k, v in sorted(f.metadata.items())))
    return lines


def _measured(f: CardFacts) -> list[str]:
    m = f.measured
    peak = f"{m.peak_memory_gb:.2f} GB ({m.peak_memory_note})" if m.peak_memory_gb is not None \
        else f"not reported ({m.peak_memory_note})"
    lines = [
        f"- Step time (steady-state median of the trainer's Time/Step): {_figure(m.step_time_s, 's')}",
        f"- Trainer's overall speed: {_figure(m.steps_per_second, 'steps/s', 2)}",
        f"- Peak memory: {peak}",
    ]
    if m.autotune:
        lines.append(f"- Autotune: {m.autotune}")
    if f.holdout is not None:
        loss = f.holdout.holdout
        total, video, audio = ("none" if part is None else f"{part:.4g}" for part in (loss.total, loss.video,
                                                                                       loss.audio))
        lines.append(f"- Holdout loss at step {f.holdout.step} (fixed-noise flow-matching loss on held-out rows, "
                     f"not a quality score): total {total}, video {video}, audio {audio}")
    else:
        lines.append(f"- Holdout loss at step {f.step}: not measured")
    if f.lowest_holdout is not None:
        least = f.lowest_holdout
        lines.append(f"- Lowest holdout loss of the run: {least.holdout.total:.4g} at step {least.step}")
    return lines


def _loading(f: CardFacts) -> list[str]:
    return [
        "## Loading it",
        "",
        "The keys are the trainer's own: `diffusion_model.<module>.lora_A.weight` / `.lora_B.weight`, the layout "
        "the trainer saves for ComfyUI. Copy the file into `ComfyUI/models/loras/` and apply it to the LTX-2 "
        "model with a LoRA loader node (it holds transformer weights only, no text-encoder weights).",
        "",
        "With LTX-2's own loader (ltx-core), fused into the transformer when it is built:",
        "",
        "```python",
        "from ltx_core.loader import LTXV_LORA_COMFY_RENAMING_MAP, SingleGPUModelBuilder",
        "from ltx_core.model.transformer.model_configurator import LTXV_MODEL_COMFY_RENAMING_MAP, LTXModelConfigurator",
        "",
        "builder = SingleGPUModelBuilder(model_path=BASE_CHECKPOINT, model_class_configurator=LTXModelConfigurator,",
        "                                model_sd_ops=LTXV_MODEL_COMFY_RENAMING_MAP)",
        f'transformer = builder.lora("{f.weights_file}", 1.0, LTXV_LORA_COMFY_RENAMING_MAP).build(device=DEVICE)',
        "```",
        "",
        "The trainer itself loads the file as `model.load_checkpoint` in a config (`training_config.yaml` here is "
        "the config it trained with). For the ltx-pipelines command lines, see that package's README.",
    ]


def model_card(f: CardFacts) -> str:
    """The model card's Markdown."""
    pictures = [f"- `{name}`: {what}" for name, what in f.pictures.items()] or ["- none was rendered"]
    parts = [
        [f"# {f.run}: LoRA at step {f.step}", "",
         "Exported by `ltx-pipeline export` from the run's records. Every figure below was recorded or measured "
         "during the run; none is a quality rating.", "", "## Facts", ""],
        _facts(f), ["", "## Measured", ""], _measured(f), ["", "## Pictures", ""], pictures,
        ["", "## Files", "",
         f"- `{f.weights_file}`: the LoRA weights", "- `training_config.yaml`: the trainer's config as it trained",
         "- `README.md`: this card", ""],
        _loading(f),
    ]
    return "\n".join(line for part in parts for line in part) + "\n"
