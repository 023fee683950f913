"""Builders for reference-trainer tests: a toy base, a synthetic dataset, and trainer configs."""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import shutil
import subprocess
import sys
import types
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]


def write_dataset(folder: Path, clips: list[tuple[str, int, bool]], width: int = 64, height: int = 64,
                  fps: float = 24.0, colour: str = "red") -> Path:
    """Real H.264 mp4s (a square moving over a background, written with PyAV) and a dataset.jsonl.

    ``clips`` holds (name, frames, has_audio) each; the background colour changes with the index so no
    two clips are alike.
    """
    from ltx_pipeline.ltx.sample_clips import write_clip

    backgrounds = ("blue", "green", "black", "white", "purple", "yellow")
    rows = []
    for index, (name, frames, audio) in enumerate(clips):
        background = backgrounds[index % len(backgrounds)]
        write_clip(folder / "videos" / name, frames, height, width, colour=colour, background=background, fps=fps,
                   audio=audio, phase=index / 7)
        rows.append({"caption": f"a {colour} square on a {background} background",
                     "video": f"videos/{name}"})
    dataset = folder / "dataset.jsonl"
    dataset.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return dataset


class Project:
    """A tmp folder holding a base model, preprocessed data and a config writer."""

    def __init__(self, root: Path, base: Path, data_root: Path) -> None:
        self.root, self.base, self.data_root = root, base, data_root

    def config(self, name: str = "config.yaml", **sections) -> Path:  # noqa: ANN003
        """Write a flexible t2v config with small defaults; ``sections`` deep-merge over them."""
        config = {
            "model": {"model_path": str(self.base), "text_encoder_path": str(self.root), "training_mode": "lora"},
            "lora": {"rank": 4, "alpha": 4, "target_modules": ["to_k", "to_q", "to_v", "to_out.0"]},
            "training_strategy": {"name": "flexible", "video": {"is_generated": True, "latents_dir": "latents"}},
            "optimization": {"learning_rate": 1e-3, "steps": 6, "batch_size": 1, "optimizer_type": "adamw",
                             "scheduler_type": "linear", "enable_gradient_checkpointing": False},
            "acceleration": {"mixed_precision_mode": "bf16", "quantization": None},
            "data": {"preprocessed_data_root": str(self.data_root), "num_dataloader_workers": 0},
            "validation": {"samples": [{"prompt": "a red cube spins"}], "video_dims": [64, 64, 9],
                           "inference_steps": 2, "interval": None},
            "checkpoints": {"interval": None, "keep_last_n": -1},
            "seed": 7,
            "output_dir": str(self.root / "out"),
        }
        for section, values in sections.items():
            if isinstance(values, dict) and isinstance(config.get(section), dict):
                config[section] = {**config[section], **values}
            else:
                config[section] = values
        path = self.root / name
        path.write_text(yaml.safe_dump(config))
        return path


def make_project(root: Path, clips: list[tuple[str, int, bool]] | None = None, bucket: str = "64x64x17",
                 **arch: int) -> Project:
    """Base model + dataset + preprocessing into ``root/.precomputed``."""
    from ltx_pipeline.reference_trainer import make_base, preprocess

    root.mkdir(parents=True, exist_ok=True)
    base = root / "base.safetensors"
    make_base.main([str(base)] + [f"--{k.replace('_', '-')}={v}" for k, v in arch.items()])
    dataset = write_dataset(root, clips or [(f"clip{i}.mp4", 17, True) for i in range(4)])
    code = preprocess.main([str(dataset), "--resolution-buckets", bucket, "--model-path", str(base),
                            "--text-encoder-path", str(root)])
    assert code == 0
    return Project(root, base, root / ".precomputed")


def run_trainer(config: Path, *extra: str, env: dict | None = None, timeout: int = 120,
                launcher: list[str] | None = None) -> subprocess.CompletedProcess:
    """Run the reference trainer CLI in a subprocess (repo on the path, wide columns)."""
    full_env = {**os.environ, "PYTHONPATH": str(REPO), "PYTHONUNBUFFERED": "1", "LTX_REFERENCE_DEVICE": "cpu",
                **(env or {})}
    full_env.pop("LOCAL_RANK", None)
    argv = (launcher or [sys.executable, "-m"]) + ["ltx_pipeline.reference_trainer", str(config),
                                                    "--disable-progress-bars", *extra]
    return subprocess.run(argv, capture_output=True, text=True, env=full_env, timeout=timeout, cwd=config.parent,
                          check=False)


