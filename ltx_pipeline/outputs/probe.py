"""``ProbeOutputs``: what the probe phase found about this machine, the dataset and the prerequisites.

Field names are the keys the probe stored before outputs were typed, so a version-0 row loads as
it is. The probing dataclasses (``GpuProbe``, ``HostInfo``, ``DatasetInfo``, ``Finding``, the model
checks) are reused as they are: pydantic stores them exactly as ``to_plain`` did.
"""

from __future__ import annotations

from typing import Any, ClassVar, Literal

from pydantic import field_validator

from ltx_pipeline.engine.outputs import PhaseOutputs
from ltx_pipeline.outputs._records import Record
from ltx_pipeline.probing import DatasetInfo, Finding, GpuProbe, HostInfo
from ltx_pipeline.probing.models import ModelSearch, PathCheck
from ltx_pipeline.probing.trainer_python import TrainerPythonCheck

__all__ = ["ClipFacts", "ClipFrames", "ClipSpread", "ModelFiles", "ProbeOutputs", "ProbedModels", "TierChoice",
           "TrainerRecord", "UnreadableClip"]


class TierChoice(Record):
    """The VRAM tier chosen from the GPUs' memory (``ltx.tiers``)."""

    key: str
    name: str
    base: Literal["standard", "low_vram"]
    nominal_gb: int
    accepted_risk: bool = False  # below the minimum, continued with --accept-risk


class ClipFacts(Record):
    """One readable clip as PyAV measured it (or the workspace's cache remembered it)."""

    kind: Literal["video", "image", "audio"]
    frames: int | None = None
    frames_source: Literal["container", "decoded", "image", "none"] | None = None
    fps: float | None = None
    width: int | None = None
    height: int | None = None
    duration_s: float | None = None
    has_audio: bool = False
    audio_sample_rate: int | None = None


class UnreadableClip(Record):
    """A clip that could not be read: its metadata row (None for a folder) and why."""

    row: int | None
    reason: str


class ClipSpread(Record):
    """Distinct frame rates and sizes with their clip counts, and how many clips have sound."""

    fps: dict[float, int]
    sizes: dict[str, int]
    with_audio: int
    clips: int


class ClipFrames(Record):
    """Every clip's facts (``probing.ClipsReport.to_dict``); nothing given (``{}``) when there are no clips."""

    counts: dict[str, int | None] = {}  # clip -> frames (None where unreadable)
    min_frames: int | None = None
    facts: dict[str, ClipFacts] = {}
    unreadable: dict[str, UnreadableClip] = {}
    spread: ClipSpread | None = None

    def frame_counts(self) -> dict[str, int | None]:
        """clip -> frames, the shape the bucket checks take."""
        return dict(self.counts)

    def facts_plain(self) -> dict[str, dict[str, Any]]:
        """The facts as plain dicts, for the ``ltx`` rules that take them (audio choice, spreads, scene scan)."""
        return {path: facts.model_dump(mode="json") for path, facts in self.facts.items()}


class ModelFiles(Record):
    """The model files chosen to train with (a path only where it passed the content checks)."""

    checkpoint: str | None = None
    text_encoder: str | None = None
    searched: tuple[str, ...] = ()  # the folders, as messages label them


class ProbedModels(Record):
    """The model search, the check of each model path, and the files chosen (the ``ltx`` backend only)."""

    search: ModelSearch
    checkpoint: PathCheck
    text_encoder: PathCheck
    checkpoint_path: str | None  # the values later phases use (given or found)
    text_encoder_path: str | None
    files: ModelFiles | None = None


class TrainerRecord(Record):
    """The LTX-2 trainer checkout (``probing.trainer_checkout.TrainerCheck``'s fields) and ``--trainer-python``'s
    check."""

    root: str | None
    source: str | None
    exists: bool
    configs: tuple[str, ...]
    has_train_script: bool
    has_process_dataset_script: bool
    has_uv_lock: bool
    has_venv: bool
    writable: bool
    git_commit: str | None
    python: TrainerPythonCheck | None = None  # given only with --trainer-python


class ProbeOutputs(PhaseOutputs):
    """What the probe phase stores."""

    PHASE: ClassVar[str] = "probe"
    SCHEMA_VERSION: ClassVar[int] = 1

    gpus: GpuProbe
    gpu_count: int
    gpu_summary: str  # plan.md's Hardware line, e.g. "1 × NVIDIA H100 80GB HBM3 (81559 MiB)"
    assumed_gpu: bool = False
    tier: TierChoice
    host: HostInfo
    dataset: DatasetInfo
    clip_frames: ClipFrames = ClipFrames()
    models: ProbedModels | None = None  # None unless the backend is ltx
    trainer: TrainerRecord | None = None  # None unless the backend is ltx
    findings: tuple[Finding, ...] = ()

    @field_validator("clip_frames", mode="before")
    @classmethod
    def _no_clips(cls, value: Any) -> Any:
        return ClipFrames() if value is None else value

    @classmethod
    def upgrade(cls, data: dict[str, Any], version: int) -> dict[str, Any]:
        """Untyped probes (version 0) of earlier releases, as the upgrade test found them: ffprobe's path (media is
        read with PyAV now) dropped; a model search without its folders' labels labelled by the folders."""
        if version == 0 and isinstance(data.get("host"), dict):
            data = {**data, "host": {k: v for k, v in data["host"].items() if k != "ffprobe_path"}}
        # Before the folders' labels (754381c): the folders themselves are how messages named them.
        search = (data.get("models") or {}).get("search") if isinstance(data.get("models"), dict) else None
        if version == 0 and isinstance(search, dict) and "labels" not in search:
            data = {**data, "models": {**data["models"], "search": {**search, "labels": search.get("searched", [])}}}
        return data

    def finding(self, item: str) -> Finding | None:
        """The findings row for ``item`` (e.g. ``"Captioner"``), or None."""
        return next((f for f in self.findings if f.item == item), None)
