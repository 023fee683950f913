"""Issue 44: within one run the sanity set is never encoded apart from the full set.

Autotune preprocesses the full set's stage first (as its launch would) and takes the sanity rows among the clips
that land in the sanity bucket there: their files are the stage's cache entries, linked, so the sanity set
starts no process. Fast cases drive ``preprocessing.sanity_set`` with the in-process journal (which records each
script and its rows); the long case drives a whole reference run with autotune and reads the store's process
records, for an audio and a video-only run.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from ltx_pipeline.env_names import LATENT_CACHE_ENV
from ltx_pipeline.ltx.audio_choice import trained_mode
from ltx_pipeline.ltx.buckets import parse_buckets
from ltx_pipeline.ltx.modes import Mode, get_mode
from ltx_pipeline.preprocessing.run import preprocess, write_subset_metadata
from ltx_pipeline.preprocessing.sanity_set import StagePreprocess, sanity_rows_from_stage
from ltx_pipeline.workspace import RunPaths
from tests.reference_trainer.conftest import PreprocessContext

pytest.importorskip("torch")

# Square clips land in 64x64x17, wide ones in 96x64x17: the sanity bucket (the most tokens).
BUCKETS = "64x64x17;96x64x17"
SANITY = parse_buckets("96x64x17")[0]
AUDIO_MODE = get_mode("t2v")
VIDEO_ONLY = trained_mode(get_mode("t2v"), {"trains": "video"})


def mixed_dataset(folder: Path) -> Path:
    """Two square clips first (they land in the smaller bucket), then two wide ones; all with sound."""
    from ltx_pipeline.ltx.sample_clips import write_clip

    rows = []
    for index, (name, width) in enumerate((("s0", 64), ("s1", 64), ("w0", 96), ("w1", 96))):
        write_clip(folder / "videos" / f"{name}.mp4", 17, 64, width, colour="red",
                   background=("blue", "green", "black", "white")[index], fps=24.0, audio=True, phase=index / 7)
        rows.append({"caption": f"clip {name}", "video": f"videos/{name}.mp4"})
    dataset = folder / "dataset.jsonl"
    dataset.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return dataset


@pytest.fixture
def base(tmp_path: Path) -> Path:
    from ltx_pipeline.reference_trainer import make_base

    path = tmp_path / "base.safetensors"
    assert make_base.main([str(path), "--layers", "1", "--text-len", "10", "--text-dim", "16"]) == 0
    return path


def paths_of(ctx: PreprocessContext) -> RunPaths:
    assert isinstance(ctx.paths, RunPaths)
    return ctx.paths


def context(workspace: Path) -> PreprocessContext:
    """The autotune phase's context, reduced to what preprocessing reads (run ``r1``)."""
    return PreprocessContext(workspace=workspace, paths=RunPaths(workspace / "r1"), phase="autotune")


def stage_of(ctx: PreprocessContext, dataset: Path, base: Path, mode: Mode) -> StagePreprocess:
    return StagePreprocess(mode=mode, metadata_file=dataset, buckets=parse_buckets(BUCKETS),
                           output_dir=paths_of(ctx).dataset / ".precomputed", stage=1, model_path=str(base),
                           text_encoder_path=str(base))


def sanity_set(ctx: PreprocessContext, dataset: Path, base: Path, mode: Mode, count: int) -> tuple[list[int] | None,
                                                                                                 dict[str, Any]]:
    """What autotune does: the rows (from the stage when it can), then the sanity set at the sanity bucket."""
    overfit = paths_of(ctx).overfit
    indices = sanity_rows_from_stage(ctx, stage_of(ctx, dataset, base, mode), SANITY, count)
    subset, _ = write_subset_metadata(ctx, dataset, count, overfit / "sanity.json", indices=indices)
    result = preprocess(ctx, mode=mode, metadata_file=subset, buckets=(SANITY,), output_dir=overfit / ".precomputed",
                        stage=0, model_path=str(base), text_encoder_path=str(base),
                        extra_flags=[] if mode.audio_run else ["--skip-audio"])
    return indices, result


def pt_files(root: Path) -> dict[str, os.stat_result]:
    return {str(p.relative_to(root)): p.stat() for p in sorted(root.rglob("*.pt"))}


@pytest.mark.parametrize(("mode", "folders"), [(AUDIO_MODE, {"latents", "conditions", "audio_latents"}),
                                               (VIDEO_ONLY, {"latents", "conditions"})], ids=["audio", "video-only"])
def test_the_sanity_set_is_the_stages_entries_linked_with_no_process_of_its_own(
        tmp_path: Path, base: Path, mode: Mode, folders: set[str]) -> None:
    dataset = mixed_dataset(tmp_path / "data")
    ctx = context(tmp_path / "ws")
    paths = paths_of(ctx)

    indices, result = sanity_set(ctx, dataset, base, mode, count=2)

    assert indices == [2, 3]  # the wide clips, which land in the sanity bucket; not the first two rows
    # One process: the whole stage's, every row once; the sanity rows were never given to a script on their own.
    assert ctx.journal.started == [("preprocess", ["s0.mp4", "s1.mp4", "w0.mp4", "w1.mp4"])]
    assert [row["video"].rsplit("/", 1)[-1] for row in json.loads((paths.overfit / "sanity.json").read_text())] \
        == ["w0.mp4", "w1.mp4"]
    assert result["samples"] == 2 and not result["reused"]
    sanity, stage = pt_files(paths.overfit / ".precomputed"), pt_files(paths.dataset / ".precomputed")
    assert {name.split("/", 1)[0] for name in sanity} == folders and len(sanity) == 2 * len(folders)
    stage_inodes = {(s.st_dev, s.st_ino) for s in stage.values()}
    for name, found in sanity.items():  # each a hard link to the very entry the stage links
        assert (found.st_dev, found.st_ino) in stage_inodes, name
        assert found.st_nlink >= 3, name  # the entry, the stage's link, the sanity set's link
    assert any("Sanity set: 2 row(s) whose clips land in 96x64x17 in stage 1" in line for line in ctx.said)

    # Autotune run again (a resume): both folders are verified and reused; still nothing encoded.
    again = context(ctx.workspace)
    assert sanity_set(again, dataset, base, mode, count=2)[0] == [2, 3]
    assert again.journal.started == []


