"""Typed outputs of probe, plan, prepare, data_check and config_patch: old rows load and round-trip.

``rows_v0/*.json`` are rows the untyped phases stored (schema version 0), dumped from real runs (a
reference run on a folder of clips through prepare, and an ltx run on metadata through validate), with
the temporary paths shortened. Each must load as its model, store back as the same JSON, and load again
as an equal model; the models are frozen. Older shapes (keys added later, renamed keys) load too.
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
from ltx_pipeline.ltx.launch_plan import launch_shape
from ltx_pipeline.ltx.recipe import Recipe
from ltx_pipeline.outputs.config_patch import ConfigPatchOutputs
from ltx_pipeline.outputs.data_check import DataCheckOutputs
from ltx_pipeline.outputs.plan import PlanOutputs
from ltx_pipeline.outputs.prepare import PrepareOutputs
from ltx_pipeline.outputs.probe import ClipFrames, ProbeOutputs

ROWS = Path(__file__).parent / "rows_v0"
MODELS: dict[str, type[PhaseOutputs]] = {"probe": ProbeOutputs, "plan": PlanOutputs, "prepare": PrepareOutputs,
                                         "data_check": DataCheckOutputs, "config_patch": ConfigPatchOutputs}


def _rows(run: str) -> dict[str, dict[str, Any]]:
    rows: dict[str, dict[str, Any]] = json.loads((ROWS / f"{run}.json").read_text(encoding="utf-8"))
    return rows


@pytest.mark.parametrize("run", ["reference_clips_folder", "ltx_metadata"])
@pytest.mark.parametrize("phase", sorted(MODELS))
def test_a_version_0_row_loads_and_stores_back_as_the_same_json(run: str, phase: str) -> None:
    stored = _rows(run)[phase]
    model = MODELS[phase]
    typed = model.from_stored(copy.deepcopy(stored), 0)
    assert model.PHASE == phase
    assert typed.to_stored() == stored
    assert json.loads(json.dumps(typed.to_stored())) == stored  # plain JSON, nothing Python-only
    assert model.from_stored(typed.to_stored(), model.SCHEMA_VERSION) == typed


def test_the_outputs_are_frozen_and_refuse_unknown_keys() -> None:
    plan = PlanOutputs.from_stored(_rows("ltx_metadata")["plan"], 0)
    with pytest.raises(ValidationError):
        plan.plan_hash = "sha256:other"  # type: ignore[misc]
    with pytest.raises(BadInput, match="plan outputs"):
        PlanOutputs.from_stored({**_rows("ltx_metadata")["plan"], "surprise": 1}, 0)
    with pytest.raises(BadInput, match="schema version 9"):
        PlanOutputs.from_stored(_rows("ltx_metadata")["plan"], 9)


def test_typed_fields_read_what_the_dict_keys_held() -> None:
    rows = _rows("ltx_metadata")
    probe = ProbeOutputs.from_stored(rows["probe"], 0)
    assert probe.gpus.gpus[0].name == "NVIDIA H100 80GB HBM3" and probe.tier.base == "standard"
    assert probe.models is not None and probe.models.checkpoint_path == rows["probe"]["models"]["checkpoint_path"]
    assert probe.clip_frames.facts[next(iter(rows["probe"]["clip_frames"]["facts"]))].frames == 121
    assert probe.finding("Dataset") is not None
    plan = PlanOutputs.from_stored(rows["plan"], 0)
    assert isinstance(plan.recipe, Recipe) and plan.recipe.stages[0].buckets == ("64x64x17",)
    assert plan.launch is None and not plan.autotune_runs and not plan.video_only
    data = DataCheckOutputs.from_stored(rows["data_check"], 0)
    assert data.stage(1).source == "preprocess" and data.model_files is not None
    assert data.model_files.text_encoder.kind == "folder"
    assert data.model_files.plain() == rows["data_check"]["model_files"]
    patch = ConfigPatchOutputs.from_stored(rows["config_patch"], 0)
    assert patch.stage_config(1).patches[0].path == "model.model_path"
    assert PrepareOutputs.from_stored(rows["prepare"], 0).prepared is False


def test_a_fresh_plan_stores_its_launch_and_loads_it_back() -> None:
    stored = _rows("reference_clips_folder")["plan"]
    launch = launch_shape(backend="ltx", gpu_count=4, requested=None, training_mode="lora", nodes=2)
    fresh = PlanOutputs.from_stored(stored, 0).model_copy(update={"launch": launch})
    assert fresh.to_stored() == {**stored, "launch": {"processes": 4, "distributed": "ddp", "reason": launch.reason,
                                                       "nodes": 2}}
    again = PlanOutputs.from_stored(fresh.to_stored(), 1)
    assert again.launch == launch and again.launch is not None and again.launch.total == 8


def test_older_shapes_load() -> None:
    rows = _rows("reference_clips_folder")
    plan = copy.deepcopy(rows["plan"])
    plan["preparation"]["long_videos"] = plan["preparation"].pop("split_videos") + ["/clips/long.mp4"]
    for key in ("autotune", "audio"):
        plan.pop(key, None)
    old_plan = PlanOutputs.from_stored(plan, 0)
    assert old_plan.preparation is not None and old_plan.preparation.split_videos == ("/clips/long.mp4",)
    assert old_plan.autotune_runs and old_plan.audio is None
    assert "autotune" not in old_plan.to_stored() and "launch" not in old_plan.to_stored()

    probe = copy.deepcopy(rows["probe"])
    probe["clip_frames"] = {}  # no clips read (a metadata file of images, a .precomputed folder)
    probe.pop("assumed_gpu")
    old_probe = ProbeOutputs.from_stored(probe, 0)
    assert old_probe.clip_frames == ClipFrames() and old_probe.clip_frames.facts == {}
    assert old_probe.to_stored()["clip_frames"] == {} and old_probe.assumed_gpu is False

    data = copy.deepcopy(rows["data_check"])
    for key in ("model_files", "conditions_pairing"):
        data.pop(key)
    data["stages"][0].pop("data_identity")
    data["left_out_silent"], data["agreed_skips"] = ["/clips/silent.mp4"], 1
    old_data = DataCheckOutputs.from_stored(data, 0)
    assert old_data.conditions_pairing is None and old_data.stages[0].data_identity is None
    assert old_data.left_out_silent == ("/clips/silent.mp4",) and old_data.to_stored() == data

    patch = copy.deepcopy(rows["config_patch"])
    patch["configs"][0].pop("output_dir")
    assert ConfigPatchOutputs.from_stored(patch, 0).to_stored() == patch


def test_a_fresh_data_check_stores_the_optional_keys_only_when_they_apply() -> None:
    stored = _rows("ltx_metadata")["data_check"]
    fields = {key: value for key, value in stored.items()}
    fresh = DataCheckOutputs.model_validate(fields)
    assert "left_out_silent" not in fresh.to_stored() and fresh.left_out_silent == ()
    with_skips = DataCheckOutputs.model_validate({**fields, "agreed_skips": 2})
    assert with_skips.to_stored()["agreed_skips"] == 2


def _shape(value: Any) -> Any:
    """The keys at every level (and list lengths): what a reader of the stored JSON depends on."""
    if isinstance(value, dict):
        return {key: _shape(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_shape(item) for item in value]
    return type(value).__name__ if value is not None else None


def test_a_fresh_run_stores_what_the_untyped_phases_stored(workspace, clips_dataset, ltx_prereqs, fake_smi,
                                                            monkeypatch) -> None:
    """The ltx run of rows_v0/ltx_metadata.json, made again: every phase stores the same keys and the same values,
    the host's own figures (disk, memory, paths) aside; the plan adds its ``launch`` (schema version 1)."""
    from ltx_pipeline.cli import main  # noqa: F401  (imported for its side effects on the registry)
    from tests.conftest import H100_SMI
    from tests.phases.train_helpers import drive_until_validate, store_of

    args = ["run", "--workspace", str(workspace), "--run", "r1", "--dataset", str(clips_dataset),
            "--nvidia-smi", fake_smi(H100_SMI), "--approve", "--trainer-root", ltx_prereqs["trainer_root"],
            "--model-path", ltx_prereqs["model_path"], "--text-encoder-path", ltx_prereqs["text_encoder_path"],
            "--buckets", "64x64x17", "--autotune", "off"]
    drive_until_validate(monkeypatch, args)
    store, run = store_of(workspace)
    rows = store.latest_phase_runs(run.id)
    old = _rows("ltx_metadata")
    root = str(workspace.parent)
    for phase, model in MODELS.items():
        row = rows[phase]
        assert row.outputs_version == model.SCHEMA_VERSION
        fresh = json.loads(json.dumps(row.outputs).replace(root, "/runs/b"))
        expected = dict(old[phase])
        if phase == "config_patch":  # #43 added one patch since these rows were recorded: a LoRA's full resume state
            for config in fresh["configs"]:
                config["patches"] = [p for p in config["patches"] if p["path"] != "checkpoints.save_training_state"]
        if phase == "plan":  # plan.md names the run's folder: its hash differs with the folder
            fresh.pop("plan_hash"), expected.pop("plan_hash")
            assert fresh.pop("launch") == {"processes": 1, "distributed": "none", "reason": "one process per GPU (1)",
                                           "nodes": 1}
        assert _shape(fresh) == _shape(expected), phase
        if phase == "probe":  # the host's figures differ from one machine (and moment) to the next
            for key in ("host", "findings"):
                fresh.pop(key), expected.pop(key)
        if phase == "config_patch":  # the template's path is the fixture checkout's, here as there
            for config in (*fresh["configs"], *expected["configs"]):
                config.pop("diff"), config.pop("template")
        assert fresh == expected, phase
        assert model.from_stored(row.outputs, row.outputs_version).to_stored() == row.outputs


