"""Issue 19: only what was validated is launched, autotune stays inside the dataset's limits, and the
plan states the launch that validate builds.

Reproduced as a user saw it: 4 assumed H100s, a 6-clip dataset, ``--effective-batch 8``.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from ltx_pipeline.cli import main
from ltx_pipeline.engine.journal import config_sha256
from ltx_pipeline.outputs.autotune import AutotuneOutputs
from ltx_pipeline.outputs.validate import ValidateOutputs
from tests.phases.train_helpers import SURFACE, clips, resume, simulated_args, store_of

FOUR_H100 = "NVIDIA H100 80GB HBM3,81559,4"


def four_gpu_surface(tmp_path: Path) -> Path:
    surface = yaml.safe_load(SURFACE.read_text())
    surface["gpu"]["count"] = 4
    # Make batch 2 available (and fastest) so an autotune blind to the dataset would pick it.
    points = surface["points"]
    extra = []
    for point in points:
        if point["knobs"]["batch_size"] == 1:
            twin = json.loads(json.dumps(point))
            twin["knobs"]["batch_size"] = 2
            twin["step_time_s"] = point["step_time_s"] * 1.2  # faster per sample than batch 1
            twin["peak_vram_gb"] = point["peak_vram_gb"] + 1
            extra.append(twin)
    known = {json.dumps(p["knobs"], sort_keys=True) for p in points}
    points += [p for p in extra if json.dumps(p["knobs"], sort_keys=True) not in known]
    path = tmp_path / "h100x4.yaml"
    path.write_text(yaml.safe_dump(surface))
    return path


def _validated_hashes(workspace: Path) -> list[str]:
    store, run = store_of(workspace)
    return [e.message.split()[2] for e in store.events(run.id) if e.message.startswith("validated ")]


def test_autotune_never_tries_a_batch_the_dataset_cannot_feed_and_the_launch_is_validated(workspace, tmp_path):
    """Case 1: batch 2 x 4 processes = 8 > 6 samples is never a trial, never launched; resume is clean."""
    surface = four_gpu_surface(tmp_path)
    args = simulated_args(workspace, clips(tmp_path / "data", n=6), "--effective-batch", "8", "--steps", "40",
                          "--checkpoint-interval", "20", surface=surface)
    assert main(args) == 0
    store, run = store_of(workspace)
    outputs = store.latest_phase_runs(run.id)["autotune"].outputs
    tried = [t["knobs"]["batch_size"] for t in outputs["trials"]]
    assert tried and set(tried) == {1}
    config = yaml.safe_load((workspace / "r1" / "config.yaml").read_text())
    assert config["optimization"]["batch_size"] * 4 <= 6
    [launch] = store.processes(run.id, "train")
    assert launch.config_sha256 == config_sha256(workspace / "r1" / "config.yaml")
    assert launch.config_sha256.startswith(_validated_hashes(workspace)[-1].rstrip("…"))
    assert resume(workspace) == 0  # a finished run resumes to "finished", not to a validation failure


class _PatchAfterValidate:
    """A phase between validate and train that patches the config the way autotune's winner does."""

    name, heavy = "autotune", True

    outputs_type = AutotuneOutputs

    def fingerprint(self, ctx):  # noqa: ANN001, ANN201
        return {"validate": ctx.output(ValidateOutputs).stages[0].config_sha256}

    def run(self, ctx):  # noqa: ANN001, ANN201
        from ltx_pipeline.engine import PhaseResult
        from ltx_pipeline.ltx.config_patch import Patch, apply_patches

        config = Path(ctx.output(ValidateOutputs).stages[0].config)
        text, _ = apply_patches(config.read_text(), [Patch("optimization.batch_size", 8, "autotune")])
        config.write_text(text)
        return PhaseResult(AutotuneOutputs(off="patched by the test (no sweep)", baseline={}, deltas={}, patches=[],
                                           reports={}))

    def summary(self, outputs):  # noqa: ANN001, ANN201
        return "patched"


@pytest.mark.parametrize("training_mode", ["lora", "full"])
def test_a_config_patched_after_validate_is_validated_again_before_its_launch(workspace, tmp_path, monkeypatch,
                                                                             training_mode):
    """Case 1 (full fine-tune): a patch after validate that breaks the launch is refused, never trained."""
    import phases

    names = [p.name for p in phases.PHASES]
    registry = (*phases.PHASES[: names.index("validate") + 1], _PatchAfterValidate(),
                *(p for p in phases.PHASES if p.name in ("train", "monitor")))
    monkeypatch.setattr(phases, "PHASES", registry)
    args = simulated_args(workspace, clips(tmp_path / "data", n=6), "--steps", "20", "--training-mode",
                          training_mode)
    assert main(args) == 2  # 8 > 6 samples: zero batches
    store, run = store_of(workspace)
    assert store.processes(run.id, "train") == []
    [train] = [p for p in store.phase_attempts(run.id) if p.phase == "train"]
    assert "[zero-batches]" in (train.error or "") and "as it would be launched" in train.error


