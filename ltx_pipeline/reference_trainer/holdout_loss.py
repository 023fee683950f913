"""``python -m ltx_pipeline.reference_trainer.holdout_loss JOB.json``: the holdout-loss protocol on the toy.

The same job, results file and protocol as ``ltx_pipeline/trainer_side/holdout_loss.py`` runs on the real
trainer (``ltx_pipeline.holdout.protocol``), with the toy's own definition of a step's loss: the model is
built as ``trainer._build_model`` builds it, a LoRA checkpoint is loaded with ``checkpoints.load_weights``
(step 0 puts the adapter's starting weights back: B is zero, so the model is the base), and each sample is
noised by ``flow.prepare_step`` at a fixed sigma after seeding the torch RNG, then scored with
``flow.masked_velocity_loss`` for video and audio apart (their sum is ``step_loss``'s). Each checkpoint's
figures are written as soon as they are measured; those already written under the same protocol are skipped.
Prints one ``LTX_PIPELINE_HOLDOUT`` JSON line per checkpoint; exit 0, 1 on a failure, 2 on a bad job.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from contextlib import nullcontext
from pathlib import Path
from typing import Any

import torch

from ltx_pipeline.holdout.protocol import JOB_VERSION, pick, read_results, sample_seed
from ltx_pipeline.workspace import atomic_write
from ltx_pipeline.yaml_io import load_yaml

__all__ = ["main"]

_MARK = "LTX_PIPELINE_HOLDOUT "
_AUTOCAST = {"bf16": torch.bfloat16, "fp16": torch.float16}


class _Toy:
    """The toy model with its adapter, on its device, and the starting adapter weights (the base's)."""

    def __init__(self, config: Any) -> None:
        from ltx_pipeline.reference_trainer.flow import modalities_of
        from ltx_pipeline.reference_trainer.logs import get_logger
        from ltx_pipeline.reference_trainer.lora import lora_state_dict
        from ltx_pipeline.reference_trainer.trainer import _build_model, _device

        if config.model.training_mode != "lora":
            raise ValueError("holdout loss is measured for LoRA runs only")
        torch.manual_seed(config.seed)
        self.config = config
        self.model = _build_model(config, get_logger())
        self.device = _device()
        self.model.to(self.device).eval()
        self.initial = {k: v.detach().clone() for k, v in lora_state_dict(self.model).items()}
        self.modalities = modalities_of(config.training_strategy)
        self.autocast = _AUTOCAST.get(config.acceleration.mixed_precision_mode or "no")

    def use(self, weights: str | None) -> None:
        from ltx_pipeline.reference_trainer.checkpoints import load_weights
        from ltx_pipeline.reference_trainer.lora import load_lora_state_dict

        if weights is None:
            load_lora_state_dict(self.model, self.initial)
        else:
            load_weights(self.model, Path(weights), "lora")

    def loss(self, batch: dict[str, Any], sigma: float, seed: int) -> tuple[float, float | None]:
        """(video, audio) loss of one sample at one sigma; audio None when the strategy has none."""
        from ltx_pipeline.reference_trainer.flow import masked_velocity_loss, prepare_step

        torch.manual_seed(seed)
        fm = self.config.flow_matching
        inputs = prepare_step(batch, self.modalities, fm.timestep_sampling_mode, fm.timestep_sampling_params,
                              self.device, sigma=torch.full((1,), sigma))
        context = torch.autocast(self.device.type, dtype=self.autocast) if self.autocast else nullcontext()
        with torch.no_grad(), context:
            video_pred, audio_pred = self.model(inputs.video, inputs.video_sigma, inputs.coords, inputs.text,
                                                inputs.text_mask, inputs.audio, inputs.audio_sigma)
            video = masked_velocity_loss(video_pred, inputs.video_target, inputs.video_loss_mask).mean().item()
            audio = (None if audio_pred is None else
                     masked_velocity_loss(audio_pred, inputs.audio_target, inputs.audio_loss_mask).mean().item())
        return video, audio


def _batches(toy: _Toy, root: str, wanted: int | None) -> list[dict[str, Any]]:
    from torch.utils.data import default_collate

    from ltx_pipeline.ltx.trainer_config import data_sources
    from ltx_pipeline.reference_trainer.data import PrecomputedSamples

    dataset = PrecomputedSamples(root, data_sources(toy.config))
    return [default_collate([dataset[index]]) for index in pick(len(dataset), wanted)]


def _measure(toy: _Toy, name: str, batches: list[dict[str, Any]], sigmas: list[float]) -> dict[str, Any]:
    videos: list[float] = []
    audios: list[float] = []
    for row, batch in enumerate(batches):
        for index, sigma in enumerate(sigmas):
            video, audio = toy.loss(batch, sigma, sample_seed(name, row, index))
            videos.append(video)
            if audio is not None:
                audios.append(audio)
    video_mean = sum(videos) / len(videos)
    audio_mean = sum(audios) / len(audios) if audios else None
    return {"video": video_mean, "audio": audio_mean, "total": video_mean + (audio_mean or 0.0),
            "samples": len(batches)}


def run(job: dict[str, Any]) -> list[dict[str, Any]]:
    """Measure every checkpoint of ``job`` not yet in its results file; returns the results' entries."""
    from ltx_pipeline.ltx.trainer_config import LtxTrainerConfig

    results, protocol = Path(job["results"]), str(job["protocol"])
    entries = read_results(results, protocol)
    done = {entry["id"] for entry in entries}
    todo = [c for c in job["checkpoints"] if c["id"] not in done]
    if not todo:
        return entries
    with open(job["config"], encoding="utf-8") as handle:
        config = LtxTrainerConfig(**(load_yaml(handle) or {}))
    started = time.monotonic()
    toy = _Toy(config)
    sets = {name: _batches(toy, root, job["train_samples"] if name == "train" else None)
            for name, root in job["sets"].items()}
    print(_MARK + json.dumps({"loaded_s": round(time.monotonic() - started, 3)}), flush=True)
    for checkpoint in todo:
        began = time.monotonic()
        toy.use(checkpoint["path"])
        figures = {name: _measure(toy, name, batches, job["sigmas"]) for name, batches in sets.items()}
        entries.append({"id": checkpoint["id"], "step": checkpoint["step"], "checkpoint": checkpoint["path"],
                        **figures, "seconds": round(time.monotonic() - began, 3)})
        atomic_write(results, json.dumps({"protocol": protocol, "checkpoints": entries}, indent=1))
        print(_MARK + json.dumps(entries[-1]), flush=True)
    return entries


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ltx_pipeline.reference_trainer.holdout_loss",
                                     description="The holdout-loss protocol on the toy model (NOT LTX-2).")
    parser.add_argument("job", type=Path)
    args = parser.parse_args(argv)
    try:
        job = json.loads(args.job.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        print(f"holdout_loss: cannot read the job file {args.job}: {exc}", file=sys.stderr)
        return 2
    if not isinstance(job, dict) or job.get("version") != JOB_VERSION:
        print(f"holdout_loss: {args.job} is not a version-{JOB_VERSION} holdout-loss job", file=sys.stderr)
        return 2
    if "OMP_NUM_THREADS" not in os.environ:
        torch.set_num_threads(1)  # the toy's ops are far too small to gain from intra-op threads (as trainer.py)
    try:
        run(job)
    except Exception as exc:  # one line, as the trainer-side script fails
        print(f"holdout_loss: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
