"""``ConfigPatchOutputs``: each stage's config written from the template, with every recorded patch.

Field names are the keys the config_patch phase stored before outputs were typed; a patch is the
``ltx.config_patch.PatchRecord`` it made (old and new as YAML reads them).
"""

from __future__ import annotations

from typing import ClassVar

from ltx_pipeline.engine.outputs import PhaseOutputs
from ltx_pipeline.ltx.config_patch import PatchRecord
from ltx_pipeline.outputs._records import Record

__all__ = ["ConfigPatchOutputs", "StageConfig"]


class StageConfig(Record):
    """One stage's config: where it is, the template it came from, its patches and diff, its outputs folder."""

    stage: int
    config: str
    template: str
    patches: tuple[PatchRecord, ...] = ()
    diff: str = ""
    output_dir: str | None = None  # absent in an older run's record


class ConfigPatchOutputs(PhaseOutputs):
    """What the config_patch phase stores."""

    PHASE: ClassVar[str] = "config_patch"
    SCHEMA_VERSION: ClassVar[int] = 1

    configs: tuple[StageConfig, ...]
    model_path: str  # the checkpoint every stage trains and preprocesses with
    text_encoder_path: str

    def stage_config(self, stage: int) -> StageConfig:
        """The config of stage ``stage`` (1-based, as stored)."""
        return next(c for c in self.configs if c.stage == stage)
