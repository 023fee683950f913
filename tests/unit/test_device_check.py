"""Processes per node never exceed the visible GPUs (validate refuses), and the plan says where ranks load
their models (issue 34)."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from ltx_pipeline.errors import EXIT_BAD_INPUT, BadRequest
from ltx_pipeline.ltx.launch_checks import device_placement_line, device_problem, visible_gpus
from ltx_pipeline.outputs.data_check import DataCheckOutputs
from ltx_pipeline.outputs.plan import PlanOutputs
from ltx_pipeline.outputs.probe import ProbeOutputs
from phases.validate import ValidatePhase

TRAINER_SRC = Path("/work/shared/ltx2-src")


def _problem(processes: int, gpus: int, visible: str | None = None, backend: str = "ltx", slurm: bool = False):
    return device_problem(backend=backend, slurm=slurm, processes_per_node=processes, gpu_count=gpus,
                          cuda_visible_devices=visible)


def test_more_processes_than_gpus_is_a_problem_with_the_fix() -> None:
    what, where, fix = _problem(4, 2)
    assert "4 training processes per node but only 2 visible GPU(s)" in what
    assert "--processes" in where and "--processes 2" in fix
    assert _problem(2, 2) is None and _problem(1, 8) is None


def test_cuda_visible_devices_narrows_the_gpus() -> None:
    assert visible_gpus(8, "0,1") == 2 and visible_gpus(2, None) == 2 and visible_gpus(4, "") == 0
    what, _, fix = _problem(4, 8, "0,1")
    assert "CUDA_VISIBLE_DEVICES=0,1" in what and "--processes 2" in fix and "CUDA_VISIBLE_DEVICES" in fix


@pytest.mark.parametrize(("backend", "slurm", "gpus"), [("reference", False, 1), ("simulated", False, 1),
                                                        ("ltx", True, 1), ("ltx", False, 0)])
def test_only_the_real_trainer_on_this_machines_gpus_is_checked(backend: str, slurm: bool, gpus: int) -> None:
    assert _problem(4, gpus, backend=backend, slurm=slurm) is None


def _ctx(processes: int | None, gpus: int) -> SimpleNamespace:
    request = SimpleNamespace(backend="ltx", processes=processes, nodes=1, slurm=False)
    # A plan stored before it recorded its launch (launch None): validate derives it from the request, as the plan did.
    outputs = {PlanOutputs: SimpleNamespace(launch=None, recipe=SimpleNamespace(training_mode="lora")),
               ProbeOutputs: SimpleNamespace(gpu_count=gpus), DataCheckOutputs: SimpleNamespace()}
    return SimpleNamespace(request=request, narrate=lambda text: None, output=outputs.__getitem__)


def test_validate_refuses_more_processes_than_gpus(monkeypatch) -> None:
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    with pytest.raises(BadRequest) as refused:
        ValidatePhase().run(_ctx(4, 2))  # type: ignore[arg-type]
    assert refused.value.exit_code == EXIT_BAD_INPUT
    assert "Fix: run with --processes 2" in refused.value.line()


def test_plan_line_reads_where_the_trainer_puts_each_rank(tmp_path) -> None:
    source = tmp_path / "packages" / "ltx-trainer" / "src" / "ltx_trainer"
    source.mkdir(parents=True)
    (source / "trainer.py").write_text('init_device = torch.device("cuda")\n')
    (source / "validation_runner.py").write_text('device = "cuda"\n')
    fixed = device_placement_line(tmp_path, 4)
    assert fixed is not None and "one fixed device" in fixed and "4 copies share GPU 0" in fixed
    (source / "trainer.py").write_text('local_rank = int(os.environ.get("LOCAL_RANK", "0"))\n')
    (source / "validation_runner.py").write_text('os.environ["LOCAL_RANK"]\n')
    own = device_placement_line(tmp_path, 2)
    assert own is not None and "onto its own GPU (cuda:LOCAL_RANK" in own
    assert device_placement_line(tmp_path, 1) is None and device_placement_line(tmp_path / "nope", 2) is None


@pytest.mark.skipif(not TRAINER_SRC.is_dir(), reason="the official trainer source is not on this machine")
def test_the_official_trainer_puts_each_rank_on_its_own_gpu() -> None:
    line = device_placement_line(TRAINER_SRC, 2)
    assert line is not None and "cuda:LOCAL_RANK" in line
