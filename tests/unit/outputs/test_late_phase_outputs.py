"""Typed outputs of validate, autotune, train, monitor and evaluate: old rows load, fresh ones store as before.

``rows_v0/late_phases.json`` holds the rows the untyped phases stored (schema version 0), dumped from the
two stores under tests/fixtures/stores (written by the code before this change: the demo through every
phase, and a chained simulated run through autotune). Each loads as its model and round-trips. Shapes the
fixtures do not hold (autotune off, a detached stage, a skipped or detached evaluation, a multi-node
validate) are built as the old producer code built them. The one renamed meaning: version 0 autotune
stored the per-GPU batch under ``effective_batch``.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from ltx_pipeline.engine.outputs import PhaseOutputs
from ltx_pipeline.errors import BadInput
from ltx_pipeline.outputs.autotune import AutotuneOutputs
from ltx_pipeline.outputs.evaluate import EvaluateOutputs
from ltx_pipeline.outputs.monitor import MonitorOutputs
from ltx_pipeline.outputs.train import PendingStage, TrainedStage, TrainOutputs
from ltx_pipeline.outputs.validate import ValidateOutputs

ROWS: dict[str, dict[str, dict[str, Any]]] = json.loads(
    (Path(__file__).parent / "rows_v0" / "late_phases.json").read_text(encoding="utf-8"))
MODELS: dict[str, type[PhaseOutputs]] = {"validate": ValidateOutputs, "autotune": AutotuneOutputs,
                                         "train": TrainOutputs, "monitor": MonitorOutputs,
                                         "evaluate": EvaluateOutputs}
KNOBS = {"quantization": "int8-quanto", "optimizer_type": "adamw8bit", "batch_size": 1,
         "enable_gradient_checkpointing": True, "gradient_accumulation_steps": 4}


def _same_meaning(phase: str, stored: dict[str, Any]) -> dict[str, Any]:
    """What the current model stores for a version-0 row: the same JSON, autotune's batch under its own name."""
    if phase != "autotune" or "effective_batch" not in stored:
        return stored
    return {**stored, "per_gpu_batch": stored["effective_batch"], "processes": None, "effective_batch": None}


@pytest.mark.parametrize(("run", "phase"), [(run, phase) for run, rows in sorted(ROWS.items()) for phase in rows])
def test_a_version_0_row_loads_and_stores_back_as_the_same_json(run: str, phase: str) -> None:
    stored = ROWS[run][phase]
    model = MODELS[phase]
    typed = model.from_stored(copy.deepcopy(stored), 0)
    assert model.PHASE == phase
    assert typed.to_stored() == _same_meaning(phase, stored)
    assert json.loads(json.dumps(typed.to_stored())) == typed.to_stored()  # plain JSON
    assert model.from_stored(typed.to_stored(), model.SCHEMA_VERSION) == typed


def test_version_0_autotune_keeps_its_per_gpu_batch_under_its_own_name() -> None:
    """The old ``effective_batch`` was batch x accumulation on one process; the process count was not stored."""
    old = {**ROWS["autotune_chained"]["autotune"], "effective_batch": 4}
    typed = AutotuneOutputs.from_stored(old, 0)
    assert typed.per_gpu_batch == 4
    assert typed.processes is None and typed.effective_batch is None  # unknown, never guessed


def test_fresh_autotune_outputs_store_the_effective_batch_over_every_process() -> None:
    data = {**ROWS["autotune_chained"]["autotune"], "per_gpu_batch": 4, "processes": 2, "effective_batch": 8}
    typed = AutotuneOutputs.from_stored(data, AutotuneOutputs.SCHEMA_VERSION)
    assert (typed.per_gpu_batch, typed.processes, typed.effective_batch) == (4, 2, 8)
    assert typed.to_stored() == data
    with pytest.raises(BadInput, match="effective_batch 4 is not per_gpu_batch 4 x processes 2"):
        AutotuneOutputs.from_stored({**data, "effective_batch": 4}, AutotuneOutputs.SCHEMA_VERSION)


def test_a_sweep_with_trials_side_by_side_stores_their_spans_and_reads_them_back() -> None:
    side = {"slots": [[0], [1]], "most_at_once": 2, "shared": [], "wall_seconds": 9.0, "gpu_seconds": 13.0,
            "settled_gpu_seconds": 0.0, "trials": [
                {"number": 1, "gpus": [0], "start_s": 0.0, "end_s": 5.0, "settled": False},
                {"number": 2, "gpus": [1], "start_s": 5.0, "end_s": 9.0, "settled": False},
                {"number": 3, "gpus": [0], "start_s": 5.0, "end_s": 9.0, "settled": False}]}
    data = {**ROWS["autotune_chained"]["autotune"], "per_gpu_batch": 4, "processes": 2, "effective_batch": 8,
            "side_by_side": side}
    typed = AutotuneOutputs.from_stored(data, AutotuneOutputs.SCHEMA_VERSION)
    assert typed.side_by_side is not None and typed.side_by_side.most_at_once == 2
    assert typed.to_stored() == data


