"""The preprocessing step and the data identity: reuse, replace the run's own folder, refuse a user's.

The step is driven with a small stand-in for the run context whose journal runs the reference
trainer's preprocessing in-process (toy encoders, a few KiB of latents), so each case is real
preprocessed data without a subprocess.
"""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from ltx_pipeline.errors import BadDataset
from ltx_pipeline.ltx.buckets import parse_buckets
from ltx_pipeline.ltx.data_identity import data_identity, model_identity
from ltx_pipeline.ltx.modes import get_mode
from ltx_pipeline.preprocessing.run import IDENTITY_CACHE, IDENTITY_FILE, LEGACY_PAIRING_FILE, preprocess
from ltx_pipeline.workspace import RunPaths
from tests.reference_trainer.conftest import PreprocessContext

pytest.importorskip("torch")


_Ctx = PreprocessContext


@pytest.fixture
def setup(tmp_path: Path) -> SimpleNamespace:
    from ltx_pipeline.reference_trainer import make_base
    from tests.reference_trainer.conftest import write_dataset

    bases = tmp_path / "bases"
    for seed in (0, 1):
        assert make_base.main([str(bases / f"base-{seed}.safetensors"), "--seed", str(seed)]) == 0
    dataset = write_dataset(tmp_path / "data", [(f"clip{i}.mp4", 17, True) for i in range(2)])
    workspace = tmp_path / "ws"
    ctx = _Ctx(workspace=workspace, paths=RunPaths(workspace / "r1"))
    return SimpleNamespace(ctx=ctx, dataset=dataset, a=str(bases / "base-0.safetensors"),
                           b=str(bases / "base-1.safetensors"))


def run_step(s: SimpleNamespace, output: Path, model: str, buckets: str = "64x64x17", stage: int = 1) -> dict:
    return preprocess(s.ctx, mode=get_mode("t2v"), metadata_file=s.dataset, buckets=parse_buckets(buckets),
                      output_dir=output, stage=stage, model_path=model, text_encoder_path=model,
                      pairing=None, extra_flags=[])


