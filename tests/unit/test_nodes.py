"""Multi-node launches (#18): the accelerate argv of each node, the plan's words and the request's rules."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from ltx_pipeline.backends.base import Nodes
from ltx_pipeline.backends.ltx import LtxBackend
from ltx_pipeline.backends.reference import ReferenceBackend
from ltx_pipeline.errors import BadInput, BadRequest
from ltx_pipeline.ltx.buckets import parse_buckets
from ltx_pipeline.ltx.launch_plan import launch_shape
from ltx_pipeline.ltx.modes import get_mode
from ltx_pipeline.ltx.recipe import build_recipe
from ltx_pipeline.ltx.tiers import Tier
from ltx_pipeline.request import build_request
from ltx_pipeline.training.nodes import node_launch_argv, node_log
from tests.conftest import make_tree

TRAINER = "packages/ltx-trainer"


def _flag(argv: tuple[str, ...], name: str) -> str:
    return argv[argv.index(name) + 1]


@pytest.fixture
def checkout(tmp_path: Path) -> Path:
    root = tmp_path / "LTX-2"
    make_tree(root, {f"{TRAINER}/configs/accelerate/{n}.yaml": "x: 1\n" for n in ("ddp", "fsdp")})
    return root


@pytest.mark.parametrize(("training_mode", "preset"), [("lora", "ddp.yaml"), ("full", "fsdp.yaml")])
def test_ltx_two_nodes_launch_the_trainers_preset_with_the_machine_flags(checkout, tmp_path, training_mode,
                                                                          preset) -> None:
    shape = launch_shape(backend="ltx", gpu_count=4, requested=None, training_mode=training_mode, nodes=2)
    assert (shape.processes, shape.total, shape.distributed) == (4, 8, preset.removesuffix(".yaml"))
    config = tmp_path / "config.yaml"
    for rank in (0, 1):
        spec = LtxBackend(checkout, uv="uv").train_command(config, num_processes=shape.processes,
                                                           distributed=shape.distributed,
                                                           nodes=Nodes(2, rank, "10.0.0.1", 29511))
        trainer_dir = checkout.resolve() / TRAINER
        assert spec.argv[:6] == ("uv", "run", "--directory", str(trainer_dir), "accelerate", "launch")
        # accelerate's --num_processes is the total over every machine: it starts total // machines on each.
        assert _flag(spec.argv, "--num_processes") == "8"
        assert _flag(spec.argv, "--config_file") == str(trainer_dir / "configs" / "accelerate" / preset)
        assert (_flag(spec.argv, "--num_machines"), _flag(spec.argv, "--machine_rank"),
                _flag(spec.argv, "--main_process_ip"), _flag(spec.argv, "--main_process_port")) == (
                    "2", str(rank), "10.0.0.1", "29511")
        assert spec.argv[-3:] == ("scripts/train.py", str(config.resolve()), "--disable-progress-bars")
        assert spec.argv.index("--main_process_port") < spec.argv.index("scripts/train.py")


def test_one_node_keeps_the_single_machine_command(checkout, tmp_path) -> None:
    backend = LtxBackend(checkout, uv="uv")
    config = tmp_path / "config.yaml"
    alone = backend.train_command(config, num_processes=2, distributed="ddp")
    assert backend.train_command(config, num_processes=2, distributed="ddp",
                                 nodes=Nodes(1, 0, "127.0.0.1")).argv == alone.argv
    assert "--num_machines" not in alone.argv


def test_reference_and_simulated_backends_over_nodes(tmp_path) -> None:
    config = tmp_path / "config.yaml"
    spec = ReferenceBackend().train_command(config, num_processes=1, distributed="ddp",
                                            nodes=Nodes(2, 1, "127.0.0.1", 29600))
    assert spec.argv[:4] == (sys.executable, "-m", "accelerate.commands.launch", "--multi_gpu")
    assert (_flag(spec.argv, "--num_processes"), _flag(spec.argv, "--machine_rank")) == ("2", "1")
    # One process on each of two nodes is two processes: a distributed mode is needed.
    with pytest.raises(BadInput, match="2 processes need a distributed mode"):
        ReferenceBackend().train_command(config, nodes=Nodes(2, 0, "127.0.0.1"))
    with pytest.raises(BadInput, match="does not exist in a launch over 2 node"):
        Nodes(2, 2, "127.0.0.1")


def test_the_plan_counts_every_process_of_every_node() -> None:
    shape = launch_shape(backend="reference", gpu_count=1, requested=2, training_mode="lora", nodes=3)
    assert shape.words().startswith("accelerate launch on 3 nodes: 3 node(s) x 2 process(es) = 6 processes, DDP;")
    recipe = build_recipe(mode=get_mode("t2v"), tier=Tier("80", "80 GB", "standard"), gpu_count=1, launch=shape,
                          training_mode="lora", strategy="single", stages=[parse_buckets("64x64x17")],
                          buckets_given=True, rank=None, steps=None, learning_rate=None, effective_batch=12)
    # batch x accumulation x (nodes x processes per node) is the effective batch asked for.
    assert (recipe.knobs["batch_size"], recipe.knobs["gradient_accumulation_steps"], recipe.num_processes) == (1, 2, 6)
    assert recipe.effective_batch == 12


def test_the_request_needs_the_rank0_address_and_a_backend_that_spans_machines(tmp_path) -> None:
    base = {"dataset": str(tmp_path), "backend": "reference"}
    with pytest.raises(BadRequest, match="--nodes 2 needs --main-ip"):
        build_request({**base, "nodes": 2})
    request = build_request({**base, "nodes": 2, "main_ip": "10.0.0.1"})
    assert (request.nodes, request.main_port) == (2, None)
    with pytest.raises(BadRequest, match="simulated' runs on one machine"):
        build_request({**base, "backend": "simulated", "surface": str(tmp_path / "s.yaml"), "nodes": 2,
                       "main_ip": "10.0.0.1"})
    assert build_request(base).nodes == 1


def test_node_launch_commands_and_logs(tmp_path) -> None:
    nodes = Nodes(3, 0, "10.0.0.1", 29500)
    assert node_launch_argv(tmp_path, "r1", 2, nodes) == [
        "ltx-pipeline", "node-launch", "--workspace", str(tmp_path), "--run", "r1", "--machine-rank", "2",
        "--main-ip", "10.0.0.1", "--main-port", "29500"]
    assert node_launch_argv(tmp_path, "r1")[-2:] == ["--run", "r1"]  # under SLURM: the rank from SLURM_NODEID
    assert node_log(tmp_path, 1, 1, 2).name == "train.node2.log"
    assert node_log(tmp_path, 2, 3, 1).name == "train.stage-2.node1.log"