def test_autotune_off_stores_what_it_decided_and_nothing_of_a_sweep() -> None:
    # As phases/autotune.py ``_off`` stored it before outputs were typed.
    old = {"off": "by your choice (--autotune off / autotune: off in run.yaml)", "baseline": KNOBS, "deltas": {},
           "patches": [], "reports": {"log": "/ws/r1/autotune.log", "markdown": "/ws/r1/autotune.md"}}
    typed = AutotuneOutputs.from_stored(old, 0)
    assert typed.off and typed.trials == [] and typed.objective is None and typed.predicted_peak_gb is None
    assert typed.to_stored() == old


def test_autotune_trials_keep_host_and_prior_marks_only_where_they_were_made() -> None:
    stored = ROWS["autotune_chained"]["autotune"]
    trials = [{**stored["trials"][0], "host": "host-b"},
              {**stored["trials"][1], "number": "prior r0-autotune#2", "state": "prior",
               "from_prior": "r0-autotune trial 2", "log": None}]
    prior = {"study": "r0-autotune", "used": True, "results": 1, "why": "its baseline agrees with this one"}
    data = {**stored, "trials": trials, "prior": prior}
    typed = AutotuneOutputs.from_stored(data, 0)
    assert typed.trials[0].host == "host-b" and typed.trials[1].from_prior == "r0-autotune trial 2"
    assert typed.to_stored()["trials"] == trials and typed.to_stored()["prior"] == prior
    ignored = {"study": "r0-autotune", "used": False, "why": "a baseline step time was not measured"}
    assert AutotuneOutputs.from_stored({**stored, "prior": ignored}, 0).to_stored()["prior"] == ignored


def test_a_detached_stage_loads_as_pending_and_a_trained_one_as_trained() -> None:
    trained = ROWS["demo"]["train"]["stages"][0]
    # As phases/train.py ``_pending`` stored it: ``slurm_job`` only for a SLURM launch.
    pending = {"stage": 2, "pending": True, "pid": 4242, "log": "/ws/r1/logs/train.stage-2.log",
               "launch": "python scripts/train.py config.stage-2.yaml", "output_dir": "/ws/r1/outputs/stage-2"}
    for detached in (pending, {**pending, "slurm_job": 77}):
        old = {"stages": [trained, detached], "stage_count": 2}
        typed = TrainOutputs.from_stored(old, 0)
        assert isinstance(typed.stages[0], TrainedStage) and isinstance(typed.last, PendingStage)
        assert [s.stage for s in typed.trained] == [1]
        assert typed.to_stored() == old


def test_a_continued_stage_says_the_run_step_it_reached() -> None:
    stage = {**ROWS["demo"]["train"]["stages"][0], "start_step": 60, "final_step": 40}
    typed = TrainOutputs.from_stored({"stages": [stage], "stage_count": 1}, 0)
    assert typed.trained[0].run_final_step == 100


@pytest.mark.parametrize("old", [{"skipped": True, "reason": "--skip-eval (skip_eval: true in run.yaml)"},
                                 {"pending": True}])
def test_a_skipped_or_detached_evaluation_stores_as_before(old: dict[str, Any]) -> None:
    typed = EvaluateOutputs.from_stored(old, 0)
    assert typed.renders == [] and typed.to_stored() == old


def test_a_multi_node_validate_keeps_its_rendezvous_and_one_node_stores_none() -> None:
    one = ROWS["demo"]["validate"]
    assert not {"nodes", "main_ip", "other_nodes"} & set(ValidateOutputs.from_stored(one, 0).to_stored())
    # As phases/validate.py stored a launch over two nodes of two processes each.
    two = {**one, "num_processes": 4, "nodes": 2, "processes_per_node": 2, "main_ip": "10.0.0.1",
           "main_port": 29500, "other_nodes": [{"rank": 1, "command": "ltx-pipeline node-launch --rank 1"}]}
    typed = ValidateOutputs.from_stored(two, 0)
    assert (typed.node_count, typed.per_node, typed.num_processes) == (2, 2, 4)
    assert typed.to_stored() == two
    assert ValidateOutputs.from_stored(one, 0).per_node == one["num_processes"]


def test_the_outputs_are_frozen_and_refuse_unknown_keys() -> None:
    train = TrainOutputs.from_stored(ROWS["demo"]["train"], 0)
    with pytest.raises(ValidationError):
        train.stage_count = 3  # type: ignore[misc]
    with pytest.raises(BadInput, match="monitor outputs"):
        MonitorOutputs.from_stored({**ROWS["demo"]["monitor"], "surprise": 1}, 0)
    with pytest.raises(BadInput, match="schema version 2"):
        AutotuneOutputs.from_stored(ROWS["demo"]["autotune"], 2)
