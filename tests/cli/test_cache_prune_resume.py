"""``cache prune`` never breaks a resumable run (#44, done-when): a run that failed in training after its
preprocessing is resumed after a prune and starts no preprocessing process; a finished run's entries go.

Real runs on the reference backend (its toy trainer runs out of its simulated memory in the first, and trains
once that limit is lifted). Hard links are made to fail, so runs' folders hold symbolic links to the entries,
as with a team cache on another file system: an entry pruned from under a resumable run would leave its
folder broken and make the resume encode again.
"""

from __future__ import annotations

import errno
import json
import os
from pathlib import Path

import pytest

from ltx_pipeline.cache import EntryStore, read_uses
from ltx_pipeline.cli import main
from ltx_pipeline.env_names import REFERENCE_CAPACITY_ENV
from tests.conftest import H100_SMI
from tests.phases.train_helpers import reference_args, training_registered  # noqa: F401 - the fixture
from tests.reference_trainer.conftest import write_dataset


def _run(workspace: Path, name: str, dataset: Path, smi: str) -> list[str]:
    args = reference_args(workspace, dataset, smi, "--steps", "1")
    args[args.index("--run") + 1] = name
    return args


def _preprocessings(workspace: Path, name: str) -> int:
    from ltx_pipeline.store import Store

    store = Store.open(workspace / "ltx-pipeline.db")
    return len(store.processes(int(store.get_run(name).id or 0), "preprocess"))


@pytest.mark.long  # three real runs of the toy (two trainings, one out of memory): about 55 s on 2 busy cores
@pytest.mark.usefixtures("training_registered")
def test_a_failed_run_resumes_after_a_prune_without_preprocessing_and_a_finished_runs_entries_go(
        workspace: Path, tmp_path: Path, fake_smi, capsys: pytest.CaptureFixture[str],  # noqa: ANN001
        monkeypatch: pytest.MonkeyPatch) -> None:
    def no_hard_links(source: object, target: object) -> None:
        raise OSError(errno.EXDEV, "Invalid cross-device link")

    monkeypatch.setattr(os, "link", no_hard_links)
    smi = fake_smi(H100_SMI)
    finished = write_dataset(tmp_path / "old", [("a.mp4", 17, True)], colour="green")
    assert main(_run(workspace, "done", finished, smi)) == 0, capsys.readouterr().err
    monkeypatch.setenv(REFERENCE_CAPACITY_ENV, "1")  # the toy runs out of memory at its first step
    dataset = write_dataset(tmp_path / "data", [("a.mp4", 17, True), ("b.mp4", 17, True)])
    assert main(_run(workspace, "r1", dataset, smi)) == 1
    assert "oom_" in capsys.readouterr().err and _preprocessings(workspace, "r1") == 1

    cache = EntryStore.for_workspace(workspace)
    uses = {record.run: record.keys for record in read_uses(cache.root)}
    assert set(uses) == {"done", "r1"} and uses["r1"] and not uses["done"] & uses["r1"]
    assert main(["cache", "prune", "--workspace", str(workspace), "--older-than", "0s"]) == 0
    left = {folder.name for folder in cache.entries()}
    assert left == set(uses["r1"])  # the failed run may be resumed: its entries stay; the finished run's went
    precomputed = workspace / "r1" / "dataset" / ".precomputed"
    assert all(p.is_symlink() and p.exists() for p in precomputed.rglob("*.pt"))

    monkeypatch.delenv(REFERENCE_CAPACITY_ENV)
    capsys.readouterr()
    assert main(["resume", "--workspace", str(workspace), "--run", "r1"]) == 0, capsys.readouterr().err
    capsys.readouterr()
    assert _preprocessings(workspace, "r1") == 1  # the resume reused the run's folder: nothing encoded again
    assert main(["status", "--workspace", str(workspace), "--run", "r1", "--json"]) == 0
    [run] = json.loads(capsys.readouterr().out)["runs"]
    assert run["state"] == "finished"
    assert [(h["stage"], h["wanted"], h["hits"], h["encoded"]) for h in run["cache_hits"]] == [(1, 6, 0, 6)]
