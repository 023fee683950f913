"""Safety invariants, one test each, on complete simulated-backend workflows driven in-process.

No secret given in the environment is recorded anywhere in the workspace; nothing outside the
workspace is written (the dataset folder made read-only, it and HOME snapshotted); no child is
started through a shell; a run name or request that would escape the workspace is refused; and an
existing ``.precomputed/`` or checkpoints folder beside the data is never overwritten or deleted,
even with ``--fresh-preprocess`` (which only preprocesses into the run's own folder).
"""

from __future__ import annotations

import os
import secrets
import stat
import subprocess
from pathlib import Path

import pytest

from ltx_pipeline.cli import main
from ltx_pipeline.store import Store
from tests.phases.test_data_config_validate import write_latents
from tests.phases.train_helpers import SURFACE, clips, simulated_args

SECRET_NAMES = ("HF_TOKEN", "WANDB_API_KEY", "MY_SERVICE_TOKEN")


def snapshot(root: Path, skip: Path | None = None) -> dict[str, tuple[int, bytes | None]]:
    """Every path under ``root`` (mode, and bytes for files), except those under ``skip``."""
    found: dict[str, tuple[int, bytes | None]] = {}
    for path in sorted(root.rglob("*")):
        if skip is not None and (path == skip or skip in path.parents):
            continue
        info = path.lstat()
        found[str(path.relative_to(root))] = (info.st_mode, path.read_bytes() if path.is_file() else None)
    return found


@pytest.fixture
def simulated(monkeypatch: pytest.MonkeyPatch) -> None:
    """Instant simulated steps; train and monitor right after validate (autotune only where asked)."""
    monkeypatch.setenv("LTX_SIMULATED_TIME_SCALE", "0")


def without_autotune(monkeypatch: pytest.MonkeyPatch) -> None:
    import phases

    monkeypatch.setattr(phases, "PHASES", tuple(p for p in phases.PHASES if p.name != "autotune"))


@pytest.mark.usefixtures("simulated")
def test_no_secret_from_the_environment_is_recorded_in_the_workspace(workspace, tmp_path, monkeypatch,
                                                                    capsys) -> None:
    values = {name: f"sk-{secrets.token_hex(16)}" for name in SECRET_NAMES}
    for name, value in values.items():
        monkeypatch.setenv(name, value)
    code = main(simulated_args(workspace, clips(tmp_path / "data"), "--steps", "20"))
    out, err = capsys.readouterr()
    assert code == 0, err
    files = [p for p in workspace.rglob("*") if p.is_file()]
    assert {"ltx-pipeline.db", "optuna.db", "train.log", "run-summary.md"} <= {p.name for p in files}
    for path in files:
        data = path.read_bytes()
        for name, value in values.items():
            assert value.encode() not in data, f"{name} recorded in {path}"
    for name, value in values.items():
        assert value not in out + err, f"{name} printed"


@pytest.mark.usefixtures("simulated")
def test_nothing_outside_the_workspace_is_written(workspace, tmp_path, monkeypatch, isolated_env, capsys) -> None:
    without_autotune(monkeypatch)
    data = clips(tmp_path / "data")
    before_home = snapshot(isolated_env)
    modes = {}
    for path in [data.parent, *data.parent.rglob("*")]:
        modes[path] = path.stat().st_mode
        path.chmod(modes[path] & ~(stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH))
    try:
        before_all = snapshot(tmp_path, skip=workspace)
        code = main(simulated_args(workspace, data, "--steps", "20"))
        assert code == 0, capsys.readouterr().err
        # As root chmod stops nothing: the snapshot of everything but the workspace is the real check.
        assert snapshot(tmp_path, skip=workspace) == before_all
        assert snapshot(isolated_env) == before_home
    finally:
        for path, mode in sorted(modes.items(), key=lambda item: len(item[0].parts)):
            path.chmod(mode)
    assert (workspace / "r1" / "outputs" / "run-summary.md").is_file()


