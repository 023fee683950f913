"""plan.md's holdout-loss counts against what the measurement does on the toy (#45), across generated settings.

For each setting (steps, checkpoint interval, held-out rows, training rows) the toy trains with the plan's
retention (keep_last_n -1); the section's counts (``holdout.forecast.after_autotune``, as autotune writes them) are
then compared with the measurement of the job the evaluate phase builds (every weights file the stage kept, step 0
first): the checkpoints it measured, the rows in its results, how many times the model was loaded and how many
forward passes it made (each ``_Toy.loss`` call is one sample at one sigma, without gradients).
"""

from __future__ import annotations

import json
import shutil
import types
from pathlib import Path

import pytest

from ltx_pipeline.checkpoints.discovery import weights_files
from ltx_pipeline.holdout.forecast import Rows, after_autotune
from ltx_pipeline.holdout.protocol import Job, JobCheckpoint, checkpoint_id
from ltx_pipeline.outputs.autotune import AutotuneOutputs
from tests.reference_trainer.conftest import Project, train_in_process


def _subset(root: Path, count: int, into: Path) -> Path:
    """A copy of the ``.precomputed`` at ``root`` holding its first ``count`` samples only."""
    shutil.copytree(root, into)
    keep = {p.stem for p in sorted((into / "latents").rglob("*.pt"))[:count]}
    for path in into.rglob("*.pt"):
        if path.stem not in keep:
            path.unlink()
    return into


@pytest.mark.parametrize(("steps", "interval", "held", "training"), [(3, 2, 1, 4), (4, 2, 2, 2), (5, None, 3, 1)])
def test_the_counts_plan_md_states_are_what_the_measurement_does(project: Project, tmp_path: Path, capsys,
                                                                  monkeypatch, steps: int, interval: int | None,
                                                                  held: int, training: int) -> None:
    from ltx_pipeline.backends.reference import ReferenceBackend
    from ltx_pipeline.reference_trainer import holdout_loss

    out = tmp_path / "out"
    config = project.config(f"forecast-{steps}-{interval}.yaml", output_dir=str(out),
                            optimization={"steps": steps, "learning_rate": 5e-3},
                            checkpoints={"interval": interval, "keep_last_n": -1})
    assert train_in_process(config, capsys, monkeypatch=monkeypatch)[0] == 0
    autotune = AutotuneOutputs(baseline={}, deltas={}, patches=[], reports={}, objective=0.5, per_gpu_batch=1)
    ctx = types.SimpleNamespace(request=types.SimpleNamespace(holdout_loss="on"), backend=ReferenceBackend())
    stated = after_autotune(ctx, config, 1, 0, Rows(held, training), autotune)

    kept = weights_files(out / "checkpoints")  # as measure._job lists the stage's checkpoints
    job = Job(config=config, holdout_root=_subset(project.data_root, held, tmp_path / "held"),
              train_root=_subset(project.data_root, training, tmp_path / "train"),
              checkpoints=(JobCheckpoint(0, None, checkpoint_id(0, None)),
                           *(JobCheckpoint(step, path, checkpoint_id(step, Path(path))) for step, path in kept)),
              results=tmp_path / "results.json", data_identity=None)
    loads: list[object] = []
    passes: list[float] = []
    real_init, real_loss = holdout_loss._Toy.__init__, holdout_loss._Toy.loss
    monkeypatch.setattr(holdout_loss._Toy, "__init__", lambda self, c: (loads.append(c), real_init(self, c))[1])
    monkeypatch.setattr(holdout_loss._Toy, "loss", lambda self, b, sigma, seed: (passes.append(sigma),
                                                                                  real_loss(self, b, sigma, seed))[1])
    monkeypatch.setenv("LTX_REFERENCE_DEVICE", "cpu")
    entries = holdout_loss.run(json.loads(job.to_json()))

    assert [e["step"] for e in entries] == list(stated.steps)
    assert {e["holdout"]["samples"] for e in entries} == {stated.held_out}
    assert {e["train"]["samples"] for e in entries} == {stated.training} == {min(4, training)}
    assert len(loads) == 1  # the model once, whatever the checkpoints
    assert len(passes) == stated.passes == len(stated.steps) * (held + min(4, training)) * stated.sigmas
