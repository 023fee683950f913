"""Host probing (disk, shm, RAM, tools, W&B without leaking the key) and trainer checks (models: test_model_files)."""

from __future__ import annotations

import json
import os
import stat
from dataclasses import replace
from pathlib import Path

import pytest

from ltx_pipeline.probing.host import HostInfo, probe_host, wandb_credentials_resolve
from ltx_pipeline.probing.trainer_checkout import TrainerCheck, check_trainer_root

SECRET = "wandb-secret-0123456789abcdef0123456789abcdef"
SHA = "0123456789abcdef0123456789abcdef01234567"


def touch(root: Path, *names: str, content: str = "x") -> Path:
    for name in names:
        target = root / name
        if name.endswith("/"):
            target.mkdir(parents=True, exist_ok=True)
        else:
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(content)
    return root


def tool_dir(tmp_path: Path, *tools: str) -> Path:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    for tool in tools:
        (bin_dir / tool).write_text("#!/bin/sh\n")
        (bin_dir / tool).chmod(0o755)
    return bin_dir


# ---- host ----------------------------------------------------------------------------------------

def test_probe_host_measures_nearest_existing_parent_and_tools(tmp_path):
    bin_dir = tool_dir(tmp_path, "uv", "ffprobe")  # an ffprobe on PATH is not looked at
    shm = touch(tmp_path, "shm/") / "shm"
    proc = touch(tmp_path, "version", content="Linux version 5.15.167.4-microsoft-standard-WSL2")
    info = probe_host(tmp_path / "not" / "yet" / "there", env={"PATH": str(bin_dir)}, home=tmp_path,
                      shm=shm, proc_version=proc / "version")
    assert info.disk_path == str(tmp_path)
    assert info.disk_free_bytes > 0 and info.disk_total_bytes >= info.disk_free_bytes
    assert info.shm_total_bytes and info.shm_total_bytes > 0
    assert info.ram_total_bytes >= info.ram_available_bytes > 0
    assert info.uv_path == str(bin_dir / "uv")
    assert info.is_wsl is True
    assert info.wandb_credentials is False
    json.dumps(info.to_dict())
    findings = {f.item: f for f in info.to_findings()}
    assert findings["uv"].status == "ok" and "ffprobe" not in findings  # media is read with PyAV
    assert findings["W&B"].status == "warning" and "wandb login" in findings["W&B"].next_step
    if info.os_name == "Linux":
        assert findings["Operating system"].status == "ok" and "(WSL)" in findings["Operating system"].detail


def test_probe_host_without_tools_shm_or_wsl(tmp_path):
    empty = tool_dir(tmp_path)
    info = probe_host(tmp_path, env={"PATH": str(empty)}, home=tmp_path, shm=tmp_path / "no-shm",
                      proc_version=tmp_path / "no-version")
    assert (info.uv_path, info.shm_total_bytes, info.is_wsl) == (None, None, False)
    findings = {f.item: f for f in info.to_findings()}
    assert findings["uv"].status == "missing" and "astral.sh/uv/install.sh" in findings["uv"].next_step
    assert "ffprobe" not in findings  # no system binary is needed to read media
    assert findings["/dev/shm"].status == "warning"


def _host(**changes) -> HostInfo:
    base = HostInfo("/w", 10 * 2**30, 20 * 2**30, 16 * 2**30, 16 * 2**30, 64 * 2**30, 32 * 2**30,
                    "Linux", "6.8", False, "/usr/bin/uv", True)
    return replace(base, **changes)


def test_small_shm_and_non_linux_findings():
    small = {f.item: f for f in _host(shm_total_bytes=64 * 2**20, shm_free_bytes=64 * 2**20).to_findings()}
    assert small["/dev/shm"].status == "warning" and "--shm-size" in small["/dev/shm"].next_step
    mac = {f.item: f for f in _host(os_name="Darwin").to_findings()}
    assert mac["Operating system"].status == "missing" and "Linux" in mac["Operating system"].next_step
    ok = {f.item: f for f in _host().to_findings()}
    assert all(f.status == "ok" for f in ok.values())
    assert ok["Disk"].detail == "10.0 GiB free of 20.0 GiB at /w"


