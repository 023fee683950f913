"""Which phase the trainer was in when it failed: its own log lines first, traceback frames second.

The markers are the lines ``ltx-trainer`` itself logs (``trainer.py``, ``validation_runner.py``,
``model_loader.py``), in the order a run meets them: ``ValidationRunner`` caches the validation prompt
embeddings (``Pre-computing embeddings for N validation prompts...``) before the transformer loads,
then models load, ``train()`` logs ``Starting training...``, runs the step-0 validation, the loop logs
``Step`` lines, validation passes and checkpoints. The last marker before the failure decides.

A *strong* marker names a phase that logs nothing else before it ends (embedding caching, a
validation pass begun by ``Offloading optimizer state``): it stands. A *weak* marker only says where
the run was last heard from: a validation pass or a checkpoint inside the training loop logs no INFO
line of its own, so traceback frames (the second witness) refine it, and stand alone when no marker
was logged at all. Pure standard library.
"""

from __future__ import annotations

import re
from typing import NamedTuple

__all__ = ["PhaseFinding", "failure_start", "find_phase", "frame_phase"]


class PhaseFinding(NamedTuple):
    """The phase (None: unknown) and the line that says so (a marker or a frame)."""

    phase: str | None
    witness: str | None


_WEAK, _STRONG = False, True
# (pattern, phase, strong); "initial_validation" is decided by the caller's initial_validation flag.
_MARKERS: tuple[tuple[re.Pattern[str], str, bool], ...] = (
    (re.compile(r"Loading text encoder for validation embedding caching|Loading embeddings processor for "
                r"validation embedding caching|Pre-computing embeddings for \d+ validation prompts|Pre-encoding "
                r"conditioning media for|VAE encoder for validation media encoding|"
                r"Processing captions in [\d,]+ batches"),
     "embedding_precomputation", _STRONG),
    (re.compile(r"Offloading optimizer state to CPU|Loading video VAE decoder for validation|Loading audio decoder "
                r"and vocoder for validation"), "validation_sampling", _STRONG),
    (re.compile(r"Loading LTX-2 model from|Loading transformer\.\.\.|Loading embeddings processor\.\.\.|Quantizing "
                r"model with|Adding LoRA adapter|Loading checkpoint from|checkpoint loaded successfully|Validation "
                r"prompt embeddings cached|Validation conditioning media cached|Trainable params count|GPU memory "
                r"usage after models preparation|Loading Gemma text encoder|Loading video VAE (?:en|de)coder\.\.\.|"
                r"Initializing LoRA weights"), "model_loading", _WEAK),
    (re.compile(r"Saving checkpoint metadata|weights for step \d+ saved in|Removed old checkpoint:"),
     "checkpoint_saving", _WEAK),
    (re.compile(r"Starting training\.\.\.|Resuming training from step"), "initial_validation", _WEAK),
    (re.compile(r"Step \d+/\d+ - Loss|Validation samples for step \d+ saved|Training state saved to"),
     "training", _WEAK),
)

_FRAMES: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"_cache_prompt_embeddings|_load_text_encoder_and_cache_embeddings|load_text_encoder|"
                r"_encode_conditioning_media|_encode_sample_conditions"), "embedding_precomputation"),
    (re.compile(r"validation_runner\.py|validation_sampler\.py|_run_distributed_validation|_sample_videos|"
                r"run_validation"), "validation_sampling"),
    (re.compile(r"_training_step|in backward|clip_grad_norm_|torch/autograd/|compute_loss"), "training"),
    (re.compile(r"in _save_checkpoint|in _save_training_state|in get_state_dict"), "checkpoint_saving"),
    (re.compile(r"in _load_models|in load_transformer|model_loader\.py|in _load_checkpoint|"
                r"in _prepare_models_for_training|in quantize_model"), "model_loading"),
)
_TRACEBACK = "Traceback (most recent call last)"


def failure_start(lines: list[str]) -> int:
    """Index of the first traceback of the failure (len(lines) when there is none)."""
    return next((i for i, line in enumerate(lines) if line.lstrip().startswith(_TRACEBACK)), len(lines))


def frame_phase(lines: list[str]) -> PhaseFinding:
    """The phase the traceback frames name (the most specific first): ``File "..."`` lines and the source
    line under each (``output = self._training_step(batch)`` names the step its frame line does not)."""
    frames = [line.strip() for line in lines if line[:1].isspace() and line.strip()]
    for pattern, phase in _FRAMES:
        hit = next((frame for frame in frames if pattern.search(frame)), None)
        if hit:
            return PhaseFinding(phase, hit)
    return PhaseFinding(None, None)


def find_phase(lines: list[str], *, initial_validation: bool | None = None) -> PhaseFinding:
    """The phase at the failure: the last marker before it, refined by frames when the marker is weak.

    Args:
        lines: the log lines, launcher prefixes already stripped.
        initial_validation: whether a step-0 validation runs right after ``Starting training...``
            (None: the trainer default, yes).
    """
    start = failure_start(lines)
    marker: tuple[str, str, bool] | None = None
    for line in lines[:start]:
        for pattern, phase, strong in _MARKERS:
            if pattern.search(line):
                if phase == "initial_validation":
                    phase = "validation_sampling" if initial_validation is not False else "training"
                marker = (phase, _clean(line), strong)
                break
    if marker and marker[2]:
        return PhaseFinding(marker[0], marker[1])
    frames = frame_phase(lines[start:] if start < len(lines) else lines)
    if frames.phase:
        return frames
    return PhaseFinding(marker[0], marker[1]) if marker else PhaseFinding(None, None)


_RICH_LEVEL_RE = re.compile(r"^(?:DEBUG|INFO|WARNING|ERROR|CRITICAL) +")
_RICH_LOCATION_RE = re.compile(r" +[\w.\-]+\.py:\d+\s*$")


def _clean(line: str) -> str:
    return _RICH_LOCATION_RE.sub("", _RICH_LEVEL_RE.sub("", line.strip())).strip()
