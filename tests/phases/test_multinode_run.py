"""A run over ``--nodes 2`` (#18): the plan states every process of every node, validate judges the batch
for all of them and records each node's launch, the engine launches rank 0 and names the other
node's command, and ``ltx-pipeline node-launch`` starts that node, refusing what it must."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from ltx_pipeline.checkpoints.files import resume_restores
from ltx_pipeline.cli import main
from tests.conftest import H100_SMI
from tests.phases.train_helpers import REPO, drive_until_validate, mp4_clips, reference_args, resume, store_of

CLI = "import sys; from ltx_pipeline.cli import main; main(sys.argv[1:])"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _node_args(workspace: Path, *extra: str) -> list[str]:
    return ["node-launch", "--workspace", str(workspace), "--run", "r1", *extra]


def test_two_nodes_are_planned_and_validated_for_every_process(workspace, tmp_path, fake_smi, monkeypatch):
    args = reference_args(workspace, mp4_clips(tmp_path / "data", n=4), fake_smi(H100_SMI), "--nodes", "2",
                          "--main-ip", "10.1.2.3", "--main-port", "29611", "--processes", "1",
                          "--effective-batch", "4")
    assert drive_until_validate(monkeypatch, args) == 0
    plan = (workspace / "r1" / "plan.md").read_text()
    assert "- Launch: accelerate launch on 2 nodes: 2 node(s) x 1 process(es) = 2 processes, DDP;" in plan
    assert "- Effective batch: 4 = batch 1 x accumulation 2 x 2 process(es) (2 node(s) x 1 process(es))" in plan
    assert "hosts the rendezvous at 10.1.2.3:29611" in plan
    store, run = store_of(workspace)
    validate = store.latest_phase_runs(run.id)["validate"].outputs
    assert (validate["num_processes"], validate["processes_per_node"], validate["nodes"]) == (2, 1, 2)
    argv = validate["stages"][0]["launch"]["argv"]  # rank 0's, on this machine
    assert argv[argv.index("--machine_rank") + 1] == "0" and argv[argv.index("--num_processes") + 1] == "2"
    assert argv[argv.index("--main_process_ip") + 1] == "10.1.2.3"
    [other] = validate["other_nodes"]
    assert other["rank"] == 1 and other["command"].endswith(
        "--run r1 --machine-rank 1 --main-ip 10.1.2.3 --main-port 29611")
    config = yaml.safe_load((workspace / "r1" / "config.yaml").read_text())["optimization"]
    assert config["batch_size"] * config["gradient_accumulation_steps"] * 2 == 4

    # node-launch refuses a rank outside the launch, and a node with no rank at all (no SLURM_NODEID).
    monkeypatch.delenv("SLURM_NODEID", raising=False)
    assert main(_node_args(workspace, "--machine-rank", "2")) == 2
    assert main(_node_args(workspace)) == 2


def test_validation_counts_the_processes_of_every_node_against_the_samples(workspace, tmp_path, fake_smi,
                                                                           monkeypatch, capsys):
    # 3 samples, 2 nodes x 2 processes: batch 1 x 4 processes leaves every epoch with zero batches.
    args = reference_args(workspace, mp4_clips(tmp_path / "data", n=3), fake_smi(H100_SMI), "--nodes", "2",
                          "--main-ip", "127.0.0.1", "--processes", "2", "--effective-batch", "4")
    assert drive_until_validate(monkeypatch, args) != 0
    assert "1 x 4 process(es)" in capsys.readouterr().err
    store, run = store_of(workspace)
    assert store.latest_phase_runs(run.id)["validate"].status == "failed"
    assert main(_node_args(workspace, "--machine-rank", "1")) == 2  # not validated: nothing to join


def test_prepare_resumes_the_stage_from_its_newest_complete_pair(workspace, tmp_path, fake_smi, monkeypatch,
                                                                   capsys):
    """What a requeued SLURM job runs on its batch node before the nodes start: no restart at step 0."""
    from ltx_pipeline.training.resume import config_fingerprint

    args = reference_args(workspace, mp4_clips(tmp_path / "data", n=4), fake_smi(H100_SMI), "--nodes", "2",
                          "--main-ip", "127.0.0.1", "--processes", "1", "--steps", "4")
    assert drive_until_validate(monkeypatch, args) == 0
    assert main(_node_args(workspace, "--prepare")) == 0
    assert "no complete checkpoint pair: it trains from step 0" in capsys.readouterr().out
    config = workspace / "r1" / "config.yaml"
    values = yaml.safe_load(config.read_text())
    folder = Path(values["output_dir"]) / "checkpoints"
    folder.mkdir(parents=True)
    weights = folder / "lora_weights_step_00002.safetensors"
    weights.write_bytes(b"weights")
    (folder / "training_state_step_00002.pt").write_text(json.dumps(
        {"global_step": 2, "config_fingerprint": config_fingerprint(values)}))
    (folder / "lora_weights_step_00003.safetensors").write_bytes(b"")  # no state beside it: not a pair

    assert main(_node_args(workspace, "--prepare")) == 0
    printed = capsys.readouterr().out
    assert f"model.load_checkpoint None -> {weights}" in printed and "resumes from its checkpoint at step 2" in printed
    # A LoRA run saves the trainer's full state (optimizer included), and the resume says what that restores.
    assert values["checkpoints"]["save_training_state"] == "full" and resume_restores("full") in printed
    assert yaml.safe_load(config.read_text())["model"]["load_checkpoint"] == str(weights)


@pytest.fixture
def train_without_autotune(monkeypatch: pytest.MonkeyPatch) -> None:
    import phases

    monkeypatch.setattr(phases, "PHASES", tuple(p for p in phases.PHASES
                                                if p.name not in ("autotune", "monitor", "evaluate")))


@pytest.mark.long  # 18 s on 2 cores (2026-12-06): in the opt-in long suite, `-m long`
@pytest.mark.usefixtures("train_without_autotune")
def test_the_engine_launches_rank_0_and_node_launch_starts_rank_1(workspace, tmp_path, fake_smi, capsys,
                                                                  monkeypatch):
    monkeypatch.setenv("LTX_REFERENCE_LOG_EVERY", "1")  # a step line at every step, on both nodes
    port = _free_port()
    args = reference_args(workspace, mp4_clips(tmp_path / "data", n=4), fake_smi(H100_SMI), "--nodes", "2",
                          "--main-ip", "127.0.0.1", "--main-port", str(port), "--processes", "1",
                          "--steps", "2", "--detach")
    assert main(args) == 0
    printed = capsys.readouterr().out
    command = f"--run r1 --machine-rank 1 --main-ip 127.0.0.1 --main-port {port}"
    assert "Rank 0 of 2 nodes waits for the others" in printed and command in printed
    store, run = store_of(workspace)
    [rank0] = store.processes(run.id, "train")
    assert "--machine_rank 0" in rank0.printable

    assert main(_node_args(workspace, "--machine-rank", "0")) == 4  # rank 0 is the engine's, running already
    # Rank 0 trains with the config as validated: a node whose config differs is refused.
    config = workspace / "r1" / "config.yaml"
    original = config.read_text()
    config.write_text(original.replace("seed: 42", "seed: 43"))
    assert main(_node_args(workspace, "--machine-rank", "1")) == 4
    assert "changed since rank 0 was launched with it" in capsys.readouterr().err
    config.write_text(original)

    env = {**os.environ, "PYTHONPATH": str(REPO), "SLURM_NODEID": "1"}  # the rank as srun gives it
    node = subprocess.run([sys.executable, "-c", CLI, *_node_args(workspace)],  # noqa: S603
                          capture_output=True, text=True, env=env, timeout=240, check=False)
    assert node.returncode == 0, node.stdout[-2000:] + node.stderr[-2000:]
    assert "--machine_rank 1" in node.stdout and "Step 2/2" in node.stdout
    log = workspace / "r1" / "logs" / "train.node1.log"
    assert "Step 2/2" in log.read_text() and "=== trainer exited 0 ===" in log.read_text()

    assert resume(workspace) == 0  # follows rank 0 to its end and judges it
    train = store.latest_phase_runs(run.id)["train"].outputs
    assert train["stages"][0]["final_step"] == 2
    assert Path(train["stages"][0]["final_checkpoint"]).name == "lora_weights_step_00002.safetensors"
