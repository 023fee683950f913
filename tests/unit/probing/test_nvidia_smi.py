"""One resolution of nvidia-smi for every reader: named (--nvidia-smi, then $LTX_PIPELINE_NVIDIA_SMI), then PATH."""

from __future__ import annotations

from pathlib import Path

from ltx_pipeline.env_names import NVIDIA_SMI_ENV
from ltx_pipeline.probing.nvidia_smi import gpu_now, nvidia_smi_command, nvidia_smi_found, nvidia_smi_named


def test_the_option_wins_over_the_variable_and_the_variable_over_path(fake_smi, tmp_path: Path) -> None:
    on_path = fake_smi("", name="nvidia-smi")
    env = {"PATH": str(Path(on_path).parent), NVIDIA_SMI_ENV: "/from/env"}
    assert nvidia_smi_named("/from/option", env) == "/from/option"
    assert nvidia_smi_command(None, env) == "/from/env"
    assert nvidia_smi_command(None, {"PATH": env["PATH"]}) == on_path
    assert nvidia_smi_command(None, {"PATH": str(tmp_path / "empty")}) == "nvidia-smi"  # its OSError says why
    assert nvidia_smi_named(None, {"PATH": env["PATH"]}) is None


def test_found_checks_a_named_path_and_looks_a_bare_name_up_on_path(fake_smi, tmp_path: Path) -> None:
    smi = fake_smi("")
    assert nvidia_smi_found(smi, {})
    assert not nvidia_smi_found(str(tmp_path / "missing" / "nvidia-smi"), {})
    assert nvidia_smi_found(None, {"PATH": str(Path(smi).parent)})
    assert not nvidia_smi_found(None, {"PATH": str(tmp_path / "empty")})


def test_gpu_now_reads_use_and_memory_and_is_empty_when_nvidia_smi_fails(fake_smi) -> None:
    assert gpu_now(fake_smi("0, NVIDIA H100, 87, 40000, 81559\n")) == [
        {"index": 0, "name": "NVIDIA H100", "utilization_pct": 87, "memory_used_mib": 40000,
         "memory_total_mib": 81559}]
    assert gpu_now(fake_smi("oops", exit_code=9, name="broken-smi")) == []
