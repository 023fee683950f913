"""The trainer's own flow-matching loss per checkpoint on fixed noise; run with the trainer's python.

Usage: ``python holdout_loss.py JOB.json``. The job (written by ltx-pipeline's ``holdout`` room) names the trained
config, the ``.precomputed`` roots of the held-out rows and of the training rows, how many training rows to
measure, the checkpoints (step 0: the base, its LoRA disabled), the sigmas, the seed and the results file.

The definition is the trainer's: the model is loaded as ``LtxvTrainer._load_models`` and ``_setup_lora`` load it,
the text features go through the embeddings processor as in ``_training_step``, and each sample's inputs and loss
come from the training strategy's ``prepare_training_inputs`` and ``compute_loss``. Only the randomness is fixed:
a sampler that returns the given sigma stands in for the timestep sampler, and the torch RNG is seeded per
(set, sample, sigma) before each draw, so the noise and the strategy's conditioning draws are the same for every
checkpoint. The video loss is ``compute_loss`` with the audio prediction left out; the audio loss is the rest of
the total (null when nothing audio is generated).

The model loads once; each LoRA checkpoint is loaded into the same adapter (``set_peft_model_state_dict``, as
``_load_lora_checkpoint``). Each measured checkpoint is written to the results file at once (temp file, then
rename), and checkpoints already there under the same protocol are not measured again: a kill loses at most the
checkpoint in progress. Standalone: imports nothing from ltx_pipeline. Prints one ``LTX_PIPELINE_HOLDOUT`` JSON line
per checkpoint; a failure is one line on stderr and exit 1 (2 for a job it cannot read).
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import Any

_MARK = "LTX_PIPELINE_HOLDOUT "
_COMFY_PREFIX = "diffusion_model."
_SET_SEED_OFFSET = {"holdout": 0, "train": 1_000_000}


def _read_job(path: str) -> dict[str, Any]:
    try:
        job = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        print(f"holdout_loss: cannot read the job file {path}: {exc}", file=sys.stderr)
        sys.exit(2)
    if not isinstance(job, dict) or job.get("version") != 1:
        print(f"holdout_loss: {path} is not a version-1 holdout-loss job", file=sys.stderr)
        sys.exit(2)
    return job


def _done(results: Path, protocol: str) -> list[dict[str, Any]]:
    """The checkpoints already measured under this protocol (none when the file is absent or another's)."""
    try:
        data = json.loads(results.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return []
    return list(data.get("checkpoints") or []) if data.get("protocol") == protocol else []


def _write(results: Path, protocol: str, entries: list[dict[str, Any]]) -> None:
    tmp = results.with_name(f".{results.name}.tmp")
    with open(tmp, "w", encoding="utf-8") as handle:
        json.dump({"protocol": protocol, "checkpoints": entries}, handle, indent=1)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(tmp, results)


def pick(count: int, wanted: int | None) -> list[int]:
    """``wanted`` indices spread evenly over ``count`` sorted samples (all of them when None or more)."""
    if wanted is None or wanted >= count:
        return list(range(count))
    return sorted({i * count // wanted for i in range(wanted)})


class _Model:
    """The transformer with its LoRA adapter, the embeddings processor and the strategy, loaded once."""

    def __init__(self, config: Any) -> None:
        import torch
        from accelerate import Accelerator
        from ltx_trainer.model_loader import (
            embedding_weight_paths,
            load_embeddings_processor,
            load_transformer,
            read_video_scale_factors,
            resolve_video_vae_path,
        )
        from ltx_trainer.quantization import quantize_model
        from ltx_trainer.training_strategies import get_training_strategy
        from peft import LoraConfig, get_peft_model

        model = config.model
        if model.training_mode != "lora":
            raise ValueError("holdout loss is measured for LoRA runs only (a full fine-tune's checkpoints are whole "
                             "models: one model load each)")
        self.config = config
        self.strategy = get_training_strategy(config.training_strategy)
        self.strategy.video_scale_factors = read_video_scale_factors(
            resolve_video_vae_path(model.model_path, model.video_vae_path))
        self.device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
        transformer = load_transformer(checkpoint_path=model.model_path, device="cpu", dtype=torch.bfloat16)
        self.processor = load_embeddings_processor(
            checkpoint_path=embedding_weight_paths(model.model_path, model.text_encoder_path),
            gemma_model_path=model.text_encoder_path, device=self.device, dtype=torch.bfloat16)
        self.processor.feature_extractor = None
        transformer = transformer.to(dtype=torch.bfloat16)
        if config.acceleration.quantization is not None:
            transformer = quantize_model(transformer, precision=config.acceleration.quantization)
        transformer.requires_grad_(False)
        lora = config.lora
        transformer = get_peft_model(transformer, LoraConfig(r=lora.rank, lora_alpha=lora.alpha,
                                                             target_modules=lora.target_modules,
                                                             lora_dropout=lora.dropout, init_lora_weights=True))
        self.transformer = transformer.to(self.device).eval()
        self.accelerator = Accelerator(mixed_precision=config.acceleration.mixed_precision_mode)

    def load(self, weights: str) -> None:
        """The checkpoint's LoRA weights into the adapter; every key must find its place."""
        from peft import set_peft_model_state_dict
        from safetensors.torch import load_file

        state = {k.replace(_COMFY_PREFIX, "", 1): v for k, v in load_file(weights).items()}
        result = set_peft_model_state_dict(self.transformer.get_base_model(), state)
        unexpected = list(getattr(result, "unexpected_keys", []) or [])
        if unexpected:
            raise ValueError(f"{weights} does not fit the model's LoRA adapter: unexpected keys {unexpected[:3]}")
        # A LoRA key the file lacks would keep the previous checkpoint's value: its figure would be a mix.
        missing = [k for k in getattr(result, "missing_keys", []) or [] if "lora_" in k]
        if missing:
            raise ValueError(f"{weights} lacks LoRA weights the adapter has: {missing[:3]}")


class _FixedSigma:
    """A timestep sampler that gives every sample the same, given sigma (``sample_for``, as the trainer calls it)."""

    def __init__(self, sigma: float) -> None:
        self.sigma = sigma

    def sample_for(self, batch: Any) -> Any:
        import torch

        return torch.full((batch.shape[0],), self.sigma, device=batch.device, dtype=torch.float32)


def _to(value: Any, device: Any) -> Any:
    if isinstance(value, dict):
        return {k: _to(v, device) for k, v in value.items()}
    return value.to(device) if hasattr(value, "to") else value


class _Samples:
    """One set's samples as batches of one, with their text embeddings computed once (LoRA leaves them alone)."""

    def __init__(self, model: _Model, root: str, wanted: int | None) -> None:
        import torch
        from ltx_core.text_encoders.gemma import convert_to_additive_mask
        from ltx_trainer.datasets import PrecomputedDataset
        from torch.utils.data import default_collate

        dataset = PrecomputedDataset(root, data_sources=model.config.training_strategy.get_data_sources())
        self.batches = []
        for index in pick(len(dataset), wanted):
            batch = _to(default_collate([dataset[index]]), model.device)
            conditions = batch["conditions"]
            video = conditions.get("video_prompt_embeds", conditions.get("prompt_embeds"))
            audio = conditions.get("audio_prompt_embeds", conditions.get("prompt_embeds"))
            mask = conditions["prompt_attention_mask"]
            with torch.no_grad():
                video_e, audio_e, attention = model.processor.create_embeddings(
                    video, audio, convert_to_additive_mask(mask, video.dtype))
            batch["conditions"] = {"video_prompt_embeds": video_e, "audio_prompt_embeds": audio_e,
                                   "prompt_attention_mask": attention}
            self.batches.append(batch)


def _seeded(seed: int) -> None:
    import torch

    torch.manual_seed(seed)
    if torch.cuda.is_available():
        torch.cuda.manual_seed_all(seed)


def _one(model: _Model, batch: dict[str, Any], sigma: float, seed: int) -> tuple[float | None, float | None, float]:
    """(video, audio, total) of one sample at one sigma, by the strategy's own functions."""
    import torch

    _seeded(seed)
    batch = {k: (dict(v) if isinstance(v, dict) else v) for k, v in batch.items()}  # the strategy may write into it
    inputs = model.strategy.prepare_training_inputs(batch, _FixedSigma(sigma))
    with torch.no_grad():
        with model.accelerator.autocast():
            video_pred, audio_pred = model.transformer(video=inputs.video, audio=inputs.audio, perturbations=None)
        # As in training: accelerate hands the loss fp32 predictions, and the loss is computed outside autocast.
        video_pred = None if video_pred is None else video_pred.float()
        audio_pred = None if audio_pred is None else audio_pred.float()
        total = model.strategy.compute_loss(video_pred, audio_pred, inputs).float().mean().item()
        video = (model.strategy.compute_loss(video_pred, None, inputs).float().mean().item()
                 if inputs.video_targets is not None and video_pred is not None else None)
    audio = None if inputs.audio_targets is None or audio_pred is None else total - (video or 0.0)
    return video, audio, total


def _measure(model: _Model, samples: _Samples, sigmas: list[float], seed: int) -> dict[str, Any]:
    """The set's mean video, audio and total loss over its samples and the sigmas."""
    figures: dict[str, list[float]] = {"video": [], "audio": [], "total": []}
    for row, batch in enumerate(samples.batches):
        for k, sigma in enumerate(sigmas):
            video, audio, total = _one(model, batch, sigma, seed + 1000 * row + k)
            figures["total"].append(total)
            if video is not None:
                figures["video"].append(video)
            if audio is not None:
                figures["audio"].append(audio)
    mean = {key: (sum(values) / len(values) if values else None) for key, values in figures.items()}
    return {**mean, "samples": len(samples.batches)}


def main() -> int:
    job = _read_job(sys.argv[1])
    import yaml
    from ltx_trainer.config import LtxTrainerConfig

    results, protocol = Path(job["results"]), str(job["protocol"])
    entries = _done(results, protocol)
    measured = {e["id"] for e in entries}
    todo = [c for c in job["checkpoints"] if c["id"] not in measured]
    if not todo:
        return 0
    try:
        with open(job["config"], encoding="utf-8") as handle:
            config = LtxTrainerConfig(**(yaml.safe_load(handle) or {}))
        started = time.monotonic()
        model = _Model(config)
        sets = {name: _Samples(model, root, job["train_samples"] if name == "train" else None)
                for name, root in job["sets"].items()}
        print(f"{_MARK}{json.dumps({'loaded_s': round(time.monotonic() - started, 3)})}", flush=True)
        for checkpoint in todo:
            entries.append(_checkpoint(model, sets, checkpoint, job))
            _write(results, protocol, entries)
            print(_MARK + json.dumps(entries[-1]), flush=True)
    except Exception as exc:  # one line, the way every trainer-side script fails
        print(f"holdout_loss: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    return 0


def _checkpoint(model: _Model, sets: dict[str, _Samples], checkpoint: dict[str, Any],
                job: dict[str, Any]) -> dict[str, Any]:
    import contextlib

    started = time.monotonic()
    if checkpoint["path"] is None:
        adapter: Any = model.transformer.disable_adapter()  # step 0: the base model as it is
    else:
        model.load(checkpoint["path"])
        adapter = contextlib.nullcontext()
    with adapter:
        figures = {name: _measure(model, samples, job["sigmas"], int(job["seed"]) + _SET_SEED_OFFSET[name])
                   for name, samples in sets.items()}
    return {"id": checkpoint["id"], "step": checkpoint["step"], "checkpoint": checkpoint["path"], **figures,
            "seconds": round(time.monotonic() - started, 3)}


if __name__ == "__main__":
    sys.exit(main())
