"""Preprocessing on every GPU (#46): the backends' argv for N ranks and the engine's choice of N.

One process keeps the command it always had (``python scripts/process_dataset.py ...``); N > 1 is the trainer's
``accelerate launch --num_processes N --multi_gpu`` over the same script, its ranks rendezvousing on a port of
their own, with ``trainer_side/cpu_ranks.py`` before the script where no GPU is visible. The engine gives one
rank per GPU the probe saw here, never more than the rows a command encodes, and one to a backend whose scripts
do not shard. The real trainer's ranks writing the same bytes is tests/real_trainer/test_preprocess_sharded.py.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from ltx_pipeline.backends.launch import free_port
from ltx_pipeline.backends.ltx import LtxBackend
from ltx_pipeline.backends.reference import ReferenceBackend
from ltx_pipeline.errors import BadInput
from ltx_pipeline.preprocessing.processes import ProcessBudget, choose_processes, process_budget
from ltx_pipeline.probing.gpus import GpuProbe, parse_assumed_gpu
from ltx_pipeline.probing.trainer_python import TRAINER_SIDE
from ltx_pipeline.request import RunRequest
from tests.conftest import make_tree

TRAINER = "packages/ltx-trainer"
H100 = "NVIDIA H100 80GB HBM3,81559"


@pytest.fixture
def checkout(tmp_path: Path) -> Path:
    root = tmp_path / "LTX-2"
    make_tree(root, {f"{TRAINER}/configs/accelerate/ddp.yaml": "distributed_type: MULTI_GPU\n",
                     f"{TRAINER}/scripts/process_dataset.py": "", f"{TRAINER}/scripts/process_videos.py": ""})
    return root


def _command(backend: LtxBackend, tmp_path: Path, **kwargs: Any) -> list[str]:
    spec = backend.preprocess_command(tmp_path / "data" / "dataset.json", "64x64x25", tmp_path / "pre",
                                      model_path="/m/x.safetensors", text_encoder_path="/m/gemma", trigger="TOK",
                                      **kwargs)
    return list(spec.argv)


def _script_args(tmp_path: Path, *device: str) -> list[str]:
    return [str((tmp_path / "data" / "dataset.json").resolve()), "--resolution-buckets", "64x64x25", "--model-path",
            "/m/x.safetensors", "--text-encoder-path", "/m/gemma", "--output-dir", str((tmp_path / "pre").resolve()),
            "--lora-trigger", "TOK", *device]


@pytest.mark.parametrize("cuda", [True, False])
def test_one_process_is_the_command_it_always_was(checkout: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                  cuda: bool) -> None:
    monkeypatch.setattr("ltx_pipeline.backends.ltx.cuda_present", lambda: cuda)
    python = tmp_path / "venv" / "bin" / "python"
    device = () if cuda else ("--device", "cpu")
    argv = _command(LtxBackend(checkout, python=python), tmp_path, num_processes=1)
    assert argv == [str(python.absolute()), "scripts/process_dataset.py", *_script_args(tmp_path, *device)]
    assert _command(LtxBackend(checkout, python=python), tmp_path) == argv  # the default is one


def test_ranks_on_gpus_are_the_trainers_accelerate_launch_of_the_same_script(checkout: Path, tmp_path: Path,
                                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("ltx_pipeline.backends.ltx.cuda_present", lambda: True)
    trainer_dir = checkout.resolve() / TRAINER
    argv = _command(LtxBackend(checkout, uv="uv"), tmp_path, num_processes=4, main_port=29611)
    assert argv == ["uv", "run", "--directory", str(trainer_dir), "accelerate", "launch", "--num_processes", "4",
                    "--config_file", str(trainer_dir / "configs" / "accelerate" / "ddp.yaml"), "--multi_gpu",
                    "--main_process_port", "29611", "--tee", "3", "scripts/process_dataset.py",
                    *_script_args(tmp_path)]


def test_cpu_ranks_start_through_the_shim_with_the_trainers_python(checkout: Path, tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("ltx_pipeline.backends.ltx.cuda_present", lambda: False)
    make_tree(tmp_path / "data", {"dataset.json": '[{"caption": "c", "video": "a.mp4"}]'})
    python = tmp_path / "venv" / "bin" / "python"
    argv = _command(LtxBackend(checkout, python=python), tmp_path, num_processes=2, script="videos")
    launch = argv.index("--main_process_port")
    assert argv[:launch] == [str(python.absolute()), "-m", "accelerate.commands.launch", "--num_processes", "2",
                             "--config_file", str(checkout.resolve() / TRAINER / "configs/accelerate/ddp.yaml"),
                             "--multi_gpu"]
    assert 0 < int(argv[launch + 1]) < 65536  # a port free when the command was made
    assert argv[launch + 2:launch + 6] == ["--tee", "3", str(TRAINER_SIDE / "cpu_ranks.py"),
                                           "scripts/process_videos.py"]
    assert (TRAINER_SIDE / "cpu_ranks.py").is_file() and argv[-2:] == ["--device", "cpu"]


def test_a_free_port_is_one_nobody_listens_on() -> None:
    import socket

    port = free_port()
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as taken:
        taken.bind(("127.0.0.1", port))  # raises when it was not free


def test_impossible_counts_are_refused_in_one_line(checkout: Path, tmp_path: Path) -> None:
    with pytest.raises(BadInput, match="at least 1 process"):
        _command(LtxBackend(checkout), tmp_path, num_processes=0)
    with pytest.raises(BadInput, match="one process, not 2"):
        ReferenceBackend().preprocess_command(tmp_path / "d.json", "64x64x17", tmp_path / "out", model_path="m",
                                              text_encoder_path="m", num_processes=2)
    assert LtxBackend(checkout).capabilities.shards_preprocessing
    assert not ReferenceBackend().capabilities.shards_preprocessing
    with pytest.raises(ValueError, match="preprocess_processes"):
        RunRequest.model_validate({"dataset": ".", "preprocess_processes": 0})
    assert RunRequest.model_validate({"dataset": ".", "preprocess_processes": 2}).preprocess_processes == 2


@pytest.mark.parametrize(("shards", "asked", "gpus", "count"), [
    (True, None, 8, 8), (True, None, 1, 1), (True, None, 0, 1),  # auto: one per GPU here, one without
    (True, 2, 8, 2), (True, 4, 2, 2), (True, 2, 0, 2),  # asked: capped at the GPUs, CPU ranks without any
    (False, None, 8, 1), (False, 4, 0, 1),  # the toy's scripts run one process
])
def test_the_budget_is_one_rank_per_gpu_here_or_what_was_asked(shards: bool, asked: int | None, gpus: int,
                                                               count: int) -> None:
    assert choose_processes(shards=shards, asked=asked, gpus=gpus).count == count


def test_a_command_never_starts_more_ranks_than_rows_and_one_rank_reads_as_before() -> None:
    budget = ProcessBudget(8, "one per GPU: 8 visible")
    assert [budget.for_rows(rows) for rows in (0, 1, 3, 8, 100)] == [1, 1, 3, 8, 8]
    assert budget.words(1) == ""
    toy = choose_processes(shards=False, asked=4, gpus=0)  # asked for, and not possible: said, not dropped silently
    assert toy.words(1) == " One process: this backend's preprocessing runs one process."
    assert budget.words(8) == " 8 processes under accelerate launch share its rows (one per GPU: 8 visible)."
    assert budget.words(3).endswith("(one per GPU: 8 visible; no more than its 3 rows).")


def _ctx(probe: GpuProbe, asked: int | None = None, backend: Any = None) -> SimpleNamespace:
    return SimpleNamespace(backend=backend or LtxBackend(None), request=SimpleNamespace(preprocess_processes=asked),
                           output=lambda _type: SimpleNamespace(gpus=probe))


def test_the_run_counts_the_probes_visible_gpus_of_this_machine_only(monkeypatch: pytest.MonkeyPatch) -> None:
    four = parse_assumed_gpu(f"{H100},4")
    probed = GpuProbe(source="nvidia-smi", assumed=False, all_gpus=tuple(four), gpus=tuple(four[1:3]),
                      cuda_visible_devices="1,2")
    assumed = GpuProbe(source="--assume-gpu", assumed=True, all_gpus=tuple(four), gpus=tuple(four))
    monkeypatch.setattr("ltx_pipeline.preprocessing.processes.cuda_present", lambda: True)
    assert process_budget(_ctx(probed)).count == 2  # CUDA_VISIBLE_DEVICES=1,2 of 4
    assert process_budget(_ctx(assumed)).count == 1  # a plan for other hardware: no GPU of this machine
    assert process_budget(_ctx(probed, backend=ReferenceBackend())).count == 1
    monkeypatch.setattr("ltx_pipeline.preprocessing.processes.cuda_present", lambda: False)
    assert process_budget(_ctx(probed)).count == 1  # no CUDA here, whatever was probed
    assert process_budget(_ctx(probed, asked=2)).count == 2  # CPU ranks, asked for


class _ShardingToy(ReferenceBackend):
    """The toy trainer, claiming to shard: it records the ranks asked for and runs one process."""

    capabilities = dataclasses.replace(ReferenceBackend.capabilities, shards_preprocessing=True)

    def __init__(self) -> None:
        super().__init__()
        self.asked: list[int] = []

    def preprocess_command(self, *args: Any, num_processes: int = 1, **kwargs: Any) -> Any:
        self.asked.append(num_processes)
        return super().preprocess_command(*args, **kwargs)


@pytest.mark.parametrize("inside", [True, False], ids=["from-cache", "whole"])
def test_the_engine_asks_the_backend_for_its_ranks_and_narrates_them(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                      inside: bool) -> None:
    pytest.importorskip("torch")
    from ltx_pipeline.ltx.buckets import parse_buckets
    from ltx_pipeline.ltx.modes import get_mode
    from ltx_pipeline.preprocessing.run import preprocess
    from ltx_pipeline.reference_trainer import make_base
    from ltx_pipeline.workspace import RunPaths
    from tests.reference_trainer.conftest import PreprocessContext, write_dataset

    monkeypatch.setattr("ltx_pipeline.preprocessing.processes.cuda_present", lambda: False)
    base = tmp_path / "base.safetensors"
    assert make_base.main([str(base), "--seed", "0"]) == 0
    dataset = write_dataset(tmp_path / "data", [(f"clip{i}.mp4", 17, True) for i in range(3)])
    backend = _ShardingToy()
    paths = RunPaths(tmp_path / "ws" / "r1")
    ctx = PreprocessContext(workspace=tmp_path / "ws", paths=paths, backend=backend,
                            request=SimpleNamespace(trigger=None, preprocess_processes=2))
    output = paths.dataset / ".precomputed" if inside else ctx.workspace / "elsewhere" / ".precomputed"
    report = preprocess(ctx, mode=get_mode("t2v"), metadata_file=dataset, buckets=parse_buckets("64x64x17"),
                        output_dir=output, stage=1, model_path=str(base), text_encoder_path=str(base),
                        extra_flags=[])
    assert report["samples"] == 3 and backend.asked == [2]
    told = " 2 processes under accelerate launch share its rows (preprocess_processes 2: CPU ranks, no GPU here)."
    assert any(m.endswith(told) for m in ctx.said), ctx.said
    one = write_dataset(tmp_path / "one", [("solo.mp4", 17, True)])
    backend.asked.clear()
    preprocess(ctx, mode=get_mode("t2v"), metadata_file=one, buckets=parse_buckets("64x64x17"),
               output_dir=ctx.workspace / "solo" / ".precomputed", stage=2, model_path=str(base),
               text_encoder_path=str(base), extra_flags=[])
    assert backend.asked == [1]  # one row: one rank, whatever the budget
