"""Shared fixtures: an isolated workspace and home, captured nvidia-smi outputs, dataset trees.

Every test runs with ``LTX_PIPELINE_WORKSPACE`` and ``HOME`` pointed at its own temp folders, and
with the environment variables the probe reads cleared, so no test sees the developer's machine.
Fakes exist only at the hardware edge (nvidia-smi, a trainer checkout, model files).
"""

from __future__ import annotations

import functools
import json
import os
import stat
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

# The throw-away PostgreSQL server and per-test databases of the shared-store tests (one session server).
# The suite's wall time as its last line (tests/suite_timing.py; .ci/run reports it against the goal).
pytest_plugins = ["tests.postgres", "tests.suite_timing"]

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared"
FIXTURES = Path(__file__).resolve().parent / "fixtures"

H100_SMI = "0, GPU-11111111-2222-3333-4444-555555555555, NVIDIA H100 80GB HBM3, 81559, 570.86.15\n"
RTX5090_SMI = "0, GPU-aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee, NVIDIA GeForce RTX 5090, 32607, 575.51.03\n"
RTX4090_SMI = "0, GPU-99999999-8888-7777-6666-555555555555, NVIDIA GeForce RTX 4090, 24564, 550.54.14\n"
A6000_X2_SMI = ("0, GPU-a6000000-0000-0000-0000-000000000000, NVIDIA RTX A6000, 49140, 550.54.14\n"
                "1, GPU-a6000000-0000-0000-0000-000000000001, NVIDIA RTX A6000, 49140, 550.54.14\n")
H100_X4_SMI = "".join(
    f"{i}, GPU-1111111{i}-2222-3333-4444-555555555555, NVIDIA H100 80GB HBM3, 81559, 570.86.15\n" for i in range(4)
)


FAKE_UV = f"""#!{sys.executable}
# Fake `uv run --directory D python ...`: run the rest with this interpreter inside D, src/ on the path.
import os, sys
args = sys.argv[1:]
assert args[0] == "run" and args[1] == "--directory", args
os.chdir(args[2])
rest = args[3:]
assert rest[0] == "python", rest
os.environ["PYTHONPATH"] = os.pathsep.join([os.path.join(args[2], "src"), os.environ.get("PYTHONPATH", "")])
os.execv(sys.executable, [sys.executable, *rest[1:]])
"""


@pytest.fixture(autouse=True)
def isolated_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Point every path the engine reads or writes by default into the test's temp folder."""
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("LTX_PIPELINE_WORKSPACE", str(tmp_path / "ws"))
    for name in ("CUDA_VISIBLE_DEVICES", "LTX2_ROOT", "LTX_MODELS_DIR", "LTX_PIPELINE_NVIDIA_SMI", "WANDB_API_KEY",
                 "NETRC", "CUDA_DEVICE_ORDER", "LTX_PIPELINE_UI_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    # Variables a command sets in its own process for the processes it starts (`--store` exports the store,
    # the demo its log cadence): an in-process `main()` must not leave them to the next test of this worker.
    # setenv first so that teardown removes whatever the test left.
    for name in ("LTX_PIPELINE_STORE", "LTX_REFERENCE_LOG_EVERY", "LTX_PIPELINE_HOST_ID"):
        monkeypatch.setenv(name, "")
        monkeypatch.delenv(name)
    return home


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    return tmp_path / "ws"


@pytest.fixture
def fake_smi(tmp_path: Path) -> Callable[..., str]:
    """Make an executable that replays captured nvidia-smi output (and exit status)."""

    def make(stdout: str, exit_code: int = 0, stderr: str = "", name: str = "nvidia-smi",
             pause_file: Path | None = None, calls_file: Path | None = None, pause_from_call: int = 1) -> str:
        """``calls_file`` gets a line per call; from call ``pause_from_call`` on, wait while ``pause_file`` exists."""
        path = tmp_path / "bin" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        script = f"""#!{sys.executable}
import pathlib, sys, time
calls = {str(calls_file)!r} if {calls_file is not None} else None
count = 0
if calls:
    with open(calls, "a") as handle:
        handle.write("call\\n")
    count = len(pathlib.Path(calls).read_text().splitlines())
pause = {str(pause_file)!r} if {pause_file is not None} else None
while pause and count >= {pause_from_call} and pathlib.Path(pause).exists():
    time.sleep(0.05)
sys.stdout.write({stdout!r})
sys.stderr.write({stderr!r})
sys.exit({exit_code})
"""
        path.write_text(script)
        path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
        return str(path)

    return make


@functools.cache
def mp4_bytes(frames: int = 121, height: int = 64, width: int = 64, fps: float = 24.0, audio: bool = True) -> bytes:
    """A real H.264 clip (PyAV), with a sound track unless ``audio=False`` (LTX-2's default modes train
    on audio), made once per process and reused: tests write its bytes where they need a clip."""
    import tempfile

    from ltx_pipeline.ltx.sample_clips import write_clip

    with tempfile.TemporaryDirectory() as folder:
        return write_clip(Path(folder) / "clip.mp4", frames, height, width, fps=fps, audio=audio).read_bytes()


def make_tree(root: Path, spec: dict) -> Path:
    """Build files from ``{"a/b.txt": "text", "c.bin": b"bytes", "d/": None}`` under ``root``."""
    for rel, content in spec.items():
        path = root / rel
        if rel.endswith("/"):
            path.mkdir(parents=True, exist_ok=True)
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content if content is not None else "")
    return root


