"""The holdout-loss protocol on the toy trainer (#45): fixed noise gives the same figures twice, checkpoints
differ, and a measurement killed after some checkpoints measures only the missing ones when it runs again.

One toy training of 4 steps (checkpoints at 2 and 4) per module; the job is the engine's (``holdout.protocol``),
measured in process by ``reference_trainer.holdout_loss.run`` as ``python -m`` would.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from ltx_pipeline.holdout.protocol import Job, JobCheckpoint, checkpoint_id, read_results
from tests.reference_trainer.conftest import Project


@pytest.fixture(scope="module")
def trained(project: Project) -> Project:
    """The project trained 4 steps, with checkpoints at steps 2 and 4."""
    import logging

    from ltx_pipeline.reference_trainer.__main__ import main

    config = project.config("holdout.yaml", output_dir=str(project.root / "holdout-run"),
                            optimization={"steps": 4, "learning_rate": 5e-3},
                            checkpoints={"interval": 2, "keep_last_n": -1})
    logging.getLogger("ltxv_trainer")._reference_configured = False  # type: ignore[attr-defined]
    with pytest.MonkeyPatch.context() as monkeypatch:
        monkeypatch.delenv("LOCAL_RANK", raising=False)
        monkeypatch.setenv("LTX_REFERENCE_DEVICE", "cpu")
        assert main([str(config), "--disable-progress-bars"]) == 0
    return project


def _job(project: Project, results: Path) -> dict[str, Any]:
    folder = project.root / "holdout-run" / "checkpoints"
    weights = sorted(folder.glob("lora_weights_step_*.safetensors"))
    checkpoints = (JobCheckpoint(0, None, checkpoint_id(0, None)),
                   *(JobCheckpoint(int(p.stem[-5:]), str(p), checkpoint_id(int(p.stem[-5:]), p)) for p in weights))
    job = Job(config=project.root / "holdout.yaml", holdout_root=project.data_root, train_root=project.data_root,
              checkpoints=checkpoints, results=results, data_identity=None)
    data: dict[str, Any] = json.loads(job.to_json())
    return data


def _figures(entries: list[dict[str, Any]]) -> list[tuple[int, dict[str, Any], dict[str, Any]]]:
    return [(e["step"], e["holdout"], e["train"]) for e in entries]


def test_fixed_noise_gives_identical_figures_twice_and_checkpoints_differ(trained: Project, monkeypatch) -> None:
    from ltx_pipeline.reference_trainer.holdout_loss import run

    monkeypatch.setenv("LTX_REFERENCE_DEVICE", "cpu")
    first = run(_job(trained, trained.root / "first.json"))
    second = run(_job(trained, trained.root / "second.json"))
    assert [e["step"] for e in first] == [0, 2, 4]
    assert _figures(first) == _figures(second)  # exactly: the same noise, sigmas and conditioning draws
    totals = [e["holdout"]["total"] for e in first]
    assert len(set(totals)) == 3, totals  # each checkpoint's weights give their own figure
    for entry in first:  # the project's strategy generates video only: no audio figure, the total is the video's
        for figure in (entry["holdout"], entry["train"]):
            assert figure["audio"] is None and figure["total"] == figure["video"]
    assert first[0]["train"]["samples"] == 4 and first[0]["holdout"]["samples"] == 4


def test_a_measurement_killed_after_one_checkpoint_measures_only_the_missing_ones(trained: Project,
                                                                                   monkeypatch) -> None:
    from ltx_pipeline.reference_trainer import holdout_loss

    monkeypatch.setenv("LTX_REFERENCE_DEVICE", "cpu")
    full = holdout_loss.run(_job(trained, trained.root / "full.json"))
    job = _job(trained, trained.root / "killed.json")
    # What the script had written when it was killed during its second checkpoint: the first one only.
    Path(job["results"]).write_text(json.dumps({"protocol": job["protocol"], "checkpoints": full[:1]}))
    loaded: list[str | None] = []
    real_use = holdout_loss._Toy.use
    monkeypatch.setattr(holdout_loss._Toy, "use", lambda self, weights: (loaded.append(weights),
                                                                          real_use(self, weights))[1])
    resumed = holdout_loss.run(job)
    assert loaded == [c["path"] for c in job["checkpoints"][1:]]  # steps 2 and 4, never the base again
    assert _figures(resumed) == _figures(full)
    assert read_results(Path(job["results"]), job["protocol"]) == resumed
    loaded.clear()
    assert holdout_loss.run(job) == resumed and loaded == []  # nothing left to measure: the model is not loaded


def test_figures_of_another_protocol_are_measured_again(trained: Project, monkeypatch) -> None:
    from ltx_pipeline.reference_trainer.holdout_loss import run

    monkeypatch.setenv("LTX_REFERENCE_DEVICE", "cpu")
    job = _job(trained, trained.root / "other.json")
    stale = [{"id": c["id"], "step": c["step"], "checkpoint": c["path"], "holdout": {}, "train": {}, "seconds": 0}
             for c in job["checkpoints"]]
    Path(job["results"]).write_text(json.dumps({"protocol": "sha256:another", "checkpoints": stale}))
    entries = run(job)
    assert [e["step"] for e in entries] == [0, 2, 4] and all(e["holdout"] for e in entries)
