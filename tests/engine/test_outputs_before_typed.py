"""A store written before phase outputs were typed still loads: every row, as its phase's typed model.

The two databases under tests/fixtures/stores were written by the code before this change (schema
revision 0006, outputs as plain dicts; see SOURCES.md there). Opening one upgrades it in place to
the current schema; each stored row then reads as its phase's ``PhaseOutputs`` through the versioned
reader (``outputs_version`` 0), and values keep their meaning.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from ltx_pipeline.engine.outputs import PhaseOutputs
from ltx_pipeline.store import Store
from ltx_pipeline.store.migrate import current_revision, head_revision

STORES = Path(__file__).resolve().parents[1] / "fixtures" / "stores"


def _output_types() -> dict[str, type[PhaseOutputs]]:
    from phases import PHASES

    return {phase.name: phase.outputs_type for phase in PHASES}


def _open_copy(tmp_path: Path, name: str) -> Store:
    db = tmp_path / "ltx-pipeline.db"
    shutil.copyfile(STORES / name, db)  # the fixture itself stays at revision 0006
    return Store.open(db)


@pytest.mark.parametrize("name", ["demo-before-typed-outputs.db", "autotune-chained-before-typed-outputs.db"])
def test_every_stored_phase_reads_as_its_typed_model(tmp_path: Path, name: str) -> None:
    store = _open_copy(tmp_path, name)
    assert current_revision(store.engine) == head_revision()
    types = _output_types()
    (run,) = store.list_runs()
    rows = store.latest_phase_runs(run.id)
    assert rows, "the fixture has phase rows"
    for phase, row in rows.items():
        assert row.outputs_version == 0  # written before typed outputs: nothing was rewritten
        typed = types[phase].from_stored(row.outputs, row.outputs_version)
        assert isinstance(typed, types[phase])
        # Reading is stable: what the typed model stores reads back as the same model.
        assert types[phase].from_stored(typed.to_stored(), types[phase].SCHEMA_VERSION) == typed
    store.close()


def test_the_demo_store_keeps_its_values(tmp_path: Path) -> None:
    from ltx_pipeline.outputs.plan import PlanOutputs
    from ltx_pipeline.outputs.probe import ProbeOutputs
    from ltx_pipeline.outputs.train import TrainOutputs

    store = _open_copy(tmp_path, "demo-before-typed-outputs.db")
    (run,) = store.list_runs()
    rows = store.latest_phase_runs(run.id)
    plan = PlanOutputs.from_stored(rows["plan"].outputs, 0)
    assert plan.recipe.steps == rows["plan"].outputs["recipe"]["steps"] == 60
    assert plan.plan_hash == rows["plan"].outputs["plan_hash"]
    probe = ProbeOutputs.from_stored(rows["probe"].outputs, 0)
    assert probe.gpu_count == rows["probe"].outputs["gpu_count"]
    train = TrainOutputs.from_stored(rows["train"].outputs, 0)
    assert [s.final_step for s in train.stages] == [60]
    store.close()


def test_old_autotune_outputs_keep_the_per_gpu_batch_under_its_own_name(tmp_path: Path) -> None:
    """Before the change the autotune phase stored the per-GPU batch under ``effective_batch``; read as
    version 0 it is ``per_gpu_batch``, and the effective batch (over all processes) is unknown, not guessed."""
    from ltx_pipeline.outputs.autotune import AutotuneOutputs

    store = _open_copy(tmp_path, "autotune-chained-before-typed-outputs.db")
    (run,) = store.list_runs()
    row = store.latest_phase_runs(run.id)["autotune"]
    autotune = AutotuneOutputs.from_stored(row.outputs, 0)
    assert autotune.per_gpu_batch == row.outputs["effective_batch"]
    assert autotune.effective_batch is None
    store.close()