@pytest.mark.parametrize("run", ["reference_clips_folder", "ltx_metadata"])
def test_fingerprint_parts_read_from_the_typed_outputs_are_the_untyped_ones(run: str) -> None:
    """An existing run does not re-run after the upgrade: each part a later phase's fingerprint takes from these
    outputs, read through the models, digests as the untyped code's ``digest(stored[...])`` did."""
    from ltx_pipeline.engine.fingerprint import digest
    from ltx_pipeline.probing import to_plain

    rows = _rows(run)
    probe = ProbeOutputs.from_stored(rows["probe"], 0)
    plan = PlanOutputs.from_stored(rows["plan"], 0)
    assert plan.preparation is not None
    # prepare's "input" and data_check's "probe":
    assert digest(to_plain(probe.dataset)) == digest(rows["probe"]["dataset"])
    assert digest(plan.preparation.to_dict()) == digest(rows["plan"]["preparation"])  # prepare's "plan"
    assert [list(s.buckets) for s in plan.recipe.stages] == [s["buckets"] for s in rows["plan"]["recipe"]["stages"]]
    assert plan.to_stored()["recipe"] == rows["plan"]["recipe"]  # what the config patch rules read
    for phase, model in MODELS.items():  # the whole-output parts (ctx.output_digest) digest the stored JSON itself
        assert digest(model.from_stored(rows[phase], 0).to_stored()) == digest(rows[phase])
