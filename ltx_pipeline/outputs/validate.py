"""``ValidateOutputs``: every stage's validated config and launch command, and the launch they share.

The process count is the launch's total over every node (what the batch rules count); a multi-node
launch adds rank 0's rendezvous and the command each other node runs.
"""

from __future__ import annotations

from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, JsonValue

from ltx_pipeline.backends.base import Distributed
from ltx_pipeline.engine.outputs import PhaseOutputs
from ltx_pipeline.ltx.launch_plan import LaunchShape

__all__ = ["LaunchRecord", "OtherNode", "PatchRecordOutputs", "ValidateOutputs", "ValidatedStage"]

_FROZEN = ConfigDict(frozen=True, extra="forbid")


class PatchRecordOutputs(BaseModel):
    """One config change as ``ltx.config_patch.PatchRecord.to_dict`` writes it (``stage``/``config`` when a
    patch went into every stage config)."""

    model_config = _FROZEN

    path: str
    old: JsonValue  # a YAML value of the trainer config: any JSON shape
    new: JsonValue
    reason: str
    added: bool = False
    stage: int | None = None
    config: str | None = None

    def to_stored(self) -> dict[str, Any]:
        """The record as stored (``stage``/``config`` only on records that name them)."""
        return self.model_dump(mode="json", exclude={k for k in ("stage", "config") if getattr(self, k) is None})


class LaunchRecord(BaseModel):
    """A launch command as ``backends.base.LaunchSpec.to_record`` stores it (env redacted)."""

    model_config = _FROZEN

    argv: list[str]
    cwd: str
    env: dict[str, str]
    printable: str


class ValidatedStage(BaseModel):
    model_config = _FROZEN

    stage: int
    config: str
    launch: LaunchRecord
    checks: list[str]
    strict_data_root: bool
    validator: str = "?"  # runs validated before it was recorded say "?"
    config_sha256: str | None = None


class OtherNode(BaseModel):
    model_config = _FROZEN

    rank: int
    command: str


# The multi-node keys: stored only for a launch over several nodes (readers take "absent" as one node).
_NODE_KEYS = ("nodes", "processes_per_node", "main_ip", "main_port", "other_nodes")


class ValidateOutputs(PhaseOutputs):
    """What validate proved and built: nothing is launched here."""

    PHASE: ClassVar[str] = "validate"
    SCHEMA_VERSION: ClassVar[int] = 1

    stages: list[ValidatedStage]
    patches: list[PatchRecordOutputs]
    num_processes: int  # over every node: what the batch rules and the effective batch count
    distributed: Distributed
    launch: str  # the launch shape in words (``ltx.launch_plan.LaunchShape.words``)
    nodes: int | None = None  # None: one node
    processes_per_node: int | None = None
    main_ip: str | None = None
    main_port: int | None = None
    other_nodes: list[OtherNode] | None = None

    @classmethod
    def upgrade(cls, data: dict[str, Any], version: int) -> dict[str, Any]:
        """Untyped outputs of releases before the launch was planned lack its words: said from what they stored
        (the upgrade test from 30fca33 found a live run that could not resume on them)."""
        if version == 0 and "launch" not in data and isinstance(data.get("num_processes"), int):
            shape = LaunchShape(processes=data["num_processes"], distributed=data.get("distributed") or "none",
                                reason="as validated by an earlier ltx-pipeline")
            data = {**data, "launch": shape.words(), "distributed": shape.distributed}
        return data

    @property
    def node_count(self) -> int:
        return self.nodes or 1

    @property
    def per_node(self) -> int:
        """Processes this machine (rank 0) launches."""
        return self.processes_per_node or self.num_processes

    def to_stored(self) -> dict[str, Any]:
        data = self.model_dump(mode="json")
        data["patches"] = [p.to_stored() for p in self.patches]
        return data if self.nodes is not None else {k: v for k, v in data.items() if k not in _NODE_KEYS}
