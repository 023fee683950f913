"""Three clips on four GPUs: the plan launches three processes and says why, so the run validates instead of
being refused after approval for a process with no batch (and ``--processes 4`` is refused with a fix that works)."""

from __future__ import annotations

from pathlib import Path

import pytest

from ltx_pipeline.cli import main
from tests.phases.train_helpers import clips, simulated_args, store_of

FOUR_GPUS = ("--assume-gpu", "H100,81559,4")


@pytest.mark.usefixtures("until_validate")
def test_the_plan_launches_one_process_per_sample_when_there_are_fewer_samples_than_gpus(
        workspace: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(simulated_args(workspace, clips(tmp_path / "data", n=3), *FOUR_GPUS)) == 0, capsys.readouterr().err
    store, row = store_of(workspace)
    phases = store.latest_phase_runs(row.id)
    assert phases["validate"].outputs["num_processes"] == 3
    assert ("3 process(es): one per GPU, but the dataset gives 3 sample(s) to train on and a process with no sample "
            "has no batch (1 GPU(s) left idle)") in (workspace / "r1" / "plan.md").read_text()


@pytest.mark.usefixtures("until_validate")
def test_asked_for_more_processes_than_samples_the_fix_names_a_count_that_works(
        workspace: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(simulated_args(workspace, clips(tmp_path / "data", n=3), *FOUR_GPUS, "--processes", "4")) == 2
    err = capsys.readouterr().err
    assert "[zero-batches]" in err and "train on fewer GPUs: `--processes 3`" in err
    assert "lower optimization.batch_size to 1" not in err  # it is 1 already
