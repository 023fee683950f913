"""``PlanOutputs``: the plan the user approves: the recipe, the launch, the data preparation, autotune and sound.

Field names are the keys the plan phase stored before outputs were typed. The ``ltx`` dataclasses
(``Recipe``, ``PreparationPlan``, ``AudioPlan``, ``LaunchShape``) are reused as they are: pydantic
stores them as their ``to_dict`` did. ``launch`` is new in schema version 1: the launch shape is
computed once, here; a plan stored before (version 0) has none, and its readers derive it as the plan did.
"""

from __future__ import annotations

from typing import Any, ClassVar

from pydantic import SerializerFunctionWrapHandler, model_serializer

from ltx_pipeline.engine.outputs import PhaseOutputs
from ltx_pipeline.ltx.audio_choice import AudioPlan
from ltx_pipeline.ltx.launch_plan import LaunchShape
from ltx_pipeline.ltx.preparation import PreparationPlan
from ltx_pipeline.ltx.recipe import Recipe
from ltx_pipeline.ltx.validation_sources import ValidationSources
from ltx_pipeline.outputs._records import Record, drop_absent

__all__ = ["PlanOutputs", "PlannedAutotune"]


class PlannedAutotune(Record):
    """Whether autotune runs (``ltx.autotune.availability.AutotunePlan.to_dict``)."""

    runs: bool
    reason: str = ""
    blocker: str | None = None  # why it cannot run here, with the next step (an approval blocker)


class PlanOutputs(PhaseOutputs):
    """What the plan phase stores (plan.md itself is the approval subject)."""

    PHASE: ClassVar[str] = "plan"
    SCHEMA_VERSION: ClassVar[int] = 1

    plan_file: str
    plan_hash: str
    recipe: Recipe
    warnings: tuple[str, ...] = ()
    missing: tuple[str, ...] = ()  # the findings' items that are not ok
    blockers: tuple[str, ...] = ()
    preparation: PreparationPlan | None = None  # None in a plan made before the prepare phase existed
    autotune: PlannedAutotune | None = None  # None in a plan made before autotune could be turned off
    audio: AudioPlan | None = None  # None in a plan made before the audio choice
    launch: LaunchShape | None = None  # None in a plan stored at schema version 0
    # The rows the validation samples' conditions come from; None in a plan made before they were chosen.
    validation: ValidationSources | None = None

    @classmethod
    def upgrade(cls, data: dict[str, Any], version: int) -> dict[str, Any]:
        """Version 0: an older preparation split its ``long_videos`` by length (now ``split_videos``)."""
        preparation = data.get("preparation")
        if version < 1 and isinstance(preparation, dict) and "long_videos" in preparation:
            preparation = dict(preparation)
            videos = preparation.pop("long_videos")
            preparation.setdefault("split_videos", videos)
            data = {**data, "preparation": preparation}
        return data

    @model_serializer(mode="wrap")
    def _stored(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        # A part an older plan never had stays absent, so its row round-trips to the same JSON.
        return drop_absent(handler(self), ("preparation", "autotune", "audio", "launch", "validation"))

    @property
    def autotune_runs(self) -> bool:
        """Whether the autotune phase runs trials (a plan from before the choice: it always did)."""
        return self.autotune is None or self.autotune.runs

    @property
    def video_only(self) -> bool:
        """Whether the plan's audio choice trains video only (no audio latents, no audio gate)."""
        return self.audio is not None and self.audio.video_only