@pytest.fixture(scope="session")
def default_project_source(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The default project (base, 4 clips of 64x64x17 with audio, their preprocessing), built once per run.

    Under xdist every worker is its own process: they share the run's temp root, and the first to take the
    lock builds the project there (a few seconds of torch and PyAV); the others wait and reuse it. It is never
    trained in: ``project`` hands each module a copy.
    """
    from filelock import FileLock

    base = tmp_path_factory.getbasetemp()
    shared = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base  # the run's root, not a user-wide one
    source = shared / "reference-default-project"
    with FileLock(str(shared / "reference-default-project.lock")):
        if not (source / ".complete").is_file():
            shutil.rmtree(source, ignore_errors=True)  # a build that died half-way
            make_project(source)
            (source / ".complete").write_text("")
    return source


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory, default_project_source: Path) -> Project:
    """One project per test module (4 clips of 64x64x17 with audio): a copy of the run's default project."""
    root = tmp_path_factory.mktemp("reference")
    shutil.copytree(default_project_source, root, dirs_exist_ok=True, ignore=shutil.ignore_patterns(".complete"))
    return Project(root, root / "base.safetensors", root / ".precomputed")


def train_in_process(config: Path, capsys: pytest.CaptureFixture, env: dict | None = None,
                     monkeypatch: pytest.MonkeyPatch | None = None) -> tuple[int, str]:
    """Run the trainer's ``main`` in this process (imports paid once); returns (exit code, stdout)."""
    from ltx_pipeline.reference_trainer.__main__ import main

    capsys.readouterr()
    # Other tests in this worker may have run code that reconfigures logging (a dictConfig disables
    # existing loggers; a rank-1 set-up lowers the level): set the trainer's logger up afresh, as a new
    # trainer process would.
    trainer_logger = logging.getLogger("ltxv_trainer")
    trainer_logger.disabled = False
    trainer_logger._reference_configured = False  # type: ignore[attr-defined]
    monkeypatch.delenv("LOCAL_RANK", raising=False)
    for key, value in {"LTX_REFERENCE_DEVICE": "cpu", "LTX_REFERENCE_LOG_EVERY": "1", **(env or {})}.items():
        monkeypatch.setenv(key, value)
    code = main([str(config), "--disable-progress-bars"])
    return code, capsys.readouterr().out


def peak_bytes(output_dir: Path) -> dict:
    """The measured peaks the trainer wrote beside its outputs."""
    return json.loads((output_dir / "reference_memory.json").read_text())["peak_bytes"]


class InProcessHandle:
    """What ``RunJournal.run_to_end`` returns, for a toy script run in this process."""

    def __init__(self, code: int) -> None:
        self.code = code

    def exit(self) -> dict[str, int]:
        return {"exit_code": self.code}


class InProcessJournal:
    """Runs the toy's preprocessing script (``python -m <module> ARGS``) in this process instead of supervising a
    child; ``started`` keeps (script, media of each row given) per process, appended to its log as a child would."""

    def __init__(self) -> None:
        self.started: list[tuple[str, list[str]]] = []

    @property
    def runs(self) -> int:
        return len(self.started)

    def run_to_end(self, kind: str, stage: int, spec, log: Path) -> InProcessHandle:
        import contextlib
        import importlib
        import io

        assert kind == "preprocess"
        module, args = spec.argv[2], list(spec.argv[3:])
        text = Path(args[0]).read_text()
        rows = [json.loads(line) for line in text.splitlines() if line.strip()] if args[0].endswith(".jsonl") \
            else json.loads(text)
        self.started.append((module.rsplit(".", 1)[-1],
                             [Path(row.get("video") or row.get("media_path") or "").name for row in rows]))
        log.parent.mkdir(parents=True, exist_ok=True)
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            code = importlib.import_module(module).main(args)
        with log.open("a") as handle:
            handle.write(out.getvalue())
        return InProcessHandle(code)


@dataclasses.dataclass
class PreprocessContext:
    """The parts of a phase's context ``preprocessing.run.preprocess`` reads, on the reference backend."""

    workspace: Path
    paths: object  # ltx_pipeline.workspace.RunPaths
    request: object = dataclasses.field(default_factory=lambda: types.SimpleNamespace(trigger=None))
    backend: object = dataclasses.field(default_factory=lambda: _reference_backend())
    journal: InProcessJournal = dataclasses.field(default_factory=InProcessJournal)
    phase: str = "train"
    said: list[str] = dataclasses.field(default_factory=list)

    def narrate(self, message: str) -> None:
        self.said.append(message)

    def warn(self, message: str) -> None:
        self.said.append(message)


def _reference_backend() -> object:
    from ltx_pipeline.backends.reference import ReferenceBackend

    return ReferenceBackend()