GEMMA_CONFIG = json.dumps({"model_type": "gemma3", "text_config": {"model_type": "gemma3_text"}})
LTX_METADATA = {"config": json.dumps({"transformer": {}, "vae": {}, "audio_vae": {}, "vocoder": {}})}


def safetensors_bytes(metadata: dict[str, str] | None = None) -> bytes:
    """A minimal valid safetensors file (one 2x2 float32 tensor), by default with an LTX checkpoint's metadata."""
    meta = LTX_METADATA if metadata is None else metadata
    header: dict = {"weight": {"dtype": "F32", "shape": [2, 2], "data_offsets": [0, 16]}}
    if meta:
        header["__metadata__"] = meta
    raw = json.dumps(header).encode()
    raw += b" " * (-len(raw) % 8)  # the format pads the header to 8 bytes with spaces
    return len(raw).to_bytes(8, "little") + raw + bytes(16)


# Every file the trainer's GemmaAssets.from_root and Gemma 3 processor need (validate checks them on the ltx backend).
GEMMA_FOLDER: dict[str, str | bytes] = {
    "config.json": GEMMA_CONFIG, "model-00001-of-00001.safetensors": safetensors_bytes({}), "tokenizer.json": "{}",
    "tokenizer_config.json": "{}", "processor_config.json": json.dumps({"processor_class": "Gemma3Processor"}),
    "preprocessor_config.json": json.dumps({"image_processor_type": "Gemma3ImageProcessor"}),
}


