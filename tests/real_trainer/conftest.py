"""The real-trainer suite's fixtures: the trainer's environment, a tiny model, real clips, the CLI as a user runs it.

Every test here is marked ``real_trainer`` and skips, with the reason, when the official trainer's source
is absent (``../shared/ltx2-src`` beside the checkout, or ``$LTX2_SRC``). The environment and the tiny model
are built once and cached outside the repository (``tests/real_trainer/environment.py``); their build
time is not the suite's: ``pytest_terminal_summary`` prints the suite's own time apart.
"""

from __future__ import annotations

import fcntl
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.real_trainer.environment import TrainerEnvironment, ensure_environment, trainer_source

REPO = Path(__file__).resolve().parents[2]
BUILDER = REPO / "ltx_pipeline" / "trainer_side" / "build_tiny_model.py"
H100 = "NVIDIA H100 80GB HBM3,81559"
_BUILD_SECONDS: dict[str, float] = {}


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    here = Path(__file__).parent
    reason = None if trainer_source() else ("the official trainer's source is absent: put ../shared/ltx2-src "
                                            "beside the checkout or set LTX2_SRC")
    for item in items:
        if here in Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.real_trainer)
            item.add_marker(pytest.mark.timeout(1800))  # the first test may build the environment (minutes)
            if reason:
                item.add_marker(pytest.mark.skip(reason=reason))


@pytest.fixture(scope="session")
def trainer_env() -> TrainerEnvironment:
    try:
        built = ensure_environment()
    except LookupError as exc:
        pytest.skip(str(exc))
    _BUILD_SECONDS["environment"] = built.build_seconds
    return built


@pytest.fixture(scope="session")
def trainer_root() -> Path:
    source = trainer_source()
    assert source is not None
    return source


@pytest.fixture(scope="session")
def tiny_model(trainer_env: TrainerEnvironment) -> dict[str, Any]:
    """The tiny checkpoint and Gemma folder, built once per builder version with the trainer's own python."""
    import hashlib

    sources = sorted(BUILDER.parent.glob("*.py"))  # the builder and its private sibling modules
    key = hashlib.sha256(b"".join(path.name.encode() + path.read_bytes() for path in sources)).hexdigest()[:12]
    folder = trainer_env.root / f"tiny-model-{key}"
    with open(trainer_env.root / "tiny-model.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        record = folder / "model.json"
        if not record.is_file():
            started = time.monotonic()
            done = subprocess.run([str(trainer_env.python), str(BUILDER), "--out", str(folder)],
                                  capture_output=True, text=True, check=False, timeout=600)
            assert done.returncode == 0, done.stderr[-3000:]
            line = [ln for ln in done.stdout.splitlines() if ln.startswith("{")][-1]
            record.write_text(line)
            _BUILD_SECONDS["tiny model"] = time.monotonic() - started
    return dict(json.loads(record.read_text()))


def write_clips(folder: Path, count: int, *, audio: bool | list[bool] = True, frames: int | list[int] = 48,
                metadata: bool = True) -> Path:
    """Real H.264 clips (64x64 at 24 fps, a tone as AAC when ``audio``) and, with ``metadata``, dataset.json."""
    from ltx_pipeline.ltx.sample_clips import COLOURS, write_clip

    colours = list(COLOURS)
    rows = []
    for index in range(count):
        has_audio = audio[index] if isinstance(audio, list) else audio
        length = frames[index] if isinstance(frames, list) else frames
        colour, background = colours[index % len(colours)], colours[(index + 3) % len(colours)]
        name = f"clips/{colour}-on-{background}-{index}.mp4"
        write_clip(folder / name, length, 64, 64, colour=colour, background=background, fps=24.0, audio=has_audio,
                   phase=index / max(count, 1))
        rows.append({"caption": f"a {colour} square slides across a {background} background", "video": name})
    if not metadata:
        return folder / "clips"
    (folder / "dataset.json").write_text(json.dumps(rows, indent=2))
    return folder / "dataset.json"


# One compute thread per process: on 2 shared cores the trainer's bf16 CPU kernels spin-wait for each other and run
# up to 50 times slower with two threads (measured: a 1024x64 Linear, 1.3 ms vs 67 ms under load). The trainer,
# its preprocessing and the engine inherit it; it changes no result, only how long the suite takes.
THREADS = {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}


def cli(*args: str, env: dict[str, str] | None = None, timeout: float = 1500) -> subprocess.CompletedProcess[str]:
    """The installed command line, as a user runs it (a subprocess; stdout and stderr kept apart)."""
    return subprocess.run([sys.executable, "-m", "ltx_pipeline.cli", *args], capture_output=True, text=True,
                          timeout=timeout, check=False, env={**os.environ, **THREADS, **(env or {})})


def run_args(workspace: Path, trainer_env: TrainerEnvironment, trainer_root: Path, model: dict[str, Any],
             dataset: Path, *extra: str) -> list[str]:
    """``run`` on the ltx backend with the tiny model, planned for an assumed H100, autotune off.

    Validation samples take 3 denoising steps (``--set``), not the templates' 30: the suite checks that they are
    made and decode, and the sampler's code path is the same; 30 steps made validation half of each training.
    """
    return ["run", "--workspace", str(workspace), "--backend", "ltx", "--trainer-root", str(trainer_root),
            "--trainer-python", str(trainer_env.python), "--model-path", model["checkpoint"],
            "--text-encoder-path", model["text_encoder"], "--dataset", str(dataset), "--mode", "t2v",
            "--buckets", "64x64x25", "--assume-gpu", H100, "--autotune", "off",
            "--set", "validation.inference_steps=3", *extra]


#: For a run whose test reads no step-0 sample: the trainer's initial validation pass is skipped.
NO_STEP_ZERO = ("--set", "validation.skip_initial_validation=true")


@pytest.fixture
def real_env(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """No GPU probe on PATH: this machine is planned for with --assume-gpu, as a planning host would be."""
    monkeypatch.delenv("LTX2_ROOT", raising=False)
    yield


@pytest.fixture(autouse=True)
def _report_build_time(request: pytest.FixtureRequest) -> Iterator[None]:
    """Hand this worker's build time (environment, tiny model) to the controller's summary, once."""
    yield
    if _BUILD_SECONDS:
        request.node.user_properties.append(("real_trainer_build_seconds", sum(_BUILD_SECONDS.values())))
        _BUILD_SECONDS.clear()