@pytest.mark.usefixtures("simulated")
def test_no_subprocess_is_started_through_a_shell(workspace, tmp_path, monkeypatch, capsys) -> None:
    calls: list[tuple[object, object]] = []
    original = subprocess.Popen.__init__

    def recording(self, args, *rest, **kwargs):  # noqa: ANN001, ANN202 - mirrors Popen's signature
        calls.append((args, kwargs.get("shell", rest[7] if len(rest) > 7 else False)))
        return original(self, args, *rest, **kwargs)

    monkeypatch.setattr(subprocess.Popen, "__init__", recording)
    code = main(simulated_args(workspace, clips(tmp_path / "data"), "--steps", "20"))
    assert code == 0, capsys.readouterr().err
    assert calls, "the workflow launched no child: the check saw nothing"
    assert any("simulated_trainer" in " ".join(map(str, args)) for args, _ in calls)
    for args, shell in calls:
        assert shell is False, f"shell=True for {args!r}"
        assert isinstance(args, (list, tuple)) and all(isinstance(a, (str, os.PathLike)) for a in args), args


@pytest.mark.parametrize("run_args", [
    ["--run", "../escaped"], ["--run", "/tmp/ltx-escaped-abs"], ["--run", "a/../../escaped"], ["--run", ".."],
    ["--run", "~"], ["--run", "sub/run"],
])
def test_run_name_that_would_escape_the_workspace_is_refused(workspace, tmp_path, capsys, run_args) -> None:
    data = clips(tmp_path / "data")
    before = snapshot(tmp_path, skip=workspace)
    code = main(["run", "--workspace", str(workspace), *run_args, "--dataset", str(data),
                 "--assume-gpu", "NVIDIA H100 80GB HBM3,81559"])
    err = capsys.readouterr().err
    assert code == 2 and len(err.strip().splitlines()) == 1 and "not allowed" in err, err
    assert snapshot(tmp_path, skip=workspace) == before
    assert not Path("/tmp/ltx-escaped-abs").exists()
    assert not [p for p in workspace.glob("*") if p.is_dir()] if workspace.exists() else True


@pytest.mark.parametrize("field", ["name", "run", "output_dir", "workspace"])
def test_request_file_naming_a_place_outside_the_workspace_is_refused(workspace, tmp_path, capsys, field) -> None:
    data = clips(tmp_path / "data")
    request = tmp_path / "req" / "run.yaml"
    request.parent.mkdir()
    request.write_text(f"dataset: {data}\n{field}: ../../escaped\n")
    before = snapshot(tmp_path, skip=workspace)
    code = main(["run", "--workspace", str(workspace), "--request", str(request), "--assume-gpu",
                 "NVIDIA H100 80GB HBM3,81559"])
    err = capsys.readouterr().err
    assert code == 2 and len(err.strip().splitlines()) == 1, err
    assert snapshot(tmp_path, skip=workspace) == before
    assert not (tmp_path / "escaped").exists() and not (workspace.parent.parent / "escaped").exists()


@pytest.mark.usefixtures("simulated")
def test_existing_precomputed_and_checkpoints_survive_a_full_run_and_a_fresh_preprocess(
        workspace, tmp_path, monkeypatch, capsys) -> None:
    without_autotune(monkeypatch)
    data = clips(tmp_path / "data")
    names = [f"videos/c{i}.pt" for i in range(3)]
    write_latents(data.parent / ".precomputed", names, (128, 7, 17, 30))  # 960x544x49, as planned
    user_checkpoints = data.parent / "checkpoints"
    user_checkpoints.mkdir()
    (user_checkpoints / "lora_weights_step_00500.safetensors").write_bytes(os.urandom(256))
    before = snapshot(data.parent)
    code = main(simulated_args(workspace, data, "--steps", "20", "--buckets", "960x544x49"))
    assert code == 0, capsys.readouterr().err
    assert snapshot(data.parent) == before
    assert (workspace / "r1" / "outputs" / "run-summary.md").is_file()
    code = main(["run", "--workspace", str(workspace), "--run", "r2", "--dataset", str(data), "--backend",
                 "simulated", "--surface", str(SURFACE), "--approve",
                 "--steps", "20", "--buckets", "960x544x49", "--fresh-preprocess"])
    assert code == 0, capsys.readouterr().err
    assert snapshot(data.parent) == before
    assert (workspace / "r2" / "outputs" / "run-summary.md").is_file()
    # The first run reused the user's latents in place; the second preprocessed into its own folder.
    store = Store.open(workspace / "ltx-pipeline.db")
    sources = {name: [(s["source"], s["preprocessed_root"]) for s in
                      store.latest_phase_runs(store.get_run(name).id)["data_check"].outputs["stages"]]
               for name in ("r1", "r2")}
    assert sources == {"r1": [("reuse", str(data.parent / ".precomputed"))],
                       "r2": [("preprocess", str(workspace.resolve() / "r2" / "dataset" / ".precomputed"))]}
