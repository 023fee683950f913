"""`ltx-pipeline diagnose LOG`: text, --json, exit codes, --config patches, a bad LOG path (issue 34)."""

from __future__ import annotations

import json
from pathlib import Path

import yaml

from ltx_pipeline.cli import main
from ltx_pipeline.training.fixes import failure_report

CORPUS = Path(__file__).resolve().parents[1] / "fixtures" / "trainer_logs" / "diagnose"


def test_text_names_kind_phase_rank_evidence_and_fix(capsys) -> None:
    assert main(["diagnose", str(CORPUS / "oom_validation/precompute_embeddings_2gpu.log")]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "kind: oom_validation"
    assert out[1].startswith("phase: embedding_precomputation (from: Pre-computing embeddings for 4 validation")
    assert out[2] == "rank: 1 (the process that failed)"
    assert out[3].startswith("evidence: torch.OutOfMemoryError: CUDA out of memory.")
    assert out[5].startswith("  1. set acceleration.load_text_encoder_in_8bit: true")


def test_json_and_exit_codes(capsys) -> None:
    assert main(["diagnose", str(CORPUS / "host_oom/dmesg_oom_killer.log"), "--exit-code", "137", "--json"]) == 0
    record = json.loads(capsys.readouterr().out)
    assert {"kind", "phase", "evidence", "fix"} <= record.keys() and record["kind"] == "host_oom"
    assert all("reason" in step for step in record["fix"])
    # Not classified: exit 1, and --json still prints the object.
    assert main(["diagnose", str(CORPUS / "crash/segfault.log"), "--json"]) == 1
    record = json.loads(capsys.readouterr().out)
    assert record["kind"] == "crash" and record["evidence"] == "Segmentation fault (core dumped)"


def test_exit_status_and_signal_options(tmp_path, capsys) -> None:
    log = tmp_path / "slurm-1.out"
    log.write_text("INFO     Step 20/100 - Loss: 0.2000, LR: 1.00e-04, Time/Step: 1.00s, Total Time: 0h 2m\n")
    assert main(["diagnose", str(log)]) == 1
    assert main(["diagnose", str(log), "--signal", "9", "--json"]) == 0
    assert json.loads(capsys.readouterr().out.splitlines()[-1])["kind"] == "killed"
    assert main(["diagnose", str(log), "--exit-code", "135", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["kind"] == "shm_bus_error"


def test_config_turns_fixes_into_patches(tmp_path, capsys) -> None:
    config = tmp_path / "config.yaml"
    config.write_text(yaml.safe_dump({"optimization": {"learning_rate": 0.0002, "max_grad_norm": 1.0},
                                      "acceleration": {"mixed_precision_mode": "fp16"}}))
    log = CORPUS / "nan_loss/tqdm_loss_eq_nan.log"
    assert main(["diagnose", str(log), "--config", str(config)]) == 0
    text = capsys.readouterr().out
    assert 'acceleration.mixed_precision_mode: "fp16" -> "bf16"' in text
    assert "optimization.learning_rate: 0.0002 -> 0.0001" in text
    assert "max_grad_norm" not in text  # already satisfied: no no-op patch
    assert "acceleration.quantization: (unset) -> null" in text
    assert main(["diagnose", str(log), "--config", str(config), "--json"]) == 0
    fixes = json.loads(capsys.readouterr().out)["fix"]
    assert fixes[1] == {"path": "optimization.learning_rate", "old": 0.0002, "new": 0.0001, "absent": False,
                        "reason": "halve the learning rate"}


def test_bad_paths_are_one_line_and_exit_2(tmp_path, capsys) -> None:
    assert main(["diagnose", str(tmp_path / "missing.log")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: The log file does not exist") and "Fix:" in err[0]
    assert main(["diagnose", str(tmp_path)]) == 2
    assert "not a file" in capsys.readouterr().err
    log = CORPUS / "crash/segfault.log"
    assert main(["diagnose", str(log), "--config", str(tmp_path / "nope.yaml")]) == 2


def test_engine_failure_md_agrees_with_diagnose(tmp_path, capsys) -> None:
    # The train phase's failure.md and diagnose read the same lines with the same classifier.
    log = tmp_path / "train.log"
    log.write_text("=== ltx-pipeline: launch 1 of stage 1 at 2026-11-29T10:00:00Z\nSegmentation fault\n"
                   "=== ltx-pipeline: launch 2 of stage 1 at 2026-11-29T11:00:00Z\n"
                   + (CORPUS / "oom_validation/periodic_sampling_2gpu.log").read_text())
    failure, proposal, report = failure_report(log, {}, 1, None, 1)
    assert main(["diagnose", str(log), "--json"]) == 0
    record = json.loads(capsys.readouterr().out)
    assert (record["kind"], record["phase"], record["rank"]) == (failure.kind, failure.phase, failure.rank)
    assert record["evidence"] == proposal.evidence and f"**{record['kind']}**" in report
