"""Resume rules (complete pairs, fingerprint refusal, the config patch) and each failure class's proposal."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from ltx_pipeline.checkpoints.discovery import checkpoint_pairs, latest_pair
from ltx_pipeline.errors import ResumeRefused
from ltx_pipeline.training.fixes import failure_report
from ltx_pipeline.training.resume import (
    check_compatible,
    patch_resume,
    read_state,
    restore_planned_start,
)

LOGS = Path(__file__).resolve().parents[1] / "fixtures" / "trainer_logs"
CONFIG = {"model": {"training_mode": "lora"}, "lora": {"rank": 32},
          "optimization": {"optimizer_type": "adamw", "scheduler_type": "linear", "batch_size": 2,
                           "gradient_accumulation_steps": 1, "enable_gradient_checkpointing": True,
                           "learning_rate": 1e-4},
          "acceleration": {"mixed_precision_mode": "fp16", "quantization": None,
                           "offload_optimizer_during_validation": False, "load_text_encoder_in_8bit": False},
          "data": {"num_dataloader_workers": 4},
          "validation": {"interval": 100, "video_dims": [960, 544, 49], "inference_steps": 30},
          "checkpoints": {"interval": 10}}
FINGERPRINT = {"optimizer_type": "adamw", "scheduler_type": "linear", "training_mode": "lora", "lora_rank": 32}


def pair_files(folder: Path, step: int, state: str | None = "json", prefix: str = "lora") -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{prefix}_weights_step_{step:05d}.safetensors").write_bytes(b"w")
    if state == "json":
        (folder / f"training_state_step_{step:05d}.pt").write_text(
            json.dumps({"global_step": step, "config_fingerprint": FINGERPRINT}))


def test_only_complete_pairs_count_and_the_newest_wins(tmp_path) -> None:
    folder = tmp_path / "checkpoints"
    pair_files(folder, 10)
    pair_files(folder, 20)
    pair_files(folder, 30, state=None)  # weights saved, state not yet
    (folder / "training_state_step_00030.pt.tmp").write_bytes(b"partial")  # an interrupted save
    pair_files(folder, 40, state=None)
    (folder / "training_state_step_00040.pt").write_bytes(b"")  # zero-size: not a state
    assert [p.step for p in checkpoint_pairs(folder)] == [10, 20]
    assert latest_pair(folder).weights.name == "lora_weights_step_00020.safetensors"
    assert [p.step for p in checkpoint_pairs(folder, complete_only=False)] == [10, 20, 30, 40]
    assert latest_pair(tmp_path / "missing") is None


def test_fingerprint_mismatch_is_refused_with_the_reason(tmp_path) -> None:
    pair_files(tmp_path, 20)
    pair = latest_pair(tmp_path)
    assert check_compatible(pair, CONFIG) == 20
    optimization = {**CONFIG["optimization"], "optimizer_type": "adamw8bit"}
    changed = {**CONFIG, "lora": {"rank": 64}, "optimization": optimization}
    with pytest.raises(ResumeRefused) as refused:
        check_compatible(pair, changed)
    assert refused.value.exit_code == 4
    assert "optimizer_type: adamw -> adamw8bit" in str(refused.value) and "lora_rank: 32 -> 64" in str(refused.value)
    assert "restart at step 0" in str(refused.value)


def test_a_real_torch_state_file_is_read(tmp_path) -> None:
    torch = pytest.importorskip("torch")
    path = tmp_path / "training_state_step_00005.pt"
    rng = {"torch_state": torch.get_rng_state()}
    torch.save({"global_step": 5, "config_fingerprint": FINGERPRINT, "rng_states": rng}, path)
    assert read_state(path)["global_step"] == 5


def test_resume_patch_points_at_the_weights_and_lets_a_chained_stage_use_its_state(tmp_path) -> None:
    config = tmp_path / "config.stage-2.yaml"
    config.write_text("model:\n  load_checkpoint: /prev/final.safetensors  # warm start\ncheckpoints:\n"
                      "  no_resume: true\n")
    pair_files(tmp_path / "checkpoints", 20)
    records = patch_resume(config, latest_pair(tmp_path / "checkpoints"), workspace=tmp_path)
    values = yaml.safe_load(config.read_text())
    assert values["model"]["load_checkpoint"].endswith("lora_weights_step_00020.safetensors")
    assert values["checkpoints"]["no_resume"] is False
    assert {r.reason for r in records} == {"resume from step 20"} and "# warm start" in config.read_text()


def test_a_restart_undoes_the_resume_patch_so_the_stage_starts_as_planned(tmp_path) -> None:
    # --restart-training moves the stage's outputs aside: a config still loading its own (moved) checkpoint
    # would fail on a missing file, or a warm-starting stage would lose its warm start.
    config = tmp_path / "config.stage-2.yaml"
    config.write_text("model:\n  load_checkpoint: /prev/final.safetensors  # warm start\ncheckpoints:\n"
                      "  no_resume: true\n")
    pair_files(tmp_path / "checkpoints", 20)
    patch_resume(config, latest_pair(tmp_path / "checkpoints"), workspace=tmp_path)
    planned = {"model.load_checkpoint": "/prev/final.safetensors", "checkpoints.no_resume": True}
    records = restore_planned_start(config, planned, workspace=tmp_path)
    values = yaml.safe_load(config.read_text())
    assert values["model"]["load_checkpoint"] == "/prev/final.safetensors" and values["checkpoints"]["no_resume"]
    assert {r.path for r in records} == {"model.load_checkpoint", "checkpoints.no_resume"}
    assert "# warm start" in config.read_text()
    assert restore_planned_start(config, planned, workspace=tmp_path) == []  # already as planned: untouched

    first = tmp_path / "config.yaml"  # a first stage: the template starts from nothing
    first.write_text("model:\n  load_checkpoint: null\ncheckpoints:\n  no_resume: false\n")
    patch_resume(first, latest_pair(tmp_path / "checkpoints"), workspace=tmp_path)
    restore_planned_start(first, {"model.load_checkpoint": None, "checkpoints.no_resume": False}, workspace=tmp_path)
    assert yaml.safe_load(first.read_text())["model"]["load_checkpoint"] is None


def _log(tmp_path: Path, *names: str) -> Path:
    log = tmp_path / "train.log"
    log.write_text("=== ltx-pipeline: launch 1 of stage 1 at 2026-01-01 ===\n"
                   + "".join((LOGS / name).read_text() for name in names))
    return log


@pytest.mark.parametrize(("files", "code", "kind", "diff"), [
    (("oom/training.log", "oom/training.stderr"), 1, "oom_training",
     [("optimization.batch_size", 2, 1), ("optimization.gradient_accumulation_steps", 1, 2)]),
    (("oom/validation_step0.log", "oom/validation_step0.stderr"), 1, "oom_validation", None),
    (("shm_bus_error.stderr",), 1, "shm_bus_error", [("data.num_dataloader_workers", 4, 0)]),
    (("nan_loss.log",), 1, "nan_loss", [("acceleration.mixed_precision_mode", "fp16", "bf16")]),
    (("config_error.log",), 1, "config_error", []),
    (("missing_files.stderr",), 1, "missing_files", []),
    (("host_oom.log",), 137, "killed", []),  # exit 137 and no out-of-memory line: killed, by whom unknown
    (("crash.stderr",), 1, "crash", []),
])
def test_each_failure_class_gets_its_proposed_diff(tmp_path, files, code, kind, diff) -> None:
    log = _log(tmp_path, *files)
    failure, proposal, report = failure_report(log, CONFIG, code, 9 if code == 137 else None, 1)
    assert failure.kind == kind == proposal.kind
    assert failure.evidence and failure.evidence in report
    got = [(c.path, c.old, c.new) for c in proposal.diff]
    if diff is None:  # validation OOM: the first rung is one of the validation-memory fixes
        assert len(got) == 1 and got[0][0] in ("acceleration.offload_optimizer_during_validation",
                                               "acceleration.load_text_encoder_in_8bit")
        assert got[0][1:] == (False, True)
    else:
        assert got == diff
    assert ("```diff" in report) == bool(got)


def test_only_the_last_launch_is_classified(tmp_path) -> None:
    log = tmp_path / "train.log"
    log.write_text((LOGS / "nan_loss.log").read_text() + "=== ltx-pipeline: launch 2 of stage 1 ===\n"
                   + (LOGS / "crash.stderr").read_text())
    assert failure_report(log, CONFIG, 1, None, 1)[0].kind == "crash"
