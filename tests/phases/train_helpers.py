"""Builders shared by the train/monitor tests: datasets, CLI drives, config edits, store reads."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ltx_pipeline.cli import main

REPO = Path(__file__).resolve().parents[2]
SURFACE = REPO / "benchmarks" / "surfaces" / "h100_80gb.yaml"


def clips(root: Path, n: int = 3) -> Path:
    """Real mp4 clips (121 frames of 64x64, long enough for every default bucket) for the simulated
    backend, whose trainer reads no data: the probe and the data check still read every clip."""
    from tests.conftest import mp4_bytes

    rows = [{"caption": f"a fox {i}", "video": f"videos/c{i}.mp4"} for i in range(n)]
    (root / "videos").mkdir(parents=True, exist_ok=True)
    for i in range(n):
        (root / "videos" / f"c{i}.mp4").write_bytes(mp4_bytes())
    (root / "dataset.json").write_text(json.dumps(rows))
    return root / "dataset.json"


def mp4_clips(root: Path, n: int = 4) -> Path:
    """Media the reference trainer's preprocessing reads (17 frames of 64x64 with audio)."""
    from tests.reference_trainer.conftest import write_dataset

    return write_dataset(root, [(f"clip{i}.mp4", 17, True) for i in range(n)])


def simulated_args(workspace: Path, dataset: Path, *extra: str, surface: Path = SURFACE) -> list[str]:
    return ["run", "--workspace", str(workspace), "--run", "r1", "--dataset", str(dataset), "--backend",
            "simulated", "--surface", str(surface), "--approve", *extra]


def reference_args(workspace: Path, dataset: Path, smi: str, *extra: str) -> list[str]:
    """A reference-backend run on a (fake) probed GPU: the toy trains with no device capacity limit.

    The evaluation renders are left out (``--skip-eval``): tests/phases/test_evaluate.py and the demo
    render them; elsewhere they would only add a toy render to every run."""
    return ["run", "--workspace", str(workspace), "--run", "r1", "--dataset", str(dataset), "--backend", "reference",
            "--nvidia-smi", smi, "--buckets", "64x64x17", "--approve", "--skip-eval", *extra]


def drive_until_validate(monkeypatch: pytest.MonkeyPatch, args: list[str]) -> int:
    """Run the workflow up to validate only (so a test can edit the config before training)."""
    import phases

    full = phases.PHASES
    monkeypatch.setattr(phases, "PHASES", tuple(p for p in full if p.name not in ("train", "monitor", "autotune",
                                                                                 "evaluate")))
    try:
        return main(args)
    finally:
        monkeypatch.setattr(phases, "PHASES", full)


def patch_config(config: Path, **values: object) -> None:
    """Edit the run's config the way a user would (through the patcher, comments kept)."""
    from ltx_pipeline.ltx.config_patch import Patch, apply_patches

    text, _ = apply_patches(config.read_text(), [Patch(k.replace("__", "."), v, "test") for k, v in values.items()])
    config.write_text(text)


def store_of(workspace: Path):
    from ltx_pipeline.store import Store

    store = Store.open(workspace / "ltx-pipeline.db")
    return store, store.get_run("r1")


def resume(workspace: Path, *extra: str) -> int:
    return main(["resume", "--workspace", str(workspace), "--run", "r1", *extra])


@pytest.fixture
def training_registered(monkeypatch: pytest.MonkeyPatch) -> None:
    """Train and monitor right after validate: these tests launch the planned config as it is, so
    autotune (tested in test_autotune.py, and end to end by the demo) is left out of the registry."""
    import phases

    monkeypatch.setattr(phases, "PHASES", tuple(p for p in phases.PHASES if p.name != "autotune"))
