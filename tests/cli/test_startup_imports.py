"""The CLI's start-up budget: ``status``, ``status --json`` and ``--help`` import none of the heavy rooms.

People run ``status`` in a loop and from shell prompts. Each command is a fresh process, so every
module it imports is paid each time; this test runs them under ``python -X importtime`` on a workspace
with a run whose training is live, and fails naming any module of the list below that was imported
(and the import chain that pulled it in). Wall time is measured by ``benchmarks/bench_status.py``,
never asserted here.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.phases.train_helpers import clips, drive_until_validate, simulated_args

#: Modules whose import a read-only start-up must never pay for (top-level package names, or exact modules).
HEAVY = ("torch", "optuna", "accelerate", "peft", "matplotlib", "ruamel", "sqlalchemy", "sqlmodel", "alembic",
         "pydantic", "numpy", "av", "PIL", "transitions", "safetensors", "ltx_pipeline.ltx.trainer_config",
         "ltx_pipeline.reference_trainer", "ltx_pipeline.backends", "phases",
         "starlette", "uvicorn", "jinja2", "ltx_pipeline.ui")  # the dashboard's web stack: the ui command's alone
ENGINE = [sys.executable, "-X", "importtime", "-c", "from ltx_pipeline.cli import main; main()"]


def imported(args: list[str]) -> dict[str, list[str]]:
    """Each module the command imported, with the chain of parents that imported it (outermost first)."""
    done = subprocess.run([*ENGINE, *args], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "COLUMNS": "200"})
    assert done.returncode == 0, done.stderr[-2000:]
    chains: dict[str, list[str]] = {}
    stack: list[tuple[int, str]] = []
    lines = [line for line in done.stderr.splitlines() if line.startswith("import time:") and "|" in line]
    for line in reversed(lines):  # importtime prints children before their parent: walk it backwards
        name_field = line.split("|")[2]
        depth = (len(name_field) - len(name_field.lstrip())) // 2
        name = name_field.strip()
        while stack and stack[-1][0] >= depth:
            stack.pop()
        chains[name] = [n for _, n in stack]
        stack.append((depth, name))
    return chains


def heavy_ones(chains: dict[str, list[str]]) -> list[str]:
    found = []
    for name, parents in chains.items():
        if any(name == h or name.startswith(h + ".") for h in HEAVY):
            found.append(f"{name} (via {' > '.join(parents) or 'the command'})")
    return sorted(found)[:5]


@pytest.fixture(scope="module")
def live_workspace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A workspace with a validated run and a training process recorded as running, so status reads it all."""
    import sqlite3

    root = tmp_path_factory.mktemp("startup")
    workspace = root / "ws"
    with pytest.MonkeyPatch.context() as patch:
        assert drive_until_validate(patch, simulated_args(workspace, clips(root / "data"), "--steps", "20")) == 0
    db = sqlite3.connect(workspace / "ltx-pipeline.db")
    run_id = db.execute("SELECT id FROM runs WHERE name = 'r1'").fetchone()[0]
    log = workspace / "r1" / "logs" / "train.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    log.write_text("INFO     Step 20/100 - Loss: 0.5000, LR: 1.00e-04, Time/Step: 1.00s, Total Time: 0h 2m\n")
    db.execute("INSERT INTO processes (run_id, phase, kind, stage, pid, create_time, host, argv, cwd, env, printable, "
               "log_path, log_offset, status, stopped_by_user, started_at) VALUES (?, 'train', 'train', 1, ?, 0, "
               "'h', '[]', '/', '{}', 'x', ?, 0, 'running', 0, '2026-01-01 00:00:00')", (run_id, os.getpid(), str(log)))
    db.commit()
    return workspace


@pytest.mark.parametrize("args", [["status"], ["status", "--json"], ["--help"]], ids=" ".join)
def test_read_only_start_up_imports_none_of_the_heavy_rooms(live_workspace: Path, args: list[str]) -> None:
    command = [*args, "--workspace", str(live_workspace)] if args[0] == "status" else args
    chains = imported(command)
    assert "ltx_pipeline.cli.app" in chains  # the CLI really ran
    if args[0] == "status":
        assert "ltx_pipeline.store.reader" in chains
    assert heavy_ones(chains) == []