def test_too_few_clips_in_the_sanity_bucket_leave_the_stage_to_train_and_say_so(tmp_path: Path, base: Path) -> None:
    dataset = mixed_dataset(tmp_path / "data")
    ctx = context(tmp_path / "ws")
    paths = paths_of(ctx)

    indices, _ = sanity_set(ctx, dataset, base, AUDIO_MODE, count=3)  # only two wide clips

    assert indices is None
    assert not (paths.dataset / ".precomputed").exists()  # the stage is train's to preprocess, as before
    assert ctx.journal.started == [("preprocess", ["s0.mp4", "s1.mp4", "w0.mp4"])]  # the first rows, as before
    assert any("as before the latent cache: 2 of stage 1's clip(s) land in 96x64x17, fewer than the 3 it needs"
               in line for line in ctx.said)


def test_with_the_cache_off_the_sanity_set_is_preprocessed_on_its_own_as_before(
        tmp_path: Path, base: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(LATENT_CACHE_ENV, "off")
    dataset = mixed_dataset(tmp_path / "data")
    ctx = context(tmp_path / "ws")
    paths = paths_of(ctx)

    indices, _ = sanity_set(ctx, dataset, base, VIDEO_ONLY, count=1)

    assert indices is None and not (paths.dataset / ".precomputed").exists()
    assert ctx.journal.started == [("preprocess", ["s0.mp4"])]
    assert any("as before the latent cache: the latent cache is off" in line for line in ctx.said)


# --- A whole run on the reference backend, autotune on: the store's process records. ---

def _rows_given(monkeypatch: pytest.MonkeyPatch) -> dict[tuple[str, ...], list[str]]:
    """argv -> the clip names of the metadata each preprocessing command was made for (read when it is made:
    a script's subset may live in a staging folder that is gone after the run)."""
    from ltx_pipeline.backends.reference import ReferenceBackend

    given: dict[tuple[str, ...], list[str]] = {}
    original = ReferenceBackend.preprocess_command

    def spy(self: ReferenceBackend, dataset: Path, *args: Any, **kwargs: Any) -> Any:
        spec = original(self, dataset, *args, **kwargs)
        text = Path(dataset).read_text()
        rows = [json.loads(line) for line in text.splitlines() if line.strip()] if str(dataset).endswith(".jsonl") \
            else json.loads(text)
        given[tuple(spec.argv)] = [Path(row["video"]).name for row in rows]
        return spec

    monkeypatch.setattr(ReferenceBackend, "preprocess_command", spy)
    return given


@pytest.mark.long  # 45 s each on 2 busy cores (20 s CPU): a whole run, two 4-step trials and a 2-step training
@pytest.mark.slow
@pytest.mark.parametrize("audio", ["auto", "off"])
def test_a_whole_run_encodes_the_sanity_set_with_the_full_set_in_one_process(
        tmp_path: Path, workspace: Path, fake_smi: Any, monkeypatch: pytest.MonkeyPatch, audio: str) -> None:
    import ltx_pipeline.autotune.trial_runner as trial_runner
    from ltx_pipeline.autotune._trial import TrialSettings
    from ltx_pipeline.cli import main
    from ltx_pipeline.store import Store
    from tests.conftest import H100_SMI

    monkeypatch.setattr(trial_runner, "trial_settings",
                        lambda backend: TrialSettings(steps=4, env={"LTX_REFERENCE_LOG_EVERY": "1"}))
    given = _rows_given(monkeypatch)
    dataset = mixed_dataset(tmp_path / "data")
    assert main(["run", "--workspace", str(workspace), "--run", "r1", "--dataset", str(dataset), "--backend",
                 "reference", "--nvidia-smi", fake_smi(H100_SMI), "--buckets", BUCKETS, "--approve", "--skip-eval",
                 "--strategy", "mixed", "--steps", "2", "--audio", audio]) == 0

    store = Store.open(workspace / "ltx-pipeline.db")
    run = store.get_run("r1")
    assert run is not None and run.id is not None
    processes = store.processes(run.id, kind="preprocess")
    # Exactly one preprocessing process in the run: stage 1's, over every row; none for the sanity set (stage 0).
    assert [(p.phase, p.stage) for p in processes] == [("autotune", 1)]
    assert given[tuple(processes[0].argv)] == ["s0.mp4", "s1.mp4", "w0.mp4", "w1.mp4"]
    assert [p.stage for p in store.processes(run.id, kind="train")] == [1]  # train reused the stage's folder
    root = workspace / "r1"
    sanity, stage = pt_files(root / "overfit" / ".precomputed"), pt_files(root / "dataset" / ".precomputed")
    assert sanity and {(s.st_dev, s.st_ino) for s in sanity.values()} <= {(s.st_dev, s.st_ino) for s in stage.values()}
    assert any(name.startswith("audio_latents/") for name in sanity) is (audio == "auto")
    assert [Path(row["video"]).name for row in json.loads((root / "overfit" / "sanity.json").read_text())] == \
        ["w0.mp4"]  # a multi-bucket plan keeps batch 1: one wide clip, the first landing in 96x64x17