def test_the_journal_refuses_a_trainer_launch_without_a_validated_config(tmp_path):
    from ltx_pipeline.backends.base import LaunchSpec
    from ltx_pipeline.engine.journal import ConfigChangedSinceValidation, RunJournal, ValidatedConfig
    from ltx_pipeline.store import Store

    store = Store.open(tmp_path / "db.sqlite")
    run = store.create_run("r1", {})
    journal = RunJournal(store, run.id, "train")
    spec = LaunchSpec(("true",), tmp_path, {})
    with pytest.raises(ValueError, match="needs the config as validated"):
        journal.launch("train", 1, spec, tmp_path / "train.log")
    config = tmp_path / "config.yaml"
    config.write_text("a: 1\n")
    proof = ValidatedConfig(config, config_sha256(config), "test")
    config.write_text("a: 2\n")
    with pytest.raises(ConfigChangedSinceValidation):
        journal.launch("trial", 1, spec, tmp_path / "trial.log", proof)
    assert store.processes(run.id) == []


def test_the_plan_states_the_launch_validate_builds_on_the_reference_backend(workspace, tmp_path, monkeypatch):
    """Case 2: plan.md and validate agree: one process on the reference backend, effective batch 8."""
    from tests.phases.train_helpers import drive_until_validate, mp4_clips

    args = ["run", "--workspace", str(workspace), "--run", "r1", "--dataset",
            str(mp4_clips(tmp_path / "data", n=6)), "--backend", "reference", "--assume-gpu", FOUR_H100,
            "--buckets", "64x64x17", "--effective-batch", "8", "--approve"]
    assert drive_until_validate(monkeypatch, args) == 0
    plan = (workspace / "r1" / "plan.md").read_text()
    assert "- Launch: single process (python scripts/train.py); the reference toy trainer runs one process" in plan
    assert "- Effective batch: 8 = batch 1 x accumulation 8 x 1 process(es)" in plan
    assert "4 processes" not in plan
    store, run = store_of(workspace)
    validate = store.latest_phase_runs(run.id)["validate"].outputs
    assert (validate["num_processes"], validate["distributed"]) == (1, "none")
    config = yaml.safe_load((workspace / "r1" / "config.yaml").read_text())
    assert config["optimization"]["batch_size"] * config["optimization"]["gradient_accumulation_steps"] == 8


def test_the_plan_states_ddp_over_four_processes_where_it_launches_them(workspace, tmp_path, monkeypatch):
    from tests.phases.train_helpers import drive_until_validate

    surface = four_gpu_surface(tmp_path)
    args = simulated_args(workspace, clips(tmp_path / "data", n=8), "--effective-batch", "8", surface=surface)
    assert drive_until_validate(monkeypatch, args) == 0
    plan = (workspace / "r1" / "plan.md").read_text()
    assert "- Launch: accelerate launch, 4 processes, DDP; one process per GPU (4)" in plan
    assert "- Effective batch: 8 = batch 1 x accumulation 2 x 4 process(es)" in plan
    store, run = store_of(workspace)
    validate = store.latest_phase_runs(run.id)["validate"].outputs
    assert (validate["num_processes"], validate["distributed"]) == (4, "ddp")


def test_full_fine_tune_plan_shows_only_what_applies_to_full_training(workspace, tmp_path, monkeypatch):
    """Case 7: no rank guidance, no int8 starting knobs, and the learning rate's source is said."""
    from tests.phases.train_helpers import drive_until_validate

    args = simulated_args(workspace, clips(tmp_path / "data"), "--training-mode", "full")
    drive_until_validate(monkeypatch, args)
    plan = (workspace / "r1" / "plan.md").read_text()
    assert "Rank guidance" not in plan and "lora rank" not in plan and "LoRA rank" not in plan
    assert "int8-quanto" not in plan
    assert "a LoRA template: no full fine-tune template ships for this mode" in plan


def test_mixed_gpu_models_are_named_in_the_plan(workspace, tmp_path, fake_smi, monkeypatch):
    from tests.conftest import H100_SMI, RTX5090_SMI
    from tests.phases.train_helpers import drive_until_validate, mp4_clips, reference_args

    smi = fake_smi(RTX5090_SMI + H100_SMI.replace("0, GPU-1111", "1, GPU-1111"))
    drive_until_validate(monkeypatch, reference_args(workspace, mp4_clips(tmp_path / "data"), smi))
    plan = (workspace / "r1" / "plan.md").read_text()
    assert "The GPUs are different models (NVIDIA GeForce RTX 5090, NVIDIA H100 80GB HBM3)" in plan


def test_uv_is_not_a_prerequisite_of_reference_or_simulated_runs(workspace, tmp_path, monkeypatch):
    """Case 7: the plan lists only what the chosen backend needs."""
    from tests.phases.train_helpers import drive_until_validate

    monkeypatch.setenv("PATH", str(tmp_path / "empty-bin"))  # no uv anywhere
    monkeypatch.setattr("shutil.which", lambda *a, **k: None)
    drive_until_validate(monkeypatch, simulated_args(workspace, clips(tmp_path / "data")))
    plan = (workspace / "r1" / "plan.md").read_text()
    assert "**uv**" not in plan and "uv (missing)" not in plan