def files_of(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def test_a_stage_folder_made_with_another_model_is_moved_aside_and_preprocessed_again(setup) -> None:
    s = setup
    output = s.ctx.paths.dataset / ".precomputed"
    first = run_step(s, output, s.a)
    record = json.loads((output / IDENTITY_FILE).read_text())
    assert record["digest"] == first["data_identity"] and record["buckets"] == "64x64x17"
    assert record["model"]["path"] == str(Path(s.a).resolve()) and record["flags"] == {"trigger": None, "extra": []}
    cache = json.loads((s.ctx.workspace / IDENTITY_CACHE).read_text())
    assert str(Path(s.a).resolve()) in cache["files"]

    again = run_step(s, output, s.a)  # same identity: reused, nothing launched
    assert again["reused"] and s.ctx.journal.runs == 1 and "reusing it" in s.ctx.said[-1]

    old = files_of(output)
    switched = run_step(s, output, s.b)
    stale = output.with_name(f".precomputed.stale-{record['digest'][7:15]}")
    assert files_of(stale) == old  # the old data is kept as it was, beside the new
    assert not switched["reused"] and switched["data_identity"] != record["digest"]
    assert json.loads((output / IDENTITY_FILE).read_text())["digest"] == switched["data_identity"]
    told = next(m for m in s.ctx.said if "made with another model" in m)
    assert "base-0.safetensors (" in told and "-> base-1.safetensors (" in told
    assert f"preprocessing again into {output}" in told and str(stale) in told


def test_the_scratch_set_made_at_other_buckets_is_replaced_not_refused(setup) -> None:
    s = setup
    scratch = s.ctx.paths.overfit / ".precomputed"
    run_step(s, scratch, s.a, buckets="64x64x17", stage=0)
    result = run_step(s, scratch, s.a, buckets="96x64x17", stage=0)
    assert not result["reused"] and result["samples"] == 2
    told = next(m for m in s.ctx.said if "other buckets" in m)
    assert told.startswith(f"Sanity set: {scratch} was made with other buckets (buckets 64x64x17 -> 96x64x17)")
    assert "scratch copy was deleted" in told
    assert not list(s.ctx.paths.overfit.glob(".precomputed.stale-*"))


def test_a_folder_of_the_run_with_no_record_is_not_trusted(setup) -> None:
    s = setup
    output = s.ctx.paths.dataset / ".precomputed"
    run_step(s, output, s.a)
    (output / IDENTITY_FILE).unlink()  # as an older engine left it
    run_step(s, output, s.a)
    assert (output.parent / ".precomputed.stale-unrecorded").is_dir()
    assert any("has no record of the model it was made with" in m for m in s.ctx.said)


def test_an_older_engines_record_naming_the_same_files_is_accepted_and_upgraded(setup) -> None:
    s = setup
    output = s.ctx.paths.dataset / ".precomputed"
    run_step(s, output, s.a)
    (output / IDENTITY_FILE).unlink()
    path = Path(s.a).resolve()
    stat = {"path": str(path), "size": path.stat().st_size, "mtime_ns": path.stat().st_mtime_ns}
    (output / LEGACY_PAIRING_FILE).write_text(json.dumps({"model": stat, "text_encoder": stat, "digest": "x"}))
    assert run_step(s, output, s.a)["reused"]
    assert (output / IDENTITY_FILE).is_file() and s.ctx.journal.runs == 1


def test_a_users_own_folder_made_with_another_model_is_refused_and_left_alone(setup) -> None:
    s = setup
    mine = s.dataset.parent / ".precomputed"  # outside the run: the user's
    model = model_identity(s.a)
    mine.mkdir()
    (mine / IDENTITY_FILE).write_text(json.dumps(data_identity(model, model, "64x64x17", trigger=None)))
    before = files_of(mine)
    with pytest.raises(BadDataset) as caught:
        run_step(s, mine, s.b)
    error = caught.value
    assert "made with another model" in str(error) and "base-0.safetensors (" in str(error)
    assert "base-1.safetensors (" in str(error) and "--fresh-preprocess" in error.line()
    assert files_of(mine) == before and s.ctx.journal.runs == 0


def test_a_folder_made_with_the_sound_serves_a_video_only_run_and_not_the_reverse(setup) -> None:
    """A stage preprocessed with its clips' sound (an audio run, or a run from before a video-only run's stages
    skipped it) holds every latent a video-only run reads: reused, nothing encoded again, and the summary names
    what the folder holds. A folder made without the sound cannot serve an audio run: preprocessed again."""
    from ltx_pipeline.ltx.audio_choice import preprocess_flags, trained_mode

    s = setup
    output = s.ctx.paths.dataset / ".precomputed"
    with_sound = run_step(s, output, s.a)
    assert list((output / "audio_latents").rglob("*.pt"))  # the clips have sound: encoded
    video_only = trained_mode(get_mode("t2v"), {"trains": "video"})
    assert preprocess_flags(video_only) == ["--skip-audio"] and preprocess_flags(get_mode("t2v")) == []
    reused = preprocess(s.ctx, mode=video_only, metadata_file=s.dataset, buckets=parse_buckets("64x64x17"),
                        output_dir=output, stage=1, model_path=s.a, text_encoder_path=s.a, pairing=None,
                        extra_flags=preprocess_flags(video_only))
    assert reused["reused"] and reused["data_identity"] == with_sound["data_identity"] and s.ctx.journal.runs == 1

    silent = s.ctx.paths.dataset / ".precomputed-video"
    made = preprocess(s.ctx, mode=video_only, metadata_file=s.dataset, buckets=parse_buckets("64x64x17"),
                      output_dir=silent, stage=1, model_path=s.a, text_encoder_path=s.a, pairing=None,
                      extra_flags=preprocess_flags(video_only))
    assert not made["reused"] and not list((silent / "audio_latents").rglob("*.pt"))  # no sound encoded
    again = run_step(s, silent, s.a)  # an audio run needs the sound: the folder is made again
    assert not again["reused"] and list((silent / "audio_latents").rglob("*.pt"))


@pytest.mark.parametrize("recorded_flags, current_flags, trigger_same, serves", [
    ([], ["--skip-audio"], True, True),
    (["--vae-tiling"], ["--skip-audio", "--vae-tiling"], True, True),
    ([], ["--skip-audio"], False, False),  # other captions: never
    (["--skip-audio"], [], True, False),  # no sound in the folder, the run wants it
    ([], ["--skip-audio", "--vae-tiling"], True, False),  # other latents
    (["--vae-tiling"], ["--skip-audio"], True, False),
])
def test_only_a_missing_skip_audio_is_a_difference_that_serves(recorded_flags: list[str], current_flags: list[str],
                                                               trigger_same: bool, serves: bool) -> None:
    from ltx_pipeline.ltx.data_identity import identity_changes

    model = {"kind": "file", "path": "/m.safetensors", "content": "sha256:" + "a" * 64}
    recorded = data_identity(model, model, "64x64x17", trigger="tok", flags=recorded_flags)
    current = data_identity({**model, "path": "/elsewhere/m.safetensors"}, model, "64x64x17",
                            trigger="tok" if trigger_same else "other", flags=current_flags)
    assert (identity_changes(recorded, current) == {}) is serves
    other_buckets = data_identity(model, model, "96x64x17", trigger="tok", flags=current_flags)
    assert identity_changes(recorded, other_buckets)  # a superset of sound never hides other buckets
