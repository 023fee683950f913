"""``status`` reads a few stored fields without pydantic: each reader agrees with the typed model.

Checked on the stores written before typed outputs (tests/fixtures/stores, version 0) and on the same
outputs as this version stores them (each model's ``to_stored``), so a renamed model field breaks here,
not silently in ``status``.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from ltx_pipeline.outputs.autotune import AutotuneOutputs
from ltx_pipeline.outputs.config_patch import ConfigPatchOutputs
from ltx_pipeline.outputs.plan import PlanOutputs
from ltx_pipeline.outputs.probe import ProbeOutputs
from ltx_pipeline.outputs.train import TrainedStage, TrainOutputs
from ltx_pipeline.status import stored
from ltx_pipeline.store import Store

STORES = Path(__file__).resolve().parents[1] / "fixtures" / "stores"


@dataclass
class Row:
    status: str
    outputs: dict[str, Any]
    outputs_version: int = 1


def _rows(tmp_path: Path, name: str) -> dict[str, Any]:
    db = tmp_path / "ltx-pipeline.db"
    shutil.copyfile(STORES / name, db)
    store = Store.open(db)
    (run,) = store.list_runs()
    rows = store.latest_phase_runs(run.id)
    store.close()
    return rows


@pytest.fixture(params=["stored before typed outputs", "stored by this version"])
def demo_rows(request: pytest.FixtureRequest, tmp_path: Path) -> dict[str, Any]:
    rows = _rows(tmp_path, "demo-before-typed-outputs.db")
    if request.param == "stored by this version":
        kinds = {"probe": ProbeOutputs, "plan": PlanOutputs, "config_patch": ConfigPatchOutputs,
                 "train": TrainOutputs, "autotune": AutotuneOutputs}
        rows = {phase: Row(row.status, kinds[phase].from_stored(row.outputs, 0).to_stored()) if phase in kinds
                else row for phase, row in rows.items()}
    return rows


def test_each_reader_agrees_with_the_typed_model(demo_rows: dict[str, Any]) -> None:
    def typed(phase: str, kind: Any) -> Any:
        row = demo_rows[phase]
        return kind.from_stored(row.outputs, row.outputs_version)

    probe = typed("probe", ProbeOutputs)
    assert stored.probe_findings(demo_rows["probe"]) == probe.to_stored()["findings"]
    assert [f["item"] for f in stored.probe_findings(demo_rows["probe"])] == [f.item for f in probe.findings]
    assert stored.planned_steps(demo_rows["plan"]) == typed("plan", PlanOutputs).recipe.steps == 60
    configs = typed("config_patch", ConfigPatchOutputs).configs
    assert stored.stage_output_dirs(demo_rows["config_patch"]) == {c.stage: c.output_dir for c in configs}
    assert stored.stage_count(demo_rows["config_patch"]) == len(configs) == 1
    trained = [s for s in typed("train", TrainOutputs).stages if isinstance(s, TrainedStage)]
    assert stored.stage_finished(demo_rows["train"], 1) is bool(trained[0].final_checkpoint) is True
    assert stored.stage_finished(demo_rows["train"], 2) is False
    autotune = typed("autotune", AutotuneOutputs)
    sweep = stored.autotune_sweep(demo_rows["autotune"])
    assert sweep is not None and len(autotune.trials) > 0
    assert sweep["study"] == autotune.study and sweep["winner"] == autotune.winner
    assert sweep["trials"] == [t.model_dump(mode="json", include=set(stored.TRIAL_FIELDS)) | {
        k: None for k in stored.TRIAL_FIELDS if k not in t.model_dump(mode="json")} for t in autotune.trials]


def test_a_row_without_a_result_reads_as_nothing() -> None:
    failed = Row("failed", {})
    assert stored.probe_findings(failed) == [] and stored.planned_steps(failed) is None
    assert stored.stage_output_dirs(None) == {} and stored.autotune_sweep(failed) is None
    assert stored.stage_finished(Row("detached", {"stages": [{"stage": 1, "pending": True}]}), 1) is False
