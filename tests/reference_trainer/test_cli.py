"""The train.py contract seen from outside: exit codes, config errors, multi-process runs, make_base."""

from __future__ import annotations

import re
import shutil
import sys
from pathlib import Path

import pytest
import torch
from conftest import run_trainer
from safetensors.torch import load_file, save_file


def test_missing_config_file_exits_1_with_the_trainers_message(tmp_path):
    result = run_trainer(tmp_path / "absent.yaml")
    assert result.returncode == 1
    assert result.stdout.strip() == f"Error: Configuration file {tmp_path / 'absent.yaml'} does not exist."


def test_invalid_config_prints_the_pydantic_error_and_exits_1(project):
    config = project.config("bad.yaml", optimization={"learnin_rate": 1e-4})
    result = run_trainer(config)
    assert result.returncode == 1
    assert result.stdout.startswith("Error: Invalid configuration data: 1 validation error for LtxTrainerConfig")
    assert "optimization.learnin_rate" in result.stdout and "extra_forbidden" in result.stdout


@pytest.mark.long  # 15 s per run on a 2-core box (2026-12-07): the default suite stays under 6 min
@pytest.mark.slow
def test_two_process_ddp_run_over_gloo_completes(project):
    accelerate = shutil.which("accelerate", path=str(Path(sys.executable).parent))
    assert accelerate, "accelerate is a project dependency"
    config = project.config("ddp.yaml", output_dir=str(project.root / "ddp"), optimization={"steps": 2},
                            validation={"interval": None})
    # `accelerate launch --cpu` always uses its single-process launcher; --multi_gpu starts torchrun, and
    # with no CUDA device the trainer runs each rank on the CPU over gloo.
    result = run_trainer(config, env={"LTX_REFERENCE_LOG_EVERY": "1", "CUDA_VISIBLE_DEVICES": ""}, timeout=180,
                         launcher=[accelerate, "launch", "--multi_gpu", "--num_processes", "2", "--num_machines", "1",
                                   "--mixed_precision", "no", "--dynamo_backend", "no", "-m"])
    assert result.returncode == 0, result.stderr[-3000:]
    assert re.search(r"\[rank 0\] MULTI_CPU distributed training enabled with 2 processes", result.stdout)
    assert re.search(r"\[rank 0\] Step 2/2 - Loss: ", result.stdout)
    assert "[rank 1] Step" not in result.stdout  # only the main process logs steps
    assert " - Number of processes: 2" in result.stdout and " - Global batch size: 2" in result.stdout
    assert (project.root / "ddp" / "checkpoints" / "lora_weights_step_00002.safetensors").is_file()


def test_make_base_is_deterministic_and_refuses_to_overwrite(tmp_path):
    from ltx_pipeline.reference_trainer import make_base
    from ltx_pipeline.reference_trainer.model import read_architecture

    first, second = tmp_path / "a.safetensors", tmp_path / "b.safetensors"
    assert make_base.main([str(first), "--seed", "3", "--layers", "1"]) == 0
    assert make_base.main([str(second), "--seed", "3", "--layers", "1"]) == 0
    a, b = load_file(str(first)), load_file(str(second))
    assert a.keys() == b.keys() and all(torch.equal(a[key], b[key]) for key in a)
    assert read_architecture(first).layers == 1
    assert make_base.main([str(first)]) == 1
    bogus = tmp_path / "bogus.safetensors"
    save_file({"x": torch.zeros(1)}, str(bogus))
    with pytest.raises(ValueError, match="not a reference-trainer base model"):
        read_architecture(bogus)
