"""Probing helpers: what the probe phase learns about the machine, the dataset and the prerequisites.

This package owns the read-only inspection of the world outside the workspace: GPUs through
``nvidia-smi`` (``gpus``, ``gpu_list``), the host (``host``: disk, /dev/shm, RAM, OS, tools, whether W&B
credentials resolve), the dataset path (``dataset``), the model files (``models``, ``model_files``) and the
trainer checkout (``trainer_checkout``). Every result is a frozen dataclass whose ``to_dict()`` is plain JSON
data and never holds a secret; checks also give ``Finding`` rows for the findings table that ``status`` shows.

Nothing here writes files, imports torch, or knows about the store or the engine. LTX rules that
turn findings into decisions (tiers, the VRAM gate, configs) live in ``ltx_pipeline.ltx``.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, is_dataclass
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

FindingStatus = Literal["ok", "missing", "warning"]


@dataclass(frozen=True)
class Finding:
    """One row of the probe's findings table.

    Attributes:
        item: what was checked, e.g. "GPUs" or "LTX-2 trainer checkout".
        status: "ok", "missing" (a prerequisite is absent) or "warning" (usable, but look at it).
        detail: one plain sentence on what was found.
        next_step: the concrete thing to do when the status is not "ok", else None.
    """

    item: str
    status: FindingStatus
    detail: str
    next_step: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """The finding as ``{"item", "status", "detail", "next_step"}``."""
        return asdict(self)


def to_plain(value: Any) -> Any:
    """Turn a (nested) dataclass into plain JSON data: dicts, lists, str, int, float, bool, None."""
    if is_dataclass(value) and not isinstance(value, type):
        value = asdict(value)
    if isinstance(value, dict):
        return {str(key): to_plain(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [to_plain(item) for item in value]
    return value


def plain_record(record: DataclassInstance) -> dict[str, Any]:
    """``to_plain`` of one dataclass instance: always a dict, so typed as one (each ``to_dict()``)."""
    return {str(key): to_plain(item) for key, item in asdict(record).items()}


# The submodules import ``Finding`` from this package, so they are imported after it is defined.
from ltx_pipeline.probing.dataset import (  # noqa: E402
    ClipsReport,
    DatasetInfo,
    MediaColumn,
    MediaFolderInfo,
    MetadataInfo,
    PrecomputedInfo,
    PriorRunInfo,
    RunCheckpoint,
    classify_dataset,
    media_files,
    media_rows,
    read_clips,
)
from ltx_pipeline.probing.gpus import (  # noqa: E402
    NVIDIA_SMI_QUERY,
    Gpu,
    GpuProbe,
    assumed_probe,
    describe_gpus,
    filter_visible,
    parse_assumed_gpu,
    parse_nvidia_smi,
    probe_gpus,
    query_gpus,
)
from ltx_pipeline.probing.host import HostInfo, probe_host, wandb_credentials_resolve  # noqa: E402
from ltx_pipeline.probing.models import (  # noqa: E402
    ModelSearch,
    PathCheck,
    check_model_path,
    default_model_dirs,
    find_model_files,
)
from ltx_pipeline.probing.trainer_checkout import TrainerCheck, check_trainer_root  # noqa: E402

__all__ = [
    "NVIDIA_SMI_QUERY",
    "DatasetInfo",
    "Finding",
    "FindingStatus",
    "Gpu",
    "GpuProbe",
    "ClipsReport",
    "HostInfo",
    "MediaColumn",
    "MediaFolderInfo",
    "MetadataInfo",
    "ModelSearch",
    "PathCheck",
    "PrecomputedInfo",
    "PriorRunInfo",
    "RunCheckpoint",
    "TrainerCheck",
    "assumed_probe",
    "check_model_path",
    "check_trainer_root",
    "classify_dataset",
    "read_clips",
    "default_model_dirs",
    "describe_gpus",
    "filter_visible",
    "find_model_files",
    "media_files",
    "media_rows",
    "parse_assumed_gpu",
    "parse_nvidia_smi",
    "probe_gpus",
    "probe_host",
    "query_gpus",
    "plain_record",
    "to_plain",
    "wandb_credentials_resolve",
]
