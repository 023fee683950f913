"""What the studio reads of a run to decide and to draw: its open gate, its trained steps, its captions.

Read-only helpers over the store (full or reader) and the run's files, shared by the write actions (which
check the page's view is still true) and the live view (which draws it). The open gate is the engine's
(``engine.gates.current_gate``) when its subject is not approved yet. The captions subject is the prepare
phase's: the digest of ``dataset.json`` and ``holdout.jsonl`` as they are on disk (phases/prepare.py).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ltx_pipeline.engine.fingerprint import digest
from ltx_pipeline.engine.gates import current_gate
from ltx_pipeline.errors import BadInput
from ltx_pipeline.outputs.train import TrainedStage, TrainOutputs
from ltx_pipeline.store.rows import saved_id

if TYPE_CHECKING:
    from ltx_pipeline.store import Run, Store
    from ltx_pipeline.store.reader import Record, StoreReader

__all__ = ["OpenGate", "caption_files", "captions_subject", "open_gate", "read_rows", "trained_steps"]


@dataclass(frozen=True)
class OpenGate:
    """The gate a run waits at: ``plan`` or ``captions``, and the subject (hash) an approval must name."""

    kind: str
    subject: str


def open_gate(store: Store | StoreReader, run: Run | Record) -> OpenGate | None:
    """The gate the run waits at, or None (no gate yet, or its subject already approved)."""
    row = current_gate(store, saved_id(run))
    if row is None or not row.approval_subject or row.status != "succeeded":
        return None
    if store.approval_for(saved_id(run), row.approval_subject) is not None:
        return None
    return OpenGate("captions" if row.phase == "prepare" else "plan", row.approval_subject)


def trained_steps(store: Store | StoreReader, run: Run | Record) -> int | None:
    """The step the run's finished training reached (its last stage's), or None while none has finished."""
    train = store.latest_phase_runs(saved_id(run)).get("train")
    if train is None or train.status != "succeeded" or not isinstance(train.outputs, dict):
        return None
    try:
        stages = TrainOutputs.from_stored(train.outputs, train.outputs_version).stages
    except BadInput:
        return None
    last = stages[-1] if stages else None
    return last.run_final_step if isinstance(last, TrainedStage) else None


def caption_files(dataset_folder: Path) -> tuple[Path, Path]:
    """The captions gate's files: the prepared ``dataset.json`` and ``holdout.jsonl``."""
    return dataset_folder / "dataset.json", dataset_folder / "holdout.jsonl"


def captions_subject(dataset_folder: Path) -> str:
    """The subject the prepare phase gives these captions (phases/prepare.py: the same two texts, hashed)."""
    metadata, holdout = caption_files(dataset_folder)
    holdout_text = holdout.read_text(encoding="utf-8") if holdout.exists() else ""
    return digest(metadata.read_text(encoding="utf-8") + "\n--holdout--\n" + holdout_text)


def read_rows(path: Path) -> list[dict[str, Any]]:
    """The rows of a JSON list or a JSONL file ([] when it does not exist)."""
    if not path.exists():
        return []
    text = path.read_text(encoding="utf-8")
    if path.suffix == ".jsonl":
        return [json.loads(line) for line in text.splitlines() if line.strip()]
    rows = json.loads(text)
    return rows if isinstance(rows, list) else []
