"""A LoRA ready to use: one checkpoint of a run, exported as a folder (``ltx-pipeline export``).

``choice`` picks the checkpoint (a step, the last, or the lowest holdout loss from ``holdout-loss.json``),
``weights`` reads its safetensors header to check the trainer's ComfyUI key layout and keep its metadata,
``card`` renders the model card from the run's records, ``folder`` writes the folder atomically. The
weights are copied as the trainer wrote them, never rewritten. ``driving.export`` gathers the records.
"""

from ltx_pipeline.export.card import CardFacts, Identity, Measured, model_card
from ltx_pipeline.export.choice import Candidate, Chosen, StepSpec, choose, parse_step, read_holdout
from ltx_pipeline.export.config_dump import read_trainer_config
from ltx_pipeline.export.folder import sha256_of, write_folder
from ltx_pipeline.export.weights import WeightsFacts, inspect_weights

__all__ = ["Candidate", "CardFacts", "Chosen", "Identity", "Measured", "StepSpec", "WeightsFacts",
           "choose", "inspect_weights", "model_card", "parse_step", "read_holdout",
           "read_trainer_config", "sha256_of", "write_folder"]
