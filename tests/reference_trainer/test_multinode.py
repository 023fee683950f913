"""Two "nodes" on one machine: two ``accelerate launch`` processes (machine ranks 0 and 1, gloo over
127.0.0.1) run the reference trainer as real DDP, and train exactly as one node with two processes."""

from __future__ import annotations

import os
import re
import socket
import subprocess
from pathlib import Path

import pytest
import torch
import yaml
from conftest import REPO
from safetensors.torch import load_file

from ltx_pipeline.backends.base import LaunchSpec, Nodes
from ltx_pipeline.backends.reference import ReferenceBackend

STEPS = 3
_LOSS = re.compile(r"Step (\d+)/\d+ - Loss: ([0-9.]+)")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _start(spec: LaunchSpec) -> subprocess.Popen:
    env = {**os.environ, **spec.env, "PYTHONPATH": str(REPO), "LTX_REFERENCE_DEVICE": "cpu",
           "LTX_REFERENCE_LOG_EVERY": "1", "CUDA_VISIBLE_DEVICES": "", "OMP_NUM_THREADS": "1"}
    for inherited in ("LOCAL_RANK", "RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"):
        env.pop(inherited, None)
    return subprocess.Popen(list(spec.argv), cwd=spec.cwd, env=env, stdout=subprocess.PIPE,  # noqa: S603
                            stderr=subprocess.STDOUT, text=True)


def _finish(process: subprocess.Popen) -> str:
    try:
        output, _ = process.communicate(timeout=150)
    except subprocess.TimeoutExpired:
        process.kill()
        output, _ = process.communicate()
    assert process.returncode == 0, output[-3000:]
    return output


def _losses(output: str) -> dict[int, float]:
    return {int(step): float(loss) for step, loss in _LOSS.findall(output)}


def _initial_lora(project) -> Path:
    """One LoRA initialisation for both runs: the trainer adds LoRA before it seeds (as ltx-trainer does),
    so two runs otherwise start from different random ``lora_A`` matrices."""
    from ltx_pipeline.reference_trainer import checkpoints
    from ltx_pipeline.reference_trainer.lora import add_lora
    from ltx_pipeline.reference_trainer.model import load_base

    torch.manual_seed(0)
    model = add_lora(load_base(project.base, torch.float32), rank=4, alpha=4, dropout=0.0,
                     target_modules=["to_k", "to_q", "to_v", "to_out.0"])
    saved = checkpoints.save_weights(model, "lora", 0, project.root / "initial", "float32")
    return saved.rename(saved.with_name("initial_lora.safetensors"))  # no step in the name: no state to resume


@pytest.mark.long  # two launchers, a rendezvous and a toy training: 22 s on 2 cores
def test_two_nodes_train_as_one_node_with_the_same_processes(project) -> None:
    backend = ReferenceBackend()
    common = {"optimization": {"steps": STEPS}, "validation": {"interval": None},
              "model": {**yaml.safe_load(project.config().read_text())["model"],
                        "load_checkpoint": str(_initial_lora(project))}}
    single_config = project.config("one-node.yaml", output_dir=str(project.root / "one-node"), **common)
    multi_config = project.config("two-nodes.yaml", output_dir=str(project.root / "two-nodes"), **common)

    # One node, two processes: the DDP launch every single-node multi-process run makes today.
    single = _start(backend.train_command(single_config, num_processes=2, distributed="ddp"))

    # Two nodes of one process each, meeting at rank 0's address: what `run --nodes 2` launches on
    # rank 0 and what `node-launch --machine-rank 1` launches on the other node.
    port = _free_port()
    specs = [backend.train_command(multi_config, num_processes=1, distributed="ddp",
                                   nodes=Nodes(2, rank, "127.0.0.1", port)) for rank in (0, 1)]
    assert "--machine_rank" in specs[1].argv and specs[1].argv[specs[1].argv.index("--machine_rank") + 1] == "1"
    assert specs[0].argv[specs[0].argv.index("--num_processes") + 1] == "2"  # accelerate counts all machines
    started = [_start(spec) for spec in specs]
    rank0, rank1, single = (_finish(process) for process in (*started, single))

    assert "MULTI_CPU distributed training enabled with 2 processes" in rank0
    assert " - Number of processes: 2" in rank0 and " - Global batch size: 2" in rank0
    one, two = _losses(single), _losses(rank0)
    print(f"one node x 2 processes: {one}\ntwo nodes x 1 process:  {two}")
    # Same seed, same global ranks (machine rank x processes per node + local rank), so the same data
    # shards and noise; gloo sums two gradients, which is order-free. The losses are printed with 4
    # decimals: they must agree to that precision, and the trained weights to float32 round-off.
    assert sorted(one) == sorted(two) == list(range(1, STEPS + 1))
    assert all(abs(one[step] - two[step]) <= 1e-4 for step in one), (one, two)
    assert sorted(_losses(rank1)) == sorted(two)  # node 1's local rank 0 logs its steps into its node's log
    name = f"lora_weights_step_{STEPS:05d}.safetensors"
    weights_one = load_file(str(project.root / "one-node" / "checkpoints" / name))
    weights_two = load_file(str(project.root / "two-nodes" / "checkpoints" / name))
    assert weights_one.keys() == weights_two.keys() and weights_one
    assert all(torch.allclose(weights_one[k].float(), weights_two[k].float(), atol=1e-6) for k in weights_one)
