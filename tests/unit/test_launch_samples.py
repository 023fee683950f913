"""One process per GPU stops at the samples the plan can count: a process with no sample has no batch (with
``drop_last`` every epoch would be empty, and validate refuses it). ``--processes`` is taken as given."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from ltx_pipeline.ltx.launch_plan import launch_shape
from ltx_pipeline.ltx.preparation import PreparationPlan, holdout_count, samples_to_train


@given(gpus=st.integers(1, 8), samples=st.none() | st.integers(1, 20))
def test_one_process_per_gpu_up_to_the_samples(gpus: int, samples: int | None) -> None:
    shape = launch_shape(backend="ltx", gpu_count=gpus, requested=None, training_mode="lora", samples=samples)
    assert shape.processes == (min(gpus, samples) if samples else gpus)
    if samples is not None and samples < gpus:
        assert f"the dataset gives {samples} sample(s)" in shape.reason and f"{gpus - samples} GPU(s) left idle" \
            in shape.reason
    else:
        assert shape.reason == f"one process per GPU ({gpus})"


def test_asked_processes_and_several_nodes_are_not_capped() -> None:
    assert launch_shape(backend="ltx", gpu_count=4, requested=4, training_mode="lora", samples=2).processes == 4
    assert launch_shape(backend="ltx", gpu_count=4, requested=None, training_mode="lora", nodes=2,
                        samples=2).processes == 4  # every node runs as many: the data is split over them all


def _metadata(rows: int) -> dict[str, Any]:
    return {"kind": "metadata", "path": "/d/data.json", "metadata": {"rows": rows}}


@given(rows=st.integers(1, 40), holdout=st.none() | st.integers(0, 5))
def test_the_rows_less_the_held_out_ones(rows: int, holdout: int | None) -> None:
    unprepared = PreparationPlan(False, "captions in every row", "metadata")
    counted = samples_to_train(_metadata(rows), unprepared, holdout=holdout, holdout_file=None)
    if holdout is not None and holdout >= rows:
        assert counted == rows  # refused by the plan with its own message
    else:
        assert counted == rows - holdout_count(rows, holdout)
    assert samples_to_train(_metadata(rows), unprepared, holdout=holdout, holdout_file="/d/holdout.jsonl") == rows


def test_prepared_clips_and_scenes_precomputed_latents_and_what_cannot_be_counted() -> None:
    folder = {"kind": "videos_folder", "path": "/d"}
    split = PreparationPlan(True, "a folder", "videos_folder", clips=2, split_videos=("/d/long.mp4",),
                            scenes=({"video": "/d/long.mp4", "scenes": [[0, 50], [50, 99]], "dropped": []},))
    assert samples_to_train(folder, split, holdout=None, holdout_file=None) == 4  # 2 clips + 2 scenes, < 8: none held
    precomputed = {"kind": "precomputed", "path": "/p", "precomputed": {"subfolders": {"latents": 3}}}
    assert samples_to_train(precomputed, PreparationPlan(False, "as it is", "precomputed"), holdout=None,
                            holdout_file=None) == 3
    prior = {"kind": "prior_run", "path": "/r"}
    assert samples_to_train(prior, PreparationPlan(False, "as it is", "prior_run"), holdout=None,
                            holdout_file=None) is None
