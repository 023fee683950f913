"""GPU probing: captured nvidia-smi outputs through a fake executable, failures, visibility, --assume-gpu."""

from __future__ import annotations

import json
import stat
from pathlib import Path

import pytest

from ltx_pipeline.errors import BadInput
from ltx_pipeline.probing.gpus import (
    NVIDIA_SMI_QUERY,
    Gpu,
    assumed_probe,
    filter_visible,
    parse_assumed_gpu,
    parse_nvidia_smi,
    probe_gpus,
    query_gpus,
)

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "nvidia_smi"


def make_smi(tmp_path: Path, *, stdout: str = "", stderr: str = "", code: int = 0, sleep: float = 0,
             name: str = "fake-nvidia-smi") -> str:
    """Write an executable that records its argv, prints the given output and exits with ``code``."""
    script = tmp_path / name
    script.write_text(
        "#!/usr/bin/env python3\n"
        "import json, sys, time\n"
        f"open({str(tmp_path / 'argv.json')!r}, 'w').write(json.dumps(sys.argv[1:]))\n"
        f"time.sleep({sleep!r})\n"
        f"sys.stdout.write({stdout!r})\n"
        f"sys.stderr.write({stderr!r})\n"
        f"sys.exit({code})\n"
    )
    script.chmod(script.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return str(script)


def fixture_smi(tmp_path: Path, fixture: str, code: int = 0) -> str:
    return make_smi(tmp_path, stdout=(FIXTURES / fixture).read_text(), code=code)


def assert_one_line(exc: BadInput) -> str:
    text = str(exc)
    assert "\n" not in text and "\r" not in text
    assert "Fix:" in text
    return text


@pytest.mark.parametrize(
    ("fixture", "count", "name", "memory_mib"),
    [
        ("rtx5090.txt", 1, "NVIDIA GeForce RTX 5090", 32607),
        ("rtx4090.txt", 1, "NVIDIA GeForce RTX 4090", 24564),
        ("a6000_x2.txt", 2, "NVIDIA RTX A6000", 49140),
        ("h100_x8.txt", 8, "NVIDIA H100 80GB HBM3", 81559),
        ("h200.txt", 1, "NVIDIA H200", 143771),
        ("a100_80gb.txt", 1, "NVIDIA A100-SXM4-80GB", 81920),
    ],
)
def test_captured_outputs_through_fake_executable(tmp_path, fixture, count, name, memory_mib):
    exe = fixture_smi(tmp_path, fixture)
    gpus = query_gpus(exe, env={})
    assert len(gpus) == count
    assert {gpu.name for gpu in gpus} == {name}
    assert {gpu.memory_mib for gpu in gpus} == {memory_mib}
    assert [gpu.index for gpu in gpus] == list(range(count))
    assert all(gpu.uuid.startswith("GPU-") and not gpu.assumed for gpu in gpus)
    # the query is passed as an argv list, exactly
    assert json.loads((tmp_path / "argv.json").read_text()) == NVIDIA_SMI_QUERY


def test_mixed_box_lists_both_models(tmp_path):
    probe = probe_gpus(fixture_smi(tmp_path, "mixed_4090_a6000.txt"), env={})
    assert [(g.name, g.memory_mib) for g in probe.gpus] == [
        ("NVIDIA GeForce RTX 4090", 24564), ("NVIDIA RTX A6000", 49140)]
    finding = probe.to_finding()
    assert finding.status == "ok"
    assert "1 × NVIDIA GeForce RTX 4090 (24564 MiB) + 1 × NVIDIA RTX A6000 (49140 MiB)" in finding.detail
    assert "550.107.02" in finding.detail
    json.dumps(probe.to_dict())


def test_executable_from_environment_variable(tmp_path):
    exe = fixture_smi(tmp_path, "h200.txt")
    gpus = query_gpus(env={"LTX_PIPELINE_NVIDIA_SMI": exe})
    assert gpus[0].name == "NVIDIA H200"


def test_argument_wins_over_environment(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    arg = fixture_smi(tmp_path / "a", "h200.txt")
    env_exe = fixture_smi(tmp_path / "b", "rtx4090.txt")
    assert query_gpus(arg, env={"LTX_PIPELINE_NVIDIA_SMI": env_exe})[0].name == "NVIDIA H200"


def test_executable_found_on_path(tmp_path):
    make_smi(tmp_path, stdout=(FIXTURES / "rtx5090.txt").read_text(), name="nvidia-smi")
    gpus = query_gpus(env={"PATH": str(tmp_path)})
    assert gpus[0].memory_mib == 32607


def test_no_nvidia_smi_anywhere(tmp_path):
    with pytest.raises(BadInput) as info:
        query_gpus(env={"PATH": str(tmp_path)})
    text = assert_one_line(info.value)
    assert "not on PATH" in text and "--assume-gpu" in text


def test_executable_missing(tmp_path):
    with pytest.raises(BadInput) as info:
        query_gpus(str(tmp_path / "nope" / "nvidia-smi"), env={})
    text = assert_one_line(info.value)
    assert "does not exist" in text and str(tmp_path / "nope" / "nvidia-smi") in text


def test_executable_not_executable(tmp_path):
    plain = tmp_path / "nvidia-smi"
    plain.write_text("#!/usr/bin/env python3\nprint('0, GPU-x, A, 1, 1')\n")
    plain.chmod(0o644)
    with pytest.raises(BadInput) as info:
        query_gpus(str(plain), env={})
    assert "not executable" in assert_one_line(info.value)


def test_driver_failure_exit_status(tmp_path):
    exe = fixture_smi(tmp_path, "driver_failure.txt", code=9)
    with pytest.raises(BadInput) as info:
        query_gpus(exe, env={})
    text = assert_one_line(info.value)
    assert "driver is not answering" in text
    assert "NVIDIA-SMI has failed" in text
    assert exe in text


def test_no_devices_found(tmp_path):
    exe = fixture_smi(tmp_path, "no_devices.txt", code=6)
    with pytest.raises(BadInput) as info:
        query_gpus(exe, env={})
    assert "found no NVIDIA GPU" in assert_one_line(info.value)


def test_failure_message_with_exit_zero_is_still_an_error(tmp_path):
    exe = fixture_smi(tmp_path, "driver_failure.txt", code=0)
    with pytest.raises(BadInput) as info:
        query_gpus(exe, env={})
    assert "driver is not answering" in assert_one_line(info.value)


def test_non_zero_exit_reports_first_stderr_line(tmp_path):
    exe = make_smi(tmp_path, stderr="\nFailed to initialize NVML: Unknown Error\nmore detail\n", code=255)
    with pytest.raises(BadInput) as info:
        query_gpus(exe, env={})
    text = assert_one_line(info.value)
    assert "exited with status 255: Failed to initialize NVML: Unknown Error" in text
    assert "more detail" not in text


def test_timeout(tmp_path):
    exe = make_smi(tmp_path, stdout=(FIXTURES / "h200.txt").read_text(), sleep=5)
    with pytest.raises(BadInput) as info:
        query_gpus(exe, env={}, timeout=0.3)
    assert "did not answer within 0.3 s" in assert_one_line(info.value)


@pytest.mark.parametrize(
    ("output", "expected"),
    [
        ("", "no GPU rows"),
        ("\n\n  \n", "no GPU rows"),
        ("hello world\n", "expected 5 comma-separated fields, got 1"),
        ("0, GPU-1, NVIDIA H100, 81559\n", "got 4"),
        ("0, GPU-1, NVIDIA H100, 81559, 550.54.15, extra\n", "got 6"),
        ("0, GPU-1, NVIDIA H100, lots, 550.54.15\n", "memory.total 'lots' is not a size in MiB"),
        ("0, GPU-1, NVIDIA H100, [N/A], 550.54.15\n", "memory.total '[N/A]'"),
        ("x, GPU-1, NVIDIA H100, 81559, 550.54.15\n", "index 'x' is not a number"),
        ("0, GPU-1, , 81559, 550.54.15\n", "no GPU name"),
        ("0, GPU-1, NVIDIA H100, 81559, 550.54.15\ngarbage line\n", "line 2"),
    ],
)
def test_garbage_output_is_bad_input(tmp_path, output, expected):
    exe = make_smi(tmp_path, stdout=output)
    with pytest.raises(BadInput) as info:
        query_gpus(exe, env={})
    text = assert_one_line(info.value)
    assert expected in text
    assert exe in text


def test_parser_tolerates_units_spacing_crlf_header_and_na_driver():
    text = (
        "\ufeffindex, uuid, name, memory.total [MiB], driver_version\r\n"
        "\r\n"
        "  0 ,  GPU-aaaa-1 ,  NVIDIA H100 80GB HBM3 ,  81559 MiB ,  550.54.15  \r\n"
        "1,GPU-aaaa-2,NVIDIA H100 80GB HBM3,81559,[N/A]\r\n"
        "\r\n"
    )
    gpus = parse_nvidia_smi(text)
    assert gpus == [
        Gpu(0, "GPU-aaaa-1", "NVIDIA H100 80GB HBM3", 81559, "550.54.15"),
        Gpu(1, "GPU-aaaa-2", "NVIDIA H100 80GB HBM3", 81559, "unknown"),
    ]


H100 = parse_nvidia_smi((FIXTURES / "h100_x8.txt").read_text())
MIXED = parse_nvidia_smi((FIXTURES / "mixed_4090_a6000.txt").read_text())


@pytest.mark.parametrize(
    ("value", "indices"),
    [
        (None, list(range(8))),
        ("", []),
        ("  ", []),
        ("-1", []),
        ("3", [3]),
        ("5,1", [5, 1]),
        (" 2 , 4 ", [2, 4]),
        ("0,-1,1", [0]),
        ("1,1,2", [1, 2]),
        (H100[6].uuid, [6]),
        (H100[6].uuid[:12] + "," + "0", [6, 0]),
    ],
)
def test_cuda_visible_devices(value, indices):
    visible, warnings = filter_visible(H100, value)
    assert [gpu.index for gpu in visible] == indices
    assert warnings == []


def test_cuda_visible_devices_through_probe(tmp_path):
    exe = fixture_smi(tmp_path, "h100_x8.txt")
    probe = probe_gpus(exe, env={"CUDA_VISIBLE_DEVICES": "0,1"})
    assert len(probe.all_gpus) == 8 and len(probe.gpus) == 2
    assert probe.cuda_visible_devices == "0,1"
    hidden = probe_gpus(exe, env={"CUDA_VISIBLE_DEVICES": ""})
    assert hidden.gpus == ()
    finding = hidden.to_finding()
    assert finding.status == "missing" and "CUDA_VISIBLE_DEVICES" in finding.next_step


def test_unknown_cuda_visible_devices_are_named():
    with pytest.raises(BadInput) as info:
        filter_visible(H100, "0,9,GPU-deadbeef,MIG-1234")
    text = assert_one_line(info.value)
    assert "9, GPU-deadbeef, MIG-1234" in text
    assert "CUDA_VISIBLE_DEVICES" in text


def test_ambiguous_uuid_prefix():
    gpus = [Gpu(0, "GPU-abc1", "A", 1000, "1"), Gpu(1, "GPU-abc2", "A", 1000, "1")]
    with pytest.raises(BadInput) as info:
        filter_visible(gpus, "GPU-abc")
    assert "matches 2 GPUs" in assert_one_line(info.value)


def test_index_order_warning_on_mixed_box():
    visible, warnings = filter_visible(MIXED, "1")
    assert [gpu.name for gpu in visible] == ["NVIDIA RTX A6000"]
    assert warnings and "CUDA_DEVICE_ORDER=PCI_BUS_ID" in warnings[0]
    assert filter_visible(MIXED, "1", device_order="PCI_BUS_ID")[1] == []
    assert filter_visible(MIXED, MIXED[1].uuid)[1] == []


def test_assume_gpu():
    gpus = parse_assumed_gpu("NVIDIA H100 80GB HBM3,81559,2")
    assert len(gpus) == 2
    assert all(g.assumed and g.name == "NVIDIA H100 80GB HBM3" and g.memory_mib == 81559 for g in gpus)
    assert [g.index for g in gpus] == [0, 1]
    single = parse_assumed_gpu(" NVIDIA GeForce RTX 5090 , 32607 MiB ")
    assert len(single) == 1 and single[0].memory_mib == 32607


def test_assumed_probe_is_marked_everywhere():
    probe = assumed_probe("NVIDIA H200,143771")
    data = probe.to_dict()
    assert data["assumed"] is True and data["source"] == "--assume-gpu"
    assert all(gpu["assumed"] for gpu in data["gpus"])
    finding = probe.to_finding()
    assert finding.status == "warning" and finding.detail.startswith("assumed, not probed")


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ("", "expected 2 or 3"),
        ("NVIDIA H100", "expected 2 or 3"),
        ("a,1,2,3", "expected 2 or 3"),
        (",81559", "name is empty"),
        ("NVIDIA H100,abc", "not a positive number of MiB"),
        ("NVIDIA H100,80GB", "not a positive number of MiB"),
        ("NVIDIA H100,0", "not a positive number of MiB"),
        ("NVIDIA H100,81559,0", "count '0'"),
        ("NVIDIA H100,81559,two", "count 'two'"),
    ],
)
def test_assume_gpu_errors(spec, expected):
    with pytest.raises(BadInput) as info:
        parse_assumed_gpu(spec)
    text = assert_one_line(info.value)
    assert expected in text
    assert "NAME,MEMORY_MIB[,COUNT]" in text


def test_probe_does_not_need_environment_default(tmp_path, monkeypatch):
    monkeypatch.setenv("LTX_PIPELINE_NVIDIA_SMI", fixture_smi(tmp_path, "a6000_x2.txt"))
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    assert len(query_gpus()) == 2
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1")
    assert [gpu.index for gpu in query_gpus()] == [1]