def test_wandb_api_key_variable(tmp_path):
    assert wandb_credentials_resolve({"WANDB_API_KEY": SECRET}, tmp_path) is True
    assert wandb_credentials_resolve({"WANDB_API_KEY": "  "}, tmp_path) is False
    assert wandb_credentials_resolve({}, tmp_path) is False


def test_wandb_netrc_in_home(tmp_path):
    (tmp_path / ".netrc").write_text(f"machine api.wandb.ai\n  login user\n  password {SECRET}\n")
    assert wandb_credentials_resolve({}, tmp_path) is True
    # another host only: no W&B credentials
    (tmp_path / ".netrc").write_text(f"machine example.com login user password {SECRET}\n")
    assert wandb_credentials_resolve({}, tmp_path) is False


def test_wandb_netrc_variable_and_base_url(tmp_path):
    netrc_file = tmp_path / "elsewhere.netrc"
    netrc_file.write_text(f"machine wandb.internal.example login user password {SECRET}\n")
    env = {"NETRC": str(netrc_file)}
    assert wandb_credentials_resolve(env, tmp_path / "nohome") is False
    env["WANDB_BASE_URL"] = "https://wandb.internal.example"
    assert wandb_credentials_resolve(env, tmp_path / "nohome") is True


@pytest.mark.parametrize("text", [
    "machine api.wandb.ai login user password\n",   # password token without a value
    'machine api.wandb.ai login "unterminated\n',
    "macdef\n",
])
def test_malformed_or_passwordless_netrc_is_false(tmp_path, text):
    (tmp_path / ".netrc").write_text(text)
    assert wandb_credentials_resolve({}, tmp_path) is False


def test_wandb_key_never_leaks(tmp_path):
    (tmp_path / ".netrc").write_text(f"machine api.wandb.ai login user password {SECRET}\n")
    for env in ({"WANDB_API_KEY": SECRET, "PATH": ""}, {"PATH": ""}):
        info = probe_host(tmp_path, env=env, home=tmp_path)
        assert info.wandb_credentials is True
        dumped = [repr(info), str(info), json.dumps(info.to_dict())]
        dumped += [repr(f) + json.dumps(f.to_dict()) for f in info.to_findings()]
        assert not any(SECRET in text for text in dumped)


# ---- trainer checkout ----------------------------------------------------------------------------

def fake_checkout(root: Path, *, synced: bool = True, scripts: bool = True) -> Path:
    names = ["packages/ltx-trainer/configs/t2v_lora.yaml", "packages/ltx-trainer/configs/t2v_lora_low_vram.yaml",
             "packages/ltx-trainer/configs/accelerate/ddp.yaml", "packages/ltx-trainer/configs/README.md"]
    if scripts:
        names += ["packages/ltx-trainer/scripts/train.py", "packages/ltx-trainer/scripts/process_dataset.py"]
    if synced:
        names += ["uv.lock", ".venv/"]
    touch(root, *names)
    touch(root, ".git/HEAD", content="ref: refs/heads/main\n")
    touch(root, ".git/refs/heads/main", content=SHA + "\n")
    return root


def test_trainer_root_complete(tmp_path):
    check = check_trainer_root(fake_checkout(tmp_path / "LTX-2"), env={})
    assert check.source == "--trainer-root" and check.exists
    assert check.configs == ("t2v_lora.yaml", "t2v_lora_low_vram.yaml")
    assert check.has_train_script and check.has_process_dataset_script
    assert check.synced and check.usable
    assert check.git_commit == SHA
    finding = check.to_finding()
    assert finding.status == "ok" and SHA[:12] in finding.detail
    data = check.to_dict()
    assert data["usable"] is True and data["synced"] is True
    json.dumps(data)


def test_trainer_root_from_environment(tmp_path):
    root = fake_checkout(tmp_path / "LTX-2")
    check = check_trainer_root(None, env={"LTX2_ROOT": str(root)})
    assert check.source == "LTX2_ROOT" and check.root == str(root)


