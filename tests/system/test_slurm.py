"""Issue 18 (c): ``--slurm`` writes a per-stage sbatch script, submits it, follows the job; ``status`` reads it.

Fakes only at the cluster's edge: ``sbatch``, ``squeue``, ``sacct``, ``scontrol``, ``srun`` and ``scancel``
are small Python programs first on ``PATH`` that record their argv and environment (JSON lines) and
answer from state files the test writes (the queue, accounting). ``node-launch`` (the multi-node
launcher) is never run: the script is run under bash with a recording launcher in its place.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from ltx_pipeline.cli import main
from ltx_pipeline.slurm import SlurmJob, render_script, stage_job, write_script
from ltx_pipeline.slurm.queue import parse_sacct
from tests.phases.train_helpers import (  # noqa: F401 - training_registered is a fixture
    clips,
    resume,
    simulated_args,
    store_of,
    training_registered,
)
from tests.postgres import new_database

JOB = 4242

_COMMON = f"""#!{sys.executable}
import json, os, sys
from pathlib import Path
state = Path(os.environ["FAKE_SLURM_DIR"])
def record(kind, **fields):
    with open(state / "calls.jsonl", "a") as handle:
        handle.write(json.dumps({{"kind": kind, **fields}}) + "\\n")
argv = sys.argv
"""

FAKES = {
    "sbatch": """
record("sbatch", argv=argv, cwd=os.getcwd(), script=Path(argv[-1]).read_text(),
       env={k: os.environ.get(k) for k in ("LTX_PIPELINE_STORE", "FAKE_MARK")})
if (state / "sbatch.refuse").exists():
    print("sbatch: error: invalid partition specified: nope", file=sys.stderr)
    sys.exit(1)
number = state / "next_job"
job = int(number.read_text()) if number.exists() else 4242
number.write_text(str(job + 1))
(state / f"queue.{job}").write_text("PENDING")
print(f"{job};cluster1" if (state / "cluster").exists() else job)
""",
    "squeue": """
record("squeue", argv=argv)
job = argv[argv.index("-j") + 1]
queue = state / f"queue.{job}"
print(queue.read_text() if queue.exists() else "", end="")
""",
    "sacct": """
record("sacct", argv=argv)
job = argv[argv.index("-j") + 1]
acct = state / f"acct.{job}"
print(acct.read_text() if acct.exists() else "", end="")
""",
    "scancel": """
record("scancel", argv=argv)
(state / f"queue.{argv[1]}").unlink(missing_ok=True)
(state / f"acct.{argv[1]}").write_text("CANCELLED by 1000|0:15\\n")
""",
    "scontrol": """
assert argv[1:3] == ["show", "hostnames"], argv
record("scontrol", argv=argv)
print("\\n".join(os.environ["FAKE_NODES"].split(",")))
""",
    # One record per node instead of running the per-node command: its argv, rank and output file.
    "srun": """
first = next(i for i, a in enumerate(argv) if i > 0 and not a.startswith("-"))  # srun's options end there
options, command = argv[1:first], argv[first:]
nodes = int(next(o for o in options if o.startswith("--nodes=")).split("=", 1)[1])
output = next(o for o in options if o.startswith("--output=")).split("=", 1)[1]
record("srun", argv=argv)
for node in range(nodes):
    record("node", argv=command, output=output.replace("%n", str(node)),
           env={"SLURM_NODEID": str(node), "SLURM_JOB_ID": os.environ["SLURM_JOB_ID"]})
""",
    "launcher": """
record("launcher", argv=argv[1:], env={"SLURM_JOB_ID": os.environ.get("SLURM_JOB_ID")})
""",
}


class Cluster:
    """The fakes' folder and state: what was called, and what the queue and accounting say."""

    def __init__(self, root: Path, names: tuple[str, ...]) -> None:
        self.bin, self.state = root / "bin", root / "state"
        self.bin.mkdir(parents=True)
        self.state.mkdir()
        for name in names:
            path = self.bin / name
            path.write_text(_COMMON + FAKES[name])
            path.chmod(0o755)

    def calls(self, kind: str) -> list[dict]:
        log = self.state / "calls.jsonl"
        lines = log.read_text().splitlines() if log.exists() else []
        return [c for c in map(json.loads, lines) if c["kind"] == kind]

    def queue(self, state: str | None, job: int = JOB) -> None:
        path = self.state / f"queue.{job}"
        path.write_text(state) if state else path.unlink(missing_ok=True)

    def accounting(self, line: str, job: int = JOB) -> None:
        self.queue(None, job)
        (self.state / f"acct.{job}").write_text(line + "\n")


