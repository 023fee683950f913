"""Issue 18: ``run --nodes 2 --slurm`` trains for real through the sbatch script, srun and ``node-launch``.

Only the cluster's edge is fake: ``sbatch`` runs the script in the background as a job would (job id,
node list, restart count in its environment), ``srun`` starts the per-node command once per "node" on
this machine with ``SLURM_NODEID`` set and its output in the ``--output`` file, ``squeue``/``sacct``
report the job from whether it is still running and how it exited, ``scontrol`` names 127.0.0.1 as the
first node. Everything between them is the product: the script, ``node-launch --prepare``, two
``node-launch`` processes starting accelerate with machine ranks 0 and 1 (gloo over 127.0.0.1), the
engine following node 0's log and judging the job's end.
"""

from __future__ import annotations

import json
import os
import socket
import sys
from pathlib import Path

import pytest

from ltx_pipeline.cli import main
from tests.conftest import H100_SMI
from tests.phases.train_helpers import (  # noqa: F401 - training_registered is a fixture
    REPO,
    mp4_clips,
    reference_args,
    store_of,
    training_registered,
)

_HEAD = f"""#!{sys.executable}
import json, os, subprocess, sys
from pathlib import Path
state = Path(os.environ["FAKE_SLURM_DIR"])
argv = sys.argv
"""

FAKES = {
    # Submits by starting the script under bash in its own session; the exit status lands in exit.<job>.
    "sbatch": """
if argv[1] == "--run-job":
    script, job = argv[2], argv[3]
    with open(state / f"batch.{job}.out", "ab") as out:
        code = subprocess.run(["bash", script], stdout=out, stderr=subprocess.STDOUT).returncode
    (state / f"exit.{job}").write_text(str(code))
    sys.exit(0)
job = (state / "next_job").read_text().strip()
env = {**os.environ, "SLURM_JOB_ID": job, "SLURM_JOB_NODELIST": "node[0-1]", "SLURM_NNODES": "2",
       "SLURM_RESTART_COUNT": "0"}
child = subprocess.Popen([sys.executable, argv[0], "--run-job", argv[-1], job], env=env, start_new_session=True,
                         stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
(state / f"pid.{job}").write_text(str(child.pid))
print(job)
""",
    "squeue": """
job = argv[argv.index("-j") + 1]
running = (state / f"pid.{job}").exists() and not (state / f"exit.{job}").exists()
print("RUNNING" if running else "", end="")
""",
    "sacct": """
job = argv[argv.index("-j") + 1]
done = state / f"exit.{job}"
if done.exists():
    code = int(done.read_text())
    print(f"COMPLETED|0:0" if code == 0 else f"FAILED|{code}:0")
""",
    "scontrol": """
print("127.0.0.1")
""",
    # One process per node, each with its SLURM_NODEID and its own --output file (%n = the node's number).
    "srun": """
first = next(i for i, a in enumerate(argv) if i > 0 and not a.startswith("-"))
options, command = argv[1:first], argv[first:]
nodes = int(next(o for o in options if o.startswith("--nodes=")).split("=", 1)[1])
output = next(o for o in options if o.startswith("--output=")).split("=", 1)[1]
children = []
for node in range(nodes):
    log = open(output.replace("%n", str(node)), "ab")
    children.append(subprocess.Popen(command, env={**os.environ, "SLURM_NODEID": str(node)}, stdout=log,
                                     stderr=subprocess.STDOUT))
# --kill-on-bad-exit: one node failing ends the others (they would wait at the rendezvous forever).
import time
while any(child.poll() is None for child in children):
    if any(child.poll() not in (None, 0) for child in children):
        for child in children:
            if child.poll() is None:
                child.kill()
    time.sleep(0.2)
sys.exit(max(child.returncode for child in children))
""",
}


def _free_port_for_a_job() -> int:
    """A free port the script will derive from the job id (20000 + id % 20000)."""
    for port in range(29_100, 39_999):
        with socket.socket() as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise RuntimeError("no free port")


@pytest.mark.long  # 23 s on 2 cores (2026-12-06): in the opt-in long suite, `-m long`
def test_a_two_node_slurm_job_trains_through_node_launch_and_the_engine_judges_it(
        workspace, tmp_path, fake_smi, monkeypatch, capsys, training_registered):  # noqa: F811
    state, bin_dir = tmp_path / "slurm-state", tmp_path / "slurm-bin"
    state.mkdir()
    bin_dir.mkdir()
    for name, body in FAKES.items():
        path = bin_dir / name
        path.write_text(_HEAD + body)
        path.chmod(0o755)
    job = _free_port_for_a_job() - 20_000
    (state / "next_job").write_text(str(job))
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("FAKE_SLURM_DIR", str(state))
    monkeypatch.setenv("PYTHONPATH", str(REPO))
    monkeypatch.setenv("LTX_REFERENCE_LOG_EVERY", "1")  # a Step line at every step
    monkeypatch.setenv("LTX_PIPELINE_SLURM_POLL_S", "0.5")

    args = reference_args(workspace, mp4_clips(tmp_path / "data", n=4), fake_smi(H100_SMI), "--nodes", "2",
                          "--processes", "1", "--steps", "2", "--slurm")
    code = main(args)
    printed = capsys.readouterr()
    batch = (state / f"batch.{job}.out").read_text() if (state / f"batch.{job}.out").exists() else ""
    assert code == 0, printed.out[-3000:] + printed.err[-2000:] + batch[-3000:]
    assert f"submitted to SLURM as job {job}" in printed.out

    # The batch step resumed first (nothing to resume yet), then both nodes trained to the end.
    assert (state / f"exit.{job}").read_text() == "0", batch[-3000:]
    assert f"main process 127.0.0.1:{job + 20_000}" in batch
    logs = workspace / "r1" / "logs"
    node0, node1 = (logs / "train.node0.log").read_text(), (logs / "train.node1.log").read_text()
    assert "--machine_rank 0" in node0 and "--machine_rank 1" in node1
    for text in (node0, node1):  # srun's --output is the node's log: each line is in it once
        assert text.count("Step 2/2") == 1 and text.count("=== trainer exited 0 ===") == 1

    store, run = store_of(workspace)
    [process] = store.processes(run.id, "train")
    assert process.host == f"slurm:{job}"
    train = store.latest_phase_runs(run.id)["train"].outputs
    stage = train["stages"][0]
    assert stage["final_step"] == 2
    assert Path(stage["final_checkpoint"]).name == "lora_weights_step_00002.safetensors"
    assert Path(stage["final_checkpoint"]).is_file()
    assert [m.step for m in store.metrics(run.id)] == [1, 2]

    status = main(["status", "--workspace", str(workspace), "--run", "r1", "--json"])
    assert status == 0
    [shown] = json.loads(capsys.readouterr().out)["runs"]
    assert shown["state"] == "finished", sorted(shown)
    assert shown["training"]["slurm"]["job_id"] == job and shown["training"]["slurm"]["text"].startswith("COMPLETED")