def test_trainer_root_not_given_or_absent(tmp_path):
    none = check_trainer_root(None, env={})
    assert none.root is None and not none.usable
    finding = none.to_finding()
    assert finding.status == "missing"
    assert "clone https://github.com/Lightricks/LTX-2" in finding.next_step and "uv sync" in finding.next_step
    absent = check_trainer_root(tmp_path / "nope", env={}).to_finding()
    assert absent.status == "missing" and "does not exist" in absent.detail


def test_trainer_root_not_a_checkout(tmp_path):
    finding = check_trainer_root(touch(tmp_path, "README.md"), env={}).to_finding()
    assert finding.status == "missing" and "configs/" in finding.detail


def test_trainer_root_missing_scripts_and_unsynced(tmp_path):
    no_scripts = check_trainer_root(fake_checkout(tmp_path / "a", scripts=False), env={}).to_finding()
    assert no_scripts.status == "missing" and "scripts/train.py and scripts/process_dataset.py" in no_scripts.detail
    unsynced = check_trainer_root(fake_checkout(tmp_path / "b", synced=False), env={})
    assert not unsynced.synced and not unsynced.usable
    finding = unsynced.to_finding()
    assert finding.status == "missing" and finding.next_step == f"run `uv sync` at {tmp_path / 'b'}"


def test_git_commit_packed_detached_and_worktree(tmp_path):
    packed = fake_checkout(tmp_path / "packed")
    (packed / ".git/refs/heads/main").unlink()
    (packed / ".git/packed-refs").write_text(f"# pack-refs with: peeled\n{SHA} refs/heads/main\n")
    assert check_trainer_root(packed, env={}).git_commit == SHA
    detached = fake_checkout(tmp_path / "detached")
    (detached / ".git/HEAD").write_text("fedcba9876543210fedcba9876543210fedcba98\n")
    assert check_trainer_root(detached, env={}).git_commit == "fedcba9876543210fedcba9876543210fedcba98"
    main_git = tmp_path / "detached" / ".git"
    touch(main_git, "worktrees/wt/HEAD", content="ref: refs/heads/main\n")
    touch(main_git, "worktrees/wt/commondir", content="../..\n")
    touch(main_git, "refs/heads/main", content=SHA + "\n")
    worktree = fake_checkout(tmp_path / "wt")
    for path in sorted((worktree / ".git").rglob("*"), reverse=True):
        path.unlink() if path.is_file() else path.rmdir()
    (worktree / ".git").rmdir()
    (worktree / ".git").write_text(f"gitdir: {main_git / 'worktrees' / 'wt'}\n")
    assert check_trainer_root(worktree, env={}).git_commit == SHA
    broken = fake_checkout(tmp_path / "broken")
    (broken / ".git/HEAD").write_text("ref: refs/heads/gone\n")
    assert check_trainer_root(broken, env={}).git_commit is None


def test_read_only_checkout_is_checked_without_writing(tmp_path):
    root = fake_checkout(tmp_path / "ro")
    before = sorted(str(p.relative_to(root)) for p in root.rglob("*"))
    modes = {}
    for path in [root, *root.rglob("*")]:
        modes[path] = path.stat().st_mode
        path.chmod(path.stat().st_mode & ~(stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH))
    try:
        check = check_trainer_root(root, env={})
        assert check.usable and check.git_commit == SHA
        assert check.writable == os.access(root, os.W_OK)
        assert sorted(str(p.relative_to(root)) for p in root.rglob("*")) == before
    finally:
        for path, mode in sorted(modes.items(), key=lambda item: len(item[0].parts)):
            path.chmod(mode)


def test_read_only_unsynced_checkout_says_so():
    check = TrainerCheck("/opt/LTX-2", "--trainer-root", True, ("t2v_lora.yaml",), True, True,
                         True, False, False, None)
    finding = check.to_finding()
    assert finding.status == "missing" and "no .venv" in finding.detail
    assert "read-only" in finding.next_step and "uv sync" in finding.next_step
