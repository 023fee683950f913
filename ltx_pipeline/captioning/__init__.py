"""Captioning the clips of a user's folder before preprocessing: the ``Captioner`` protocol and its factory.

Three captioners share one contract, so the prepare phase treats them alike:

- ``offline`` (``OfflineCaptioner``): measured facts of each clip (duration, size, colours, motion, sound); no
  model, deterministic, always available.
- ``qwen_omni`` and ``gemini_flash`` (``TrainerScriptCaptioner``): the trainer's own ``scripts/caption_videos.py``
  in the user's LTX-2 checkout, run through ``uv``.

``caption(clips, captions_file, workspace=..., on_progress=...)`` captions only the clips without a caption in
``captions_file`` (the real script's JSON: a list of ``{"caption", "media_path"}`` rows, paths relative to the
file's folder, so every clip must lie under it) and returns ``{media_path: caption}`` for every clip given.
Progress is saved with ``workspace.atomic_write`` as captions arrive (offline: after each; the trainer's script:
whenever it saves, every 5), so a run killed at any moment loses at most those unsaved and a second call redoes
no saved one. No caption contains the trigger word (stripped as a whole word, any case, old rows included): the
trainer prepends it at preprocessing. ``settings()`` is what identifies the output (for the phase's fingerprint)
and holds no secret. ``captioner_availability`` says whether one can run here and names the command that would.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

from ltx_pipeline.captioning._captions_file import CaptionBook
from ltx_pipeline.captioning.availability import Availability, captioner_availability
from ltx_pipeline.captioning.offline import OfflineCaptioner, describe_clip
from ltx_pipeline.captioning.trainer_script import DEFAULT_VLLM_URL, TRAINER_CAPTIONERS, TrainerScriptCaptioner
from ltx_pipeline.errors import BadInput

__all__ = ["CAPTIONERS", "DEFAULT_VLLM_URL", "Availability", "CaptionBook", "Captioner", "OfflineCaptioner",
           "TrainerScriptCaptioner", "captioner_availability", "describe_clip", "make_captioner"]

CAPTIONERS = ("offline", *TRAINER_CAPTIONERS)


class Captioner(Protocol):
    """Captions the clips that lack one in a captions file; see the package docstring for the contract."""

    name: str

    def settings(self) -> dict[str, Any]:
        """What identifies its output, for the phase's fingerprint; never a secret."""
        ...

    def caption(self, clips: list[Path], captions_file: Path, *, workspace: Path,
                on_progress: Callable[[int, int], None] | None = None) -> dict[str, str]:
        """Caption the clips without a caption; every clip's caption by its path relative to the file's folder."""
        ...


def make_captioner(name: str, *, trigger: str | None, trainer_root: Path | None, vllm_url: str = DEFAULT_VLLM_URL,
                   uv: str | None = None, python: str | Path | None = None, sound: bool = True) -> Captioner:
    """The captioner called ``name``; ``sound=False`` (a video-only run) keeps the offline captioner's captions
    silent about sound.

    Raises:
        BadInput: an unknown name, or a trainer captioner without an LTX-2 checkout.
    """
    if name == "offline":
        return OfflineCaptioner(trigger, sound=sound)
    if name in TRAINER_CAPTIONERS:
        return TrainerScriptCaptioner(name, trainer_root=trainer_root, trigger=trigger, vllm_url=vllm_url, uv=uv,
                                      python=python)
    raise BadInput(f"Unknown captioner {name!r}", where="captioner", fix=f"choose one of {', '.join(CAPTIONERS)}")
