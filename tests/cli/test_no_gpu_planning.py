"""No GPU, no plan (#33): planning on a machine with no nvidia-smi.

The toy backend plans for a stated default GPU, shown as assumed (as ``--assume-gpu`` does) and
finishes; the ltx backend stops before a run exists with one line saying what to do; a probe that
could not start leaves no failed run, and ``status`` never suggests a command that repeats an error.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from ltx_pipeline.backends import make_backend
from ltx_pipeline.cli import main
from ltx_pipeline.probing.gpus import DEFAULT_ASSUMED_GPU
from ltx_pipeline.store import Store
from tests.conftest import H100_SMI
from tests.phases.train_helpers import mp4_clips

NO_SMI_LINE = ("error: No GPU to plan for: nvidia-smi is not on PATH, and the ltx backend plans for the training "
               'machine\'s GPUs (PATH). Fix: pass --assume-gpu "NAME,MEMORY_MIB" (e.g. "NVIDIA H100 80GB HBM3,81559") '
               "to plan for the GPU you will train on, or run on the training machine.")
DEFAULT_SUMMARY = ("1 × NVIDIA GeForce RTX 5090 (32607 MiB) (assumed: this machine has no nvidia-smi; choose another "
                   "with --assume-gpu)")


@pytest.fixture
def no_nvidia_smi(monkeypatch: pytest.MonkeyPatch) -> None:
    """A laptop: no nvidia-smi on PATH, and nothing naming one."""
    monkeypatch.delenv("LTX_PIPELINE_NVIDIA_SMI", raising=False)
    dirs = os.environ.get("PATH", "").split(os.pathsep)
    monkeypatch.setenv("PATH", os.pathsep.join(d for d in dirs if d and not (Path(d) / "nvidia-smi").exists()))


def _status(workspace: Path, capsys: pytest.CaptureFixture[str]) -> dict:
    capsys.readouterr()
    assert main(["status", "--workspace", str(workspace), "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def _phases(workspace: Path) -> list[tuple[str, str]]:
    store = Store.open(workspace / "ltx-pipeline.db")
    run = store.get_run("r1")
    assert run is not None and run.id is not None
    return [(row.phase, row.status) for row in store.phase_attempts(run.id)]


@pytest.mark.long  # a preprocessing and a 4-step CPU training of the toy model: 15 s on 2 cores
@pytest.mark.usefixtures("no_nvidia_smi")
def test_the_reference_backend_plans_for_the_default_gpu_and_finishes_with_no_nvidia_smi(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    workspace = tmp_path / "ws"
    code = main(["run", "--workspace", str(workspace), "--run", "r1", "--dataset",
                 str(mp4_clips(tmp_path / "data", n=2)), "--backend", "reference", "--buckets", "64x64x17",
                 "--steps", "4", "--rank", "4", "--autotune", "off", "--skip-eval", "--approve"])
    assert code == 0, capsys.readouterr().err
    plan = (workspace / "r1" / "plan.md").read_text()
    assert f"- GPUs: {DEFAULT_SUMMARY}" in plan
    # The plan's warnings say why it was assumed and how to choose another GPU.
    assert ("- **GPUs** (warning): assumed, not probed: 1 × NVIDIA GeForce RTX 5090 (32607 MiB), the default GPU, "
            "because this machine has no nvidia-smi. Next step: plan for another GPU with --assume-gpu "
            '"NAME,MEMORY_MIB[,COUNT]"') in plan
    run = _status(workspace, capsys)["runs"][0]
    assert run["state"] == "finished" and run["next_command"] is None
    gpus = next(f for f in run["findings"] if f["item"] == "GPUs")
    assert gpus["status"] == "warning" and "because this machine has no nvidia-smi" in gpus["detail"]


@pytest.mark.usefixtures("no_nvidia_smi")
def test_the_default_gpu_is_the_toy_backends_capacity_as_an_assumed_gpu_is() -> None:
    assert make_backend("reference").capacity_mib == int(DEFAULT_ASSUMED_GPU.split(",")[1]) == 32607
    assert make_backend("reference", assume_gpu="NVIDIA H100 80GB HBM3,81559").capacity_mib == 81559


@pytest.mark.usefixtures("no_nvidia_smi")
def test_the_ltx_backend_with_no_nvidia_smi_stops_before_a_run_exists(tmp_path: Path, clips_dataset: Path,
                                                                      capsys: pytest.CaptureFixture[str]) -> None:
    workspace = tmp_path / "ws"
    code = main(["run", "--workspace", str(workspace), "--run", "r1", "--dataset", str(clips_dataset),
                 "--backend", "ltx", "--approve"])
    captured = capsys.readouterr()
    assert code == 2, captured.out + captured.err
    assert captured.err.splitlines() == [NO_SMI_LINE]
    assert not workspace.exists()  # no run folder, no store: nothing is written before the request passes
    assert _status(workspace, capsys)["runs"] == []  # no run row


def test_a_planned_run_whose_nvidia_smi_is_gone_is_refused_before_any_phase_runs(
        tmp_path: Path, clips_dataset: Path, fake_smi, capsys: pytest.CaptureFixture[str]) -> None:
    workspace = tmp_path / "ws"
    smi = Path(fake_smi(H100_SMI))
    assert main(["run", "--workspace", str(workspace), "--run", "r1", "--dataset", str(clips_dataset),
                 "--backend", "reference", "--nvidia-smi", str(smi)]) == 3
    before = _phases(workspace)
    smi.unlink()
    capsys.readouterr()
    assert main(["resume", "--workspace", str(workspace), "--run", "r1"]) == 2
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 1 and "nvidia-smi executable does not exist" in lines[0] and str(smi) in lines[0], lines
    assert _phases(workspace) == before  # no failed attempt recorded
    assert _status(workspace, capsys)["runs"][0]["state"] == "awaiting_approval"


def test_status_after_a_failed_probe_says_the_fix_before_resume(tmp_path: Path, clips_dataset: Path, fake_smi,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    """nvidia-smi is there but the driver does not answer: a bare `resume` would fail the same way."""
    workspace = tmp_path / "ws"
    smi = fake_smi("", 9, "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.\n")
    assert main(["run", "--workspace", str(workspace), "--run", "r1", "--dataset", str(clips_dataset),
                 "--backend", "reference", "--nvidia-smi", smi]) == 2
    run = _status(workspace, capsys)["runs"][0]
    target = f"--workspace {workspace} --run r1"
    assert run["state"] == "failed"
    assert run["next_command"].startswith("check that the NVIDIA driver works (`nvidia-smi` lists your GPUs)")
    assert run["next_command"].endswith(f"; then: ltx-pipeline resume {target}")
    assert run["next_command"] != f"ltx-pipeline resume {target}"


@pytest.mark.usefixtures("no_nvidia_smi")
def test_a_default_planned_run_is_probed_again_where_nvidia_smi_appears(
        tmp_path: Path, fake_smi, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    workspace = tmp_path / "ws"
    assert main(["run", "--workspace", str(workspace), "--run", "r1", "--dataset",
                 str(mp4_clips(tmp_path / "data", n=2)), "--backend", "reference", "--buckets", "64x64x17"]) == 3
    assert f"- GPUs: {DEFAULT_SUMMARY}" in (workspace / "r1" / "plan.md").read_text()
    smi = Path(fake_smi(H100_SMI))
    monkeypatch.setenv("PATH", f"{smi.parent}{os.pathsep}{os.environ['PATH']}")
    assert main(["resume", "--workspace", str(workspace), "--run", "r1"]) == 3
    plan = (workspace / "r1" / "plan.md").read_text()
    hardware = plan.split("## Hardware")[1]
    assert "- GPUs: 1 × NVIDIA H100 80GB HBM3 (81559 MiB)\n" in hardware and "assumed" not in hardware[:80]
    assert [phase for phase, _ in _phases(workspace)].count("probe") == 2
