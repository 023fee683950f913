"""Exit codes and odd corners (#43 point 8): a missing checkout is bad input, a refused command writes nothing,
no message says "None", and `ui --host 0.0.0.0` prints addresses another machine can open."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from ltx_pipeline.cli import main
from tests.conftest import H100_SMI


def _cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def _listing(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*")) if root.exists() else ["(absent)"]


def test_smoke_without_a_checkout_is_bad_input_naming_the_option_and_the_variable(
        capsys: pytest.CaptureFixture[str], workspace: Path) -> None:
    code, out, err = _cli(capsys, "smoke", "--workspace", str(workspace))
    assert (code, out) == (2, "") and err.count("\n") == 1 and "None" not in err
    assert err.startswith("error: No LTX-2 trainer checkout was given (--trainer-root). Fix: ")
    assert "--trainer-root PATH or set LTX2_ROOT" in err
    code, _, err = _cli(capsys, "smoke", "--workspace", str(workspace), "--trainer-root", str(workspace / "nope"))
    assert code == 2 and f"No LTX-2 trainer checkout at {workspace / 'nope'}: the folder does not exist" in err
    assert not workspace.exists()


@pytest.mark.parametrize("args", [
    ["run"], ["init"], ["run", "--run", "r1"], ["run", "--run", "CON", "--dataset", "{dataset}"],
    ["run", "--dataset", "{dataset}", "--buckets", ""], ["resume"], ["resume", "--run", "r1"], ["approve"],
], ids=lambda args: " ".join(args))
@pytest.mark.parametrize("existing", [False, True], ids=["fresh", "existing"])
def test_a_refused_command_leaves_the_workspace_as_it_was(args: list[str], existing: bool, workspace: Path,
                                                          clips_dataset: Path, fake_smi: Callable[..., str],
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    if existing:
        workspace.mkdir()
    before = _listing(workspace)
    argv = [arg.replace("{dataset}", str(clips_dataset)) for arg in args]
    code, _, err = _cli(capsys, *argv, "--workspace", str(workspace), "--nvidia-smi", fake_smi(H100_SMI)) \
        if argv[0] == "run" else _cli(capsys, *argv, "--workspace", str(workspace))
    assert code == 2 and err.startswith("error: ") and "None" not in err, err
    assert _listing(workspace) == before


def test_stop_in_a_workspace_without_runs_says_so(capsys: pytest.CaptureFixture[str], workspace: Path,
                                                  clips_dataset: Path, fake_smi: Callable[..., str]) -> None:
    from ltx_pipeline.store import Store

    workspace.mkdir()
    Store.open(workspace / "ltx-pipeline.db").close()
    code, _, err = _cli(capsys, "stop", "--workspace", str(workspace))
    assert code == 2 and err.startswith("error: This workspace has no runs") and "None" not in err


def test_a_usage_error_has_one_full_stop_and_points_at_its_commands_help(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = _cli(capsys, "status", "--run")
    assert code == 2 and err == "error: Option '--run' requires an argument. Fix: see `ltx-pipeline --help`.\n"
    code, _, err = _cli(capsys, "run", "--steps", "x")
    assert code == 2 and err == "error: Invalid value for '--steps': 'x' is not a valid int (ltx-pipeline run). " \
                                "Fix: see `ltx-pipeline run --help`.\n"


def test_ui_on_every_interface_prints_addresses_another_machine_can_open(
        capsys: pytest.CaptureFixture[str], workspace: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import socket
    from types import SimpleNamespace

    import psutil

    from ltx_pipeline.ui import serve

    interfaces = {"lo": [SimpleNamespace(family=socket.AF_INET, address="127.0.0.1"),
                         SimpleNamespace(family=socket.AF_INET6, address="::1")],
                  "eth0": [SimpleNamespace(family=socket.AF_INET, address="10.1.2.3"),
                           SimpleNamespace(family=socket.AF_INET6, address="fe80::1%eth0"),
                           SimpleNamespace(family=socket.AF_INET6, address="2001:db8::7"),
                           SimpleNamespace(family=psutil.AF_LINK, address="00:11:22:33:44:55")]}
    monkeypatch.setattr(psutil, "net_if_addrs", lambda: interfaces)
    monkeypatch.setattr(socket, "gethostname", lambda: "gpu-box")
    monkeypatch.setattr(socket, "getfqdn", lambda name="": "gpu-box.lab.example")
    assert serve.reachable_hosts("0.0.0.0") == ["gpu-box", "gpu-box.lab.example", "10.1.2.3"]
    assert serve.reachable_hosts("::") == ["gpu-box", "gpu-box.lab.example", "10.1.2.3", "2001:db8::7"]
    assert serve.reachable_hosts("10.1.2.3") == ["10.1.2.3"]

    served: list[object] = []
    monkeypatch.setattr(serve, "run", lambda app, sock: served.append(sock.getsockname()))
    workspace.mkdir()
    token = "a-token-of-32-characters-0123456"
    code, out, _ = _cli(capsys, "ui", "--workspace", str(workspace), "--host", "0.0.0.0", "--port", "0",
                        "--token", token, "--read-only")
    assert code == 0 and len(served) == 1
    port = served[0][1]  # type: ignore[index]
    lines = out.splitlines()
    assert lines[0] == f"Serving {workspace} read-only at http://gpu-box:{port}/?token={token}  (Ctrl-C stops)"
    assert lines[1:3] == [f"  also at http://gpu-box.lab.example:{port}/?token={token}",
                          f"  also at http://10.1.2.3:{port}/?token={token}"]
    assert "0.0.0.0" not in out
