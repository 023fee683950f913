"""Two finished reference-backend runs in one workspace, alike but for the learning rate: what ``compare`` reads.

Built once per test session (shared by the xdist workers through a file lock, as the dashboard's demo
workspace is) and only read by the tests: ``r1`` at ``--learning-rate 1e-2``, ``r2`` at ``5e-3``, each 4 steps
of the toy trainer on the same 3 clips (the second takes its latents from the workspace's latent cache), a
loss logged every step, the evaluation rendered (one out-of-distribution prompt). Import the fixture into a
test module to use it.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ENGINE = [sys.executable, "-c", "from ltx_pipeline.cli import main; main()"]
LEARNING_RATES = {"r1": "1e-2", "r2": "5e-3"}


def _shared_root(factory: pytest.TempPathFactory) -> Path:
    base = factory.getbasetemp()
    return base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base  # the run's root, not a user-wide one


def build(root: Path) -> Path:
    """The two runs under ``root/ws`` (clips under ``root/data``); returns the workspace."""
    from tests.phases.train_helpers import mp4_clips

    workspace = root / "ws"
    dataset = mp4_clips(root / "data", n=3)
    env = {**os.environ, "LTX_REFERENCE_DEVICE": "cpu", "LTX_REFERENCE_LOG_EVERY": "1",
           "LTX_PIPELINE_WORKSPACE": str(workspace)}
    for name, rate in LEARNING_RATES.items():
        args = ["run", "--workspace", str(workspace), "--run", name, "--dataset", str(dataset), "--backend",
                "reference", "--assume-gpu", "NVIDIA H100 80GB HBM3,81559", "--buckets", "64x64x17", "--steps", "4",
                "--rank", "4", "--autotune", "off", "--learning-rate", rate, "--eval-prompt",
                "a red square on a white background", "--approve"]
        done = subprocess.run([*ENGINE, *args], env=env, capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr[-2000:]
    return workspace


@pytest.fixture(scope="session")
def compare_workspace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The workspace of runs ``r1`` and ``r2`` (see the module docstring); tests only read it."""
    from filelock import FileLock

    shared = _shared_root(tmp_path_factory)
    root = shared / "compare-runs"
    with FileLock(str(shared / "compare-runs.lock")):
        if not (shared / "compare-runs.complete").is_file():
            shutil.rmtree(root, ignore_errors=True)  # a build that died half-way
            build(root)
            (shared / "compare-runs.complete").write_text("")
    return root / "ws"