def _cluster(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, names: tuple[str, ...]) -> Cluster:
    cluster = Cluster(tmp_path / "slurm-fakes", names)
    monkeypatch.setenv("FAKE_SLURM_DIR", str(cluster.state))
    monkeypatch.setenv("PATH", f"{cluster.bin}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("LTX_PIPELINE_SLURM_POLL_S", "0")  # every liveness check asks the (fake) queue
    return cluster


@pytest.fixture
def cluster(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Cluster:
    return _cluster(tmp_path, monkeypatch, tuple(FAKES))


def _job(tmp_path: Path, **overrides: object) -> SlurmJob:
    ws = tmp_path / "ws"
    values: dict = dict(name="ltx-r1", nodes=2, gpus_per_node=8, workspace=ws, run="r1", stage=1, stages=1,
                        launcher=(str(tmp_path / "slurm-fakes" / "bin" / "launcher"),),
                        batch_output=ws / "r1" / "slurm" / "%x-%j.out",
                        node_log=ws / "r1" / "logs" / "train.node%n.log",
                        extra=("--partition=gpu", "--time=24:00:00"))
    return SlurmJob(**{**values, **overrides})


# -- the script ---------------------------------------------------------------------------------------


def test_the_script_asks_for_one_task_per_node_with_the_plans_gpus_and_passes_user_options_verbatim(tmp_path):
    text = render_script(_job(tmp_path))
    sbatch = [line for line in text.splitlines() if line.startswith("#SBATCH")]
    ws = tmp_path / "ws"
    assert sbatch == ["#SBATCH --job-name=ltx-r1", "#SBATCH --nodes=2", "#SBATCH --ntasks-per-node=1",
                      "#SBATCH --gpus-per-node=8", "#SBATCH --requeue", "#SBATCH --open-mode=append",
                      f"#SBATCH --output={ws}/r1/slurm/%x-%j.out", "#SBATCH --partition=gpu",
                      "#SBATCH --time=24:00:00"]
    assert text.startswith("#!/bin/bash\n") and "set -euo pipefail" in text
    subprocess.run(["bash", "-n"], input=text, text=True, check=True)  # it parses as bash
    for unfit in ("my ws", "50%", "it's"):  # SLURM would misread these in #SBATCH lines and output patterns
        with pytest.raises(ValueError, match="holds a character SLURM reads"):
            render_script(_job(tmp_path, workspace=tmp_path / unfit, node_log=tmp_path / unfit / "train.node%n.log"))


def test_a_store_password_is_never_written_into_the_script(tmp_path, monkeypatch):
    monkeypatch.setenv("LTX_PIPELINE_STORE", "postgresql+psycopg://ltx:s3cret@db.cluster:5432/ltx")
    job = stage_job(workspace=tmp_path / "ws", run_root=tmp_path / "ws" / "r1", run="r1", stage=1, stages=1,
                    log=tmp_path / "ws" / "r1" / "logs" / "train.log", nodes=2, gpus_per_node=4, extra=())
    text = render_script(job)
    assert "s3cret" not in text and "db.cluster" not in text
    assert ': "${LTX_PIPELINE_STORE:?' in text and "sbatch exports the submitting environment" in text
    monkeypatch.setenv("LTX_PIPELINE_STORE", "postgresql+psycopg://ltx@db.cluster/ltx")  # no password: exported
    job = stage_job(workspace=tmp_path / "ws", run_root=tmp_path / "ws" / "r1", run="r1", stage=2, stages=2,
                    log=tmp_path / "ws" / "r1" / "logs" / "train.stage-2.log", nodes=1, gpus_per_node=4, extra=())
    text = render_script(job)
    assert "export LTX_PIPELINE_STORE=postgresql+psycopg://ltx@db.cluster/ltx" in text
    assert "#SBATCH --job-name=ltx-r1-stage2" in text and "train.stage-2.node%n.log" in text
    assert job.launcher == (sys.executable, "-m", "ltx_pipeline.cli")


@pytest.mark.parametrize("cpus", [None, "12"])
def test_under_bash_the_script_prepares_the_resume_then_starts_each_node_with_its_rank(tmp_path, monkeypatch, cluster,
                                                                                      cpus):
    script = tmp_path / "train.sbatch"
    script.write_text(render_script(_job(tmp_path)))
    env = {**os.environ, "SLURM_JOB_ID": str(JOB), "SLURM_JOB_NODELIST": "gpu[07-08]", "FAKE_NODES": "gpu07,gpu08"}
    env.pop("SLURM_CPUS_PER_TASK", None)
    if cpus:
        env["SLURM_CPUS_PER_TASK"] = cpus
    done = subprocess.run(["bash", str(script)], env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    calls = [json.loads(line) for line in (cluster.state / "calls.jsonl").read_text().splitlines()]
    assert [c["kind"] for c in calls] == ["scontrol", "launcher", "srun", "node", "node"]
    target = ["node-launch", "--workspace", str(tmp_path / "ws"), "--run", "r1", "--stage", "1"]
    assert calls[1]["argv"] == [*target, "--prepare"]  # the requeue-safe resume, before any node starts
    srun = calls[2]["argv"][1:]
    assert srun[:6] == ["--nodes=2", "--ntasks-per-node=1", "--gpus-per-node=8", "--kill-on-bad-exit=1",
                        "--open-mode=append", f"--output={tmp_path}/ws/r1/logs/train.node%n.log"]
    assert ("--cpus-per-task=12" in srun) == bool(cpus)
    nodes = calls[3:]
    port = str(20000 + JOB % 20000)
    assert [n["env"]["SLURM_NODEID"] for n in nodes] == ["0", "1"]
    for node in nodes:
        assert node["argv"][0].endswith("launcher")
        assert node["argv"][1:] == [*target, "--stdout-only", "--main-ip", "gpu07", "--main-port", port]
    assert [n["output"] for n in nodes] == [f"{tmp_path}/ws/r1/logs/train.node{i}.log" for i in (0, 1)]
    assert "main process gpu07:" + port in done.stdout


def test_a_different_unsubmitted_script_of_the_same_name_is_kept_as_prev(tmp_path):
    ws = tmp_path / "ws"
    path = ws / "r1" / "slurm" / "train.sbatch"
    write_script(path, _job(tmp_path), workspace=ws)
    assert write_script(path, _job(tmp_path), workspace=ws) == (path, None)  # the same script: left as it is
    old = path.read_text()
    _, kept = write_script(path, _job(tmp_path, nodes=4), workspace=ws)
    assert kept == path.with_name("train.sbatch.prev") and kept.read_text() == old
    assert "#SBATCH --nodes=4" in path.read_text()


@pytest.mark.parametrize(("line", "expected"), [
    ("COMPLETED|0:0", ("COMPLETED", 0, None)),
    ("FAILED|1:0", ("FAILED", 1, None)),
    ("CANCELLED by 1000|0:15", ("CANCELLED", 143, 15)),
    ("TIMEOUT|0:0", ("TIMEOUT", 1, None)),  # SLURM says 0:0; a job that ran out of time did not succeed
    ("NODE_FAIL|0:0", ("NODE_FAIL", 1, None)),
    ("OUT_OF_MEMORY|0:125", ("OUT_OF_MEMORY", 253, 125)),
    ("RUNNING|0:0", ("RUNNING", None, None)),
])
def test_accounting_lines_become_an_end_state_with_a_failing_code_unless_completed(line, expected):
    assert parse_sacct(line + "\n") == expected


# -- the run ----------------------------------------------------------------------------------------


def _status(workspace: Path, capsys) -> tuple[dict, str]:  # noqa: ANN001
    capsys.readouterr()
    assert main(["status", "--workspace", str(workspace), "--run", "r1", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)["runs"][0]["training"]
    assert main(["status", "--workspace", str(workspace), "--run", "r1"]) == 0
    return report, capsys.readouterr().out


@pytest.mark.usefixtures("training_registered")
def test_a_slurm_run_submits_once_follows_the_job_and_status_reads_the_queue(workspace, tmp_path, cluster, capsys):
    args = simulated_args(workspace, clips(tmp_path / "data"), "--steps", "40", "--checkpoint-interval", "20",
                          "--slurm", "--slurm-arg=--partition=gpu", "--slurm-arg=--account=vision", "--detach")
    assert main(args) == 0
    run_root = workspace / "r1"
    script = run_root / "slurm" / "train.sbatch"
    [submit] = cluster.calls("sbatch")
    assert submit["argv"][1:] == ["--parsable", str(script)] and submit["script"] == script.read_text()
    lines = [line for line in script.read_text().splitlines() if line.startswith("#SBATCH")]
    assert lines[1:4] == ["#SBATCH --nodes=1", "#SBATCH --ntasks-per-node=1", "#SBATCH --gpus-per-node=1"]
    assert lines[-2:] == ["#SBATCH --partition=gpu", "#SBATCH --account=vision"]
    plan = (run_root / "plan.md").read_text()
    assert "Cluster: each stage's training will be submitted to SLURM with 1 node(s) x 1 GPU(s) each" in plan
    store, run = store_of(workspace)
    [process] = store.processes(run.id, "train")
    assert (process.host, process.pid, process.status) == (f"slurm:{JOB}", JOB, "running")
    assert process.log_path == str(run_root / "logs" / "train.node0.log")

    report, text = _status(workspace, capsys)
    assert report["state"] == "queued" and report["slurm"]["state"] == "PENDING"
    assert f"slurm job {JOB}: PENDING" in text and "waiting for its nodes in the SLURM queue" in text
    assert resume(workspace, "--detach") == 0  # queued: re-attached, nothing submitted
    cluster.queue("RUNNING")
    report, text = _status(workspace, capsys)
    assert report["state"] == "running" and f"slurm job {JOB}: RUNNING" in text

    # Resume while the job runs: re-attached, never submitted twice.
    assert resume(workspace, "--detach") == 0
    assert len(cluster.calls("sbatch")) == 1 and len(store.processes(run.id, "train")) == 1
    assert any(f"Re-attaching to SLURM job {JOB}" in e.message for e in store.events(run.id))

    # What node 0 would do: train into the run's folder, its output appended to node 0's log. Then the job
    # leaves the queue and accounting says it completed: resume judges the stage finished from that evidence.
    launch = store.latest_phase_runs(run.id)["validate"].outputs["stages"][0]["launch"]
    with open(process.log_path, "a") as log:
        subprocess.run(launch["argv"], cwd=launch["cwd"], env={**os.environ, **launch["env"]}, stdout=log,
                       stderr=subprocess.STDOUT, check=True, timeout=120)
    cluster.accounting("COMPLETED|0:0")
    report, text = _status(workspace, capsys)
    assert report["slurm"]["state"] == "COMPLETED" and f"slurm job {JOB}: COMPLETED (exit 0)" in text
    assert resume(workspace) == 0
    assert len(cluster.calls("sbatch")) == 1  # finished: nothing submitted again
    [process] = store.processes(run.id, "train")
    assert (process.status, process.exit_code) == ("exited", 0)
    assert max(m.step for m in store.metrics(run.id, 1)) == 40  # node 0's log reached the store
    assert store.get_run("r1").state == "finished"


@pytest.mark.usefixtures("training_registered")
def test_a_failed_job_fails_the_stage_with_its_slurm_state_and_resume_submits_a_new_one(workspace, tmp_path, cluster,
                                                                                         capsys, monkeypatch):
    args = simulated_args(workspace, clips(tmp_path / "data"), "--steps", "40", "--slurm", "--detach")
    assert main(args) == 0
    cluster.queue("RUNNING")

    capsys.readouterr()
    from ltx_pipeline.engine.journal import ProcessHandle

    follow_pause = ProcessHandle.pause

    def end_while_followed(handle: ProcessHandle, seconds: float) -> None:
        # The job ends once the resume follows it (its first nap between polls), not after a fixed delay: on a
        # loaded box a resume may reach the train phase late, find the job over and relaunch it instead.
        cluster.accounting("TIMEOUT|0:0")
        follow_pause(handle, seconds)

    with monkeypatch.context() as patched:
        patched.setattr(ProcessHandle, "pause", end_while_followed)
        code = resume(workspace)  # follows the running job until it leaves the queue
    assert code == 1
    err = capsys.readouterr().err
    assert f"Training stage 1 failed (SLURM job {JOB} TIMEOUT" in err
    assert "Fix: the job reached its time limit: give a longer one (--slurm-arg=--time=" in err
    store, run = store_of(workspace)
    [process] = store.processes(run.id, "train")
    assert (process.status, process.exit_code) == ("exited", 1)
    report, text = _status(workspace, capsys)
    assert report["state"] == "failed" and f"slurm job {JOB}: TIMEOUT (exit 1)" in text

    assert resume(workspace, "--detach") == 0  # a dead job is retried: a new launch, a new script and log
    assert [c["argv"][-1] for c in cluster.calls("sbatch")] == [
        str(workspace / "r1" / "slurm" / name) for name in ("train.sbatch", "train.attempt-2.sbatch")]
    second = store.processes(run.id, "train")[-1]
    assert second.host == f"slurm:{JOB + 1}" and second.log_path.endswith("train.attempt-2.node0.log")


@pytest.mark.usefixtures("training_registered")
def test_stop_cancels_the_job(workspace, tmp_path, cluster, capsys) -> None:
    (cluster.state / "cluster").touch()  # sbatch --parsable prints "jobid;cluster" on a multi-cluster setup
    assert main(simulated_args(workspace, clips(tmp_path / "data"), "--steps", "40", "--slurm", "--detach")) == 0
    cluster.queue("RUNNING")
    capsys.readouterr()
    assert main(["stop", "--workspace", str(workspace), "--run", "r1"]) == 0
    assert [c["argv"][1:] for c in cluster.calls("scancel")] == [[str(JOB)]]
    assert f"Cancelling SLURM job {JOB}" in capsys.readouterr().out
    store, run = store_of(workspace)
    [process] = store.processes(run.id, "train")
    assert process.status == "stopped"


@pytest.mark.usefixtures("training_registered")
def test_without_sbatch_the_script_is_written_and_the_refusal_names_the_command(workspace, tmp_path, monkeypatch,
                                                                                 capsys):
    if shutil.which("sbatch"):
        pytest.skip("a real sbatch is on PATH")
    _cluster(tmp_path, monkeypatch, ("squeue", "sacct"))
    code = main(simulated_args(workspace, clips(tmp_path / "data"), "--steps", "40", "--slurm"))
    assert code == 4
    script = workspace / "r1" / "slurm" / "train.sbatch"
    err = capsys.readouterr().err
    assert script.is_file() and f"sbatch --parsable {script}" in err
    assert "sbatch is not on PATH here, so the training was not submitted" in err
    assert f"ltx-pipeline resume --workspace {workspace} --run r1` on a SLURM login node" in err
    store, run = store_of(workspace)
    assert store.processes(run.id, "train") == []


@pytest.mark.usefixtures("training_registered")
def test_a_recorded_job_whose_state_cannot_be_read_is_said_so_and_never_resubmitted(workspace, tmp_path, monkeypatch,
                                                                                     cluster, capsys):
    assert main(simulated_args(workspace, clips(tmp_path / "data"), "--steps", "40", "--slurm", "--detach")) == 0
    for name in ("squeue", "sacct"):
        (cluster.bin / name).unlink()
    if shutil.which("squeue") or shutil.which("sacct"):
        pytest.skip("a real squeue or sacct is on PATH")
    report, text = _status(workspace, capsys)
    assert report["state"] == "unknown"
    assert f"slurm job {JOB}: squeue is not on PATH; sacct is not on PATH" in text
    assert resume(workspace) == 4
    assert "its state cannot be read here" in capsys.readouterr().err
    assert len(cluster.calls("sbatch")) == 1


@pytest.mark.parametrize(("extra", "message"), [
    (["--slurm", "--slurm-arg=-p"], "is not a long #SBATCH option"),
    (["--slurm", "--slurm-arg=--nodes=3"], "--nodes is set by ltx-pipeline"),
    (["--slurm-arg=--partition=gpu"], "--slurm-arg applies only with --slurm"),
])
def test_bad_slurm_options_are_refused_before_anything_is_written(workspace, tmp_path, capsys, extra, message):
    code = main(["run", "--workspace", str(workspace), "--run", "r1", "--dataset", str(clips(tmp_path / "data")),
                 *extra])
    assert code == 2
    assert message in capsys.readouterr().err
    assert not (workspace / "r1").exists()


@pytest.mark.usefixtures("training_registered")
def test_on_a_shared_store_the_job_inherits_the_store_url_and_its_password_stays_out_of_the_script(
        workspace, tmp_path, monkeypatch, cluster, capsys, request) -> None:
    url = new_database(request.getfixturevalue("postgres_server")).replace("postgresql+psycopg://ltx@", "postgresql+psycopg://ltx:s3cret@")
    monkeypatch.setenv("LTX_PIPELINE_STORE", url)  # the server trusts the socket: the password is only carried
    assert main(simulated_args(workspace, clips(tmp_path / "data"), "--steps", "40", "--slurm", "--detach")) == 0
    [submit] = cluster.calls("sbatch")
    assert submit["env"]["LTX_PIPELINE_STORE"] == url  # sbatch exports it to the job
    assert "s3cret" not in submit["script"] and ': "${LTX_PIPELINE_STORE:?' in submit["script"]
    cluster.queue("RUNNING")
    report, text = _status(workspace, capsys)
    assert report["slurm"]["job_id"] == JOB and f"slurm job {JOB}: RUNNING" in text
    assert "s3cret" not in text


def test_slurm_is_part_of_the_plan_and_an_existing_plan_stays_approved_without_it(workspace, tmp_path) -> None:
    from tests.phases.train_helpers import SURFACE

    base = ["run", "--workspace", str(workspace), "--run", "r1"]
    assert main([*base, "--dataset", str(clips(tmp_path / "data")), "--backend", "simulated", "--surface",
                 str(SURFACE)]) == 3
    store, run = store_of(workspace)
    [plan] = [p for p in store.phase_attempts(run.id) if p.phase == "plan"]
    assert "slurm" not in plan.fingerprint_parts["run request"]  # a run that never asked: as before the option
    assert main(base) == 3
    assert [p.phase for p in store.phase_attempts(run.id)].count("plan") == 1  # unchanged: not planned again
    assert main([*base, "--slurm", "--slurm-arg=--partition=gpu"]) == 3  # a new plan, to approve again
    plans = [p for p in store.phase_attempts(run.id) if p.phase == "plan"]
    assert len(plans) == 2 and "slurm" in plans[-1].reason
    assert "submitted to SLURM with 1 node(s)" in (workspace / "r1" / "plan.md").read_text()


@pytest.mark.usefixtures("training_registered")
def test_a_job_sbatch_refuses_is_a_bad_input_in_sbatchs_words_and_nothing_is_recorded(workspace, tmp_path, cluster,
                                                                                      capsys) -> None:
    (cluster.state / "sbatch.refuse").touch()
    args = simulated_args(workspace, clips(tmp_path / "data"), "--steps", "40", "--slurm",
                          "--slurm-arg=--partition=nope", "--detach")
    assert main(args) == 2
    err = capsys.readouterr().err
    assert "sbatch refused the job (exit 1): sbatch: error: invalid partition specified: nope" in err
    assert "correct slurm_args in run.yaml" in err
    store, run = store_of(workspace)
    assert store.processes(run.id, "train") == []
    (cluster.state / "sbatch.refuse").unlink()
    assert resume(workspace, "--detach") == 0  # the same launch's script, submitted now
    assert [c["argv"][-1] for c in cluster.calls("sbatch")] == [str(workspace / "r1" / "slurm" / "train.sbatch")] * 2
    assert not list((workspace / "r1" / "slurm").glob("*.prev*"))
    assert [p.host for p in store.processes(run.id, "train")] == [f"slurm:{JOB}"]


def test_a_job_waiting_in_the_queue_is_not_a_stall_but_a_silent_running_one_is(tmp_path, cluster) -> None:
    from ltx_pipeline.engine.journal import ProcessHandle
    from ltx_pipeline.training.follow import TrainingFollower

    handle = ProcessHandle(1, "train", 1, JOB, 0.0, f"slurm:{JOB}", tmp_path / "train.node0.log", 0, "running",
                           f"sbatch --parsable {tmp_path / 'train.sbatch'}")
    warnings: list[str] = []
    follower = TrainingFollower(None, handle, stage=1, stages=1, output_dir=tmp_path, warn=warnings.append,
                                stall_s=0.0)
    cluster.queue("PENDING")
    assert follower.poll() and not follower.stalled and warnings == []
    cluster.queue("RUNNING")
    assert follower.poll() and follower.stalled
    assert len(warnings) == 1 and "stalled" in warnings[0]
    cluster.accounting("COMPLETED|0:0")
    assert not follower.poll()
