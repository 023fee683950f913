"""The CLI end to end in-process: exit codes, one-line errors, plan.md, approve, resume, status --json."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from ltx_pipeline.cli import main
from tests.conftest import A6000_X2_SMI, H100_SMI, H100_X4_SMI, RTX4090_SMI, RTX5090_SMI, make_tree, mp4_bytes


@pytest.fixture
def cli(capsys: pytest.CaptureFixture[str]):
    def invoke(*args: str) -> tuple[int, str, str]:
        code = main(list(args))
        captured = capsys.readouterr()
        return code, captured.out, captured.err

    return invoke


def status(cli, workspace: Path) -> dict:
    code, out, _ = cli("status", "--workspace", str(workspace), "--json")
    assert code == 0
    return json.loads(out)


def start(cli, workspace: Path, dataset: Path, smi: str, prereqs: dict[str, str] | None, *extra: str):
    args = ["run", "--workspace", str(workspace), "--dataset", str(dataset), "--nvidia-smi", smi, "--run", "r1"]
    for key, value in (prereqs or {}).items():
        args += ["--" + key.replace("_", "-"), value]
    return cli(*args, *extra)


def test_run_stops_at_the_gate_then_approve_and_resume_finish(cli, workspace, clips_dataset, fake_smi,
                                                              ltx_prereqs, until_validate) -> None:
    code, out, err = start(cli, workspace, clips_dataset, fake_smi(H100_SMI), ltx_prereqs)
    assert code == 3, err
    assert f"ltx-pipeline approve --workspace {workspace.resolve()} --run r1" in out
    plan = (workspace / "r1" / "plan.md").read_text()
    for section in ("## Goal", "## Mode", "## Dataset", "## Preprocessing", "## Training Config", "## Hardware",
                    "## Sanity Check + Autotune", "## Monitoring", "## Outputs", "## Assumptions",
                    "## Cost / Time", "## Approve to proceed"):
        assert section in plan
    assert "80GB+ tier" in plan and "`t2v_lora.yaml`" in plan and "| lora rank / alpha | 32 / 32 |" in plan
    # What the probe found at the dataset path, not just the path.
    assert f"- Found: metadata: {clips_dataset}: 3 rows, caption column caption, media columns video, 0 media " \
           "files missing" in plan
    report = status(cli, workspace)["runs"][0]
    assert report["state"] == "awaiting_approval"
    assert [(p["phase"], p["status"]) for p in report["phases"]] == [("probe", "succeeded"), ("plan", "succeeded")]
    assert report["approval"]["state"] == "awaiting approval" and not report["approval"]["blockers"]
    assert yaml.safe_load((workspace / "r1" / "run.yaml").read_text())["dataset"] == str(clips_dataset)

    assert cli("approve", "--workspace", str(workspace), "--run", "r1")[0] == 0
    approved = status(cli, workspace)["runs"][0]  # approved, not yet resumed: only resume is left to do
    assert approved["approval"]["state"] == "approved"
    assert approved["next_command"] == f"ltx-pipeline resume --workspace {workspace.resolve()} --run r1"
    code, out, _ = cli("resume", "--workspace", str(workspace), "--run", "r1")
    assert code == 0 and "probe unchanged, skipping" in out
    report = status(cli, workspace)["runs"][0]
    assert report["state"] == "finished" and report["approval"]["state"] == "approved"
    assert report["next_command"] is None


def test_editing_the_request_reruns_the_plan_says_why_and_voids_approval(cli, workspace, clips_dataset, fake_smi,
                                                                         ltx_prereqs) -> None:
    start(cli, workspace, clips_dataset, fake_smi(H100_SMI), ltx_prereqs)
    cli("approve", "--workspace", str(workspace), "--run", "r1")
    request_file = workspace / "r1" / "run.yaml"
    request = yaml.safe_load(request_file.read_text())
    request["steps"] = 3000
    request_file.write_text(yaml.safe_dump(request))
    code, out, _ = cli("resume", "--workspace", str(workspace), "--run", "r1")
    assert code == 3
    assert "plan runs: run request.steps: None -> 3000" in out
    report = status(cli, workspace)["runs"][0]
    assert report["approval"]["state"] == "awaiting approval"
    assert "| steps | 3000 |" in (workspace / "r1" / "plan.md").read_text()


def test_missing_prerequisites_are_planned_and_block_approval(cli, workspace, clips_dataset, fake_smi) -> None:
    code, out, _ = start(cli, workspace, clips_dataset, fake_smi(H100_SMI), None)
    assert code == 3
    plan = (workspace / "r1" / "plan.md").read_text()
    for item in ("LTX checkpoint", "Gemma text encoder", "LTX-2 trainer checkout", "uv"):
        assert f"**{item}** (missing)" in plan
    assert "Next step: clone https://github.com/Lightricks/LTX-2" in plan
    code, _, err = cli("approve", "--workspace", str(workspace), "--run", "r1")
    assert code == 4 and "prerequisites are missing" in err and err.count("\n") == 1


@pytest.mark.parametrize(("smi", "tier", "template", "knobs"), [
    (RTX5090_SMI, "32GB tier", "t2v_lora_low_vram.yaml",
     ("| optimizer_type | adamw8bit |", "| quantization | int8-quanto |", "| lora rank / alpha | 16 / 16 |")),
    (A6000_X2_SMI, "40–60GB tier", "t2v_lora_low_vram.yaml", ("| optimizer_type | adamw8bit |",
                                                              "accelerate launch, 2 processes, DDP")),
    (H100_SMI, "80GB+ tier", "t2v_lora.yaml", ("| optimizer_type | adamw |", "| quantization | null |",
                                               "single process")),
])
def test_plan_follows_the_tier(cli, workspace, clips_dataset, fake_smi, ltx_prereqs, smi, tier, template,
                               knobs) -> None:
    assert start(cli, workspace, clips_dataset, fake_smi(smi), ltx_prereqs)[0] == 3
    plan = (workspace / "r1" / "plan.md").read_text()
    assert f"**{tier}**" in plan and f"`{template}`" in plan
    for knob in knobs:
        assert knob in plan


def test_multi_gpu_keeps_the_effective_batch(cli, workspace, tmp_path, fake_smi, ltx_prereqs) -> None:
    rows = [{"caption": f"a red fox, clip {i}", "video": f"videos/clip{i}.mp4"} for i in range(4)]  # a sample a GPU
    dataset = make_tree(tmp_path / "four", {"dataset.json": json.dumps(rows),
                                            **{f"videos/clip{i}.mp4": mp4_bytes() for i in range(4)}})
    start(cli, workspace, dataset / "dataset.json", fake_smi(H100_X4_SMI), ltx_prereqs, "--effective-batch", "8")
    plan = (workspace / "r1" / "plan.md").read_text()
    assert "| gradient_accumulation_steps | 2 |" in plan and "| effective batch (all GPUs) | 8 |" in plan
    assert "accelerate launch, 4 processes, DDP" in plan


def test_full_fine_tune_rules(cli, workspace, clips_dataset, fake_smi, ltx_prereqs) -> None:
    start(cli, workspace, clips_dataset, fake_smi(H100_SMI), ltx_prereqs, "--training-mode", "full")
    plan = (workspace / "r1" / "plan.md").read_text()
    assert "needing several 80GB+ GPUs with FSDP" in plan and "| offload_optimizer_during_validation | true |" in plan
    start(cli, workspace, clips_dataset, fake_smi(H100_X4_SMI), ltx_prereqs, "--training-mode", "full")
    plan = (workspace / "r1" / "plan.md").read_text()
    assert "FSDP (configs/accelerate/fsdp.yaml)" in plan and "needing several" not in plan


@pytest.mark.parametrize(("extra", "expected"), [
    ((), ("960x544x49 = 3,570 video tokens",)),
    (("--strategy", "mixed", "--buckets", "960x544x121;512x288x49"),
     ("960x544x121 = 8,160 video tokens", "batch_size 1: the trainer cannot batch")),
    (("--strategy", "chain"), ("Stage 1: 512x288x321 = 5,904", "Stage 3: 1920x1088x33 = 10,200",
                               "| learning_rate | 0.0001, 5e-05, 2e-05 |")),
])
def test_resolution_strategies(cli, workspace, clips_dataset, fake_smi, ltx_prereqs, extra, expected) -> None:
    assert start(cli, workspace, clips_dataset, fake_smi(H100_SMI), ltx_prereqs, *extra)[0] == 3
    plan = (workspace / "r1" / "plan.md").read_text()
    for text in expected:
        assert text in plan


def test_minimum_vram_gate_and_accept_risk(cli, workspace, clips_dataset, fake_smi, ltx_prereqs) -> None:
    code, _, err = start(cli, workspace, clips_dataset, fake_smi(RTX4090_SMI), ltx_prereqs)
    assert code == 1 and "24 GB per GPU" in err and "--accept-risk" in err and err.count("\n") == 1
    assert status(cli, workspace)["runs"][0]["state"] == "gate_stopped"
    code, out, err = cli("resume", "--workspace", str(workspace), "--run", "r1", "--accept-risk")
    assert code == 3 and "at your own risk" not in out
    assert "Continuing on the low-VRAM config" in err


def bad_json(tmp: Path) -> Path:
    path = tmp / "bad" / "dataset.json"
    path.parent.mkdir()
    path.write_text('[{"caption": "x", "video": "a.mp4"},')
    return path


@pytest.mark.parametrize(("case", "needle"), [
    ("missing_dataset", "does not exist"), ("malformed_metadata", "JSON"), ("bad_bucket", "8k+1"),
    ("unsafe_name", "not allowed"), ("unknown_mode", "unknown mode"), ("url_model", "URL"),
    ("smi_fails", "NVIDIA driver"), ("smi_garbage", "nvidia-smi"), ("no_gpu", "nvidia-smi"),
])
def test_bad_input_is_one_line_and_exit_2(cli, workspace, clips_dataset, fake_smi, tmp_path, case, needle) -> None:
    smi = fake_smi(H100_SMI)
    args = ["run", "--workspace", str(workspace), "--dataset", str(clips_dataset), "--nvidia-smi", smi]
    replace = {
        "missing_dataset": ["--dataset", str(tmp_path / "nope.json")],
        "malformed_metadata": ["--dataset", str(bad_json(tmp_path)) if case == "malformed_metadata" else ""],
        "bad_bucket": ["--buckets", "960x544x48"], "unsafe_name": ["--run", "../escape"],
        "unknown_mode": ["--mode", "t2x"], "url_model": ["--model-path", "https://example.com/m.safetensors"],
        "smi_fails": ["--nvidia-smi", fake_smi("", 9, "NVIDIA-SMI has failed because it couldn't communicate with "
                                                   "the NVIDIA driver. Make sure that the latest NVIDIA driver is "
                                                   "installed and running.\n", name="smi-fail")],
        "smi_garbage": ["--nvidia-smi", fake_smi("hello world\n", name="smi-garbage")],
        "no_gpu": ["--nvidia-smi", str(tmp_path / "no-such-nvidia-smi")],
    }[case]
    code, _, err = cli(*args, *replace)
    assert code == 2, err
    assert err.startswith("error: ") and err.count("\n") == 1 and "Traceback" not in err
    assert needle.lower() in err.lower()
    assert not (workspace / "../escape").exists()


def test_usage_errors_are_exit_2(cli) -> None:
    code, _, err = cli("run", "--no-such-option")
    assert code == 2 and err.count("\n") == 1
    assert cli("approve", "--run", "ghost")[0] == 2


def test_json_errors(cli, tmp_path) -> None:
    code, _, err = cli("status", "--workspace", str(tmp_path / "ws"), "--run", "ghost", "--json")
    assert code == 2 and json.loads(err)["exit_code"] == 2


def test_status_on_a_missing_workspace_writes_nothing(cli, tmp_path) -> None:
    code, out, _ = cli("status", "--workspace", str(tmp_path / "never"))
    assert code == 0 and "No runs" in out and not (tmp_path / "never").exists()


def snapshot(root: Path) -> dict[str, tuple[int, int, str]]:
    files = [p for p in sorted(root.rglob("*")) if p.is_file()]
    return {str(p.relative_to(root)): (p.stat().st_size, p.stat().st_mtime_ns, _sha(p))
            for p in files}


def _sha(path: Path) -> str:
    import hashlib

    return hashlib.sha256(path.read_bytes()).hexdigest()


def set_writable(root: Path, writable: bool) -> None:
    for path in [root, *root.rglob("*")]:
        mode = path.stat().st_mode
        path.chmod(mode | 0o200 if writable else mode & ~0o222)


def test_read_only_trainer_checkout_and_dataset_are_never_touched(cli, workspace, clips_dataset, fake_smi,
                                                                  ltx_prereqs, until_validate) -> None:
    roots = [Path(ltx_prereqs["trainer_root"]), clips_dataset.parent]
    before = [snapshot(r) for r in roots]
    for root in roots:
        set_writable(root, False)
    try:
        assert start(cli, workspace, clips_dataset, fake_smi(H100_SMI), ltx_prereqs)[0] == 3
        assert cli("approve", "--workspace", str(workspace), "--run", "r1")[0] == 0
        assert cli("resume", "--workspace", str(workspace), "--run", "r1")[0] == 0
    finally:
        for root in roots:
            set_writable(root, True)
    assert [snapshot(r) for r in roots] == before