def write_safetensors(path: Path, metadata: dict[str, str] | None = None) -> Path:
    """Write ``safetensors_bytes(metadata)`` to ``path`` (parents created); pass ``{}`` for no metadata."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(safetensors_bytes(metadata))
    return path


@pytest.fixture
def clips_dataset(tmp_path: Path) -> Path:
    """A small metadata dataset: dataset.json with captions and three real mp4 clips (121 frames) beside it."""
    root = tmp_path / "data"
    rows = [{"caption": f"a red fox, clip {i}", "video": f"videos/clip{i}.mp4"} for i in range(3)]
    make_tree(root, {"dataset.json": json.dumps(rows), **{f"videos/clip{i}.mp4": mp4_bytes() for i in range(3)}})
    return root / "dataset.json"


@pytest.fixture
def ltx_prereqs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """A fake LTX-2 checkout, model files and `uv`, so every prerequisite a heavy phase needs is found."""
    root = tmp_path / "LTX-2"
    trainer = "packages/ltx-trainer/"
    # The project's own reference templates are written in the trainer's schema: they stand in for
    # the shipped configs, which tests must not need.
    templates = REPO / "ltx_pipeline" / "backends" / "reference_configs"
    make_tree(root, {
        f"{trainer}configs/t2v_lora.yaml": (templates / "t2v_lora.yaml").read_text(),
        f"{trainer}configs/t2v_lora_low_vram.yaml": (templates / "t2v_lora_low_vram.yaml").read_text(),
        f"{trainer}configs/accelerate/ddp.yaml": "distributed_type: MULTI_GPU\n",
        f"{trainer}scripts/train.py": "",
        f"{trainer}scripts/process_dataset.py": "",
        "uv.lock": "", ".venv/": None,
        # `ltx_trainer.config` inside the fake checkout: the project's mirror plays the trainer's schema.
        f"{trainer}src/ltx_trainer/__init__.py": "",
        f"{trainer}src/ltx_trainer/config.py": "from ltx_pipeline.ltx.trainer_config import LtxTrainerConfig  # noqa\n",
    })
    models = tmp_path / "models"
    make_tree(models, {"ltx-2.3-22b-dev.safetensors": safetensors_bytes(),
                       **{f"gemma-3-12b-it/{name}": content for name, content in GEMMA_FOLDER.items()}})
    bin_dir = tmp_path / "tools"
    bin_dir.mkdir()
    (bin_dir / "uv").write_text(FAKE_UV)
    (bin_dir / "uv").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}")
    return {"trainer_root": str(root), "model_path": str(models / "ltx-2.3-22b-dev.safetensors"),
            "text_encoder_path": str(models / "gemma-3-12b-it")}


@pytest.fixture
def until_validate(monkeypatch: pytest.MonkeyPatch) -> None:
    """Run the workflow only up to validate: the fake LTX-2 checkout cannot really train."""
    import phases

    names = [p.name for p in phases.PHASES]
    monkeypatch.setattr(phases, "PHASES", phases.PHASES[: names.index("validate") + 1])


# Longest first: with `-n auto --dist worksteal` each worker starts on the heavy end-to-end tests and the
# many short unit tests fill the gaps at the end, so the suite ends when the last long test does.
_FOLDER_ORDER = ("system", "phases", "reference_trainer", "engine", "cli", "scenes", "unit")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    def weight(item: pytest.Item) -> tuple[int, int]:
        folder = Path(str(item.fspath)).relative_to(Path(__file__).parent).parts[0]
        rank = _FOLDER_ORDER.index(folder) if folder in _FOLDER_ORDER else len(_FOLDER_ORDER)
        heavy = item.get_closest_marker("long") or item.get_closest_marker("slow")
        return (0 if heavy else 1, rank)

    items.sort(key=weight)  # stable: collection order within a weight


def pytest_terminal_summary(terminalreporter: Any) -> None:
    """The real-trainer suite's own time, apart from building the trainer's environment and the tiny model.

    Wall time is from the first real-trainer test's start to the last one's end (other tests of the same run
    share the cores meanwhile); test time is the sum of their durations, as if run one after another.
    """
    reports = [r for key in ("passed", "failed", "skipped", "error") for r in terminalreporter.stats.get(key, [])
               if "tests/real_trainer/" in getattr(r, "nodeid", "")]
    ran = {r.nodeid for r in reports if r.when == "call"}
    if not ran:
        return
    total = sum(r.duration for r in reports)
    built = sum(value for r in reports for name, value in getattr(r, "user_properties", ())
                if name == "real_trainer_build_seconds")
    wall = max(r.stop for r in reports) - min(r.start for r in reports)
    terminalreporter.write_line(
        f"real-trainer suite: {len(ran)} test(s) ran in {(wall - built) / 60:.1f} min of wall time after the "
        f"environment exists ({(total - built) / 60:.1f} min of test time; {built:.0f} s building the trainer's "
        "environment and the tiny model in this run)")
