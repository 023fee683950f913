"""Issue 44: plan.md's latent cache forecast says, per preprocessing and subfolder, what comes from the cache,
what will be encoded and why; and it is what preprocessing then does.

Each run forecasts stage 1 with ``preprocessing.forecast`` (keys only: no model is loaded), then preprocesses it
with the stand-in context whose journal runs the toy's scripts in-process (tests/reference_trainer/conftest.py).
The forecast's counts must equal the narrated "X of Y file(s) came from the latent cache" and the scripts started.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from types import SimpleNamespace

import pytest

from ltx_pipeline.env_names import LATENT_CACHE_ENV
from ltx_pipeline.ltx.buckets import parse_buckets
from ltx_pipeline.ltx.modes import get_mode
from ltx_pipeline.preprocessing.forecast import Forecast, Step, StepForecast, forecast
from ltx_pipeline.preprocessing.run import preprocess
from ltx_pipeline.reports.plan_cache import CACHE_SECTION, cache_section
from ltx_pipeline.workspace import RunPaths
from tests.conftest import write_safetensors
from tests.reference_trainer.conftest import PreprocessContext, write_dataset

pytest.importorskip("torch")

BUCKETS = parse_buckets("64x64x17")
T2V = get_mode("t2v")


@pytest.fixture
def base(tmp_path: Path) -> Path:
    from ltx_pipeline.reference_trainer import make_base

    path = tmp_path / "base.safetensors"
    assert make_base.main([str(path), "--layers", "1", "--text-len", "10", "--text-dim", "16"]) == 0
    return path


def _stage(paths: RunPaths, dataset: Path, *flags: str) -> Step:
    return Step(1, dataset, BUCKETS, paths.dataset / ".precomputed", tuple(flags))


def forecast_then_run(workspace: Path, name: str, dataset: Path, base: Path,
                      encoder: Path | None = None) -> tuple[StepForecast, PreprocessContext]:
    """Forecast stage 1 of run ``name``, then preprocess it; the step's forecast and the context (what it did)."""
    paths = RunPaths(workspace / name)
    ctx = PreprocessContext(workspace=workspace, paths=paths, request=SimpleNamespace(trigger="sks"))
    step = _stage(paths, dataset)
    found = forecast(ctx, [step], None, mode=T2V, model_path=str(base), text_encoder_path=str(encoder or base))
    assert len(found.steps) == 1 and found.off is None
    preprocess(ctx, mode=T2V, metadata_file=dataset, buckets=BUCKETS, output_dir=step.output_dir, stage=1,
               model_path=str(base), text_encoder_path=str(encoder or base), extra_flags=[])
    return found.steps[0], ctx


def narrated(ctx: PreprocessContext) -> tuple[int, int, int]:
    """(from the cache, files, encoded) as preprocessing narrated them."""
    said = [m for line in ctx.said if (m := re.search(r"(\d+) of (\d+) file\(s\) came from the latent cache .*; "
                                                       r"(\d+) encoded", line))]
    assert len(said) == 1, ctx.said
    return int(said[0][1]), int(said[0][2]), int(said[0][3])


def per_folder(step: StepForecast) -> dict[str, tuple[int, int, dict[str, int]]]:
    return {f.folder: (f.cached, f.encode, dict(f.reasons)) for f in step.folders}


def edit_caption(dataset: Path, index: int, caption: str) -> None:
    rows = [json.loads(line) for line in dataset.read_text().splitlines()]
    rows[index]["caption"] = caption
    dataset.write_text("".join(json.dumps(row) + "\n" for row in rows))


def test_the_forecast_says_why_each_file_is_encoded_and_equals_what_preprocessing_does(tmp_path: Path,
                                                                                    base: Path) -> None:
    dataset = write_dataset(tmp_path / "data", [("a.mp4", 17, True), ("b.mp4", 17, False), ("c.mp4", 17, True)])
    workspace = tmp_path / "ws"

    first, a = forecast_then_run(workspace, "a", dataset, base)  # an empty cache: everything is new
    assert per_folder(first) == {"latents": (0, 3, {"new clip": 3}), "audio_latents": (0, 2, {"new clip": 2}),
                                 "conditions": (0, 3, {"new caption": 3})}
    assert narrated(a) == (first.cached, first.files, first.encode) == (0, 8, 8)

    again, b = forecast_then_run(workspace, "b", dataset, base)  # the same data: all from the cache
    assert (again.cached, again.encode) == (8, 0) and all(not f.reasons for f in again.folders)
    assert narrated(b) == (8, 8, 0) and b.journal.started == []

    edit_caption(dataset, 1, "a red square, edited")
    edited, c = forecast_then_run(workspace, "c", dataset, base)
    assert per_folder(edited) == {"latents": (3, 0, {}), "audio_latents": (2, 0, {}),
                                  "conditions": (2, 1, {"caption changed": 1})}
    assert narrated(c) == (7, 8, 1) and c.journal.started == [("process_captions", ["b.mp4"])]

    encoder = write_safetensors(tmp_path / "other-encoder.safetensors", {"made": "another text encoder"})
    other, d = forecast_then_run(workspace, "d", dataset, base, encoder=encoder)
    assert per_folder(other) == {"latents": (3, 0, {}), "audio_latents": (2, 0, {}),
                                 "conditions": (0, 3, {"other model": 3})}
    assert narrated(d) == (5, 8, 3) and d.journal.started == [("process_captions", ["a.mp4", "b.mp4", "c.mp4"])]

    lines = cache_section(Forecast(workspace / "cache" / "latents", 11, (edited,)), by_data_check=True)
    assert "- Stage 1 (64x64x17): 7 of 8 file(s) from the cache, 1 to encode" in lines
    assert "  - conditions: 2 from the cache, 1 to encode (1 caption changed)" in lines
    assert "  - latents: 3 from the cache, 0 to encode" in lines


def test_a_later_step_counts_what_an_earlier_one_encodes_and_names_the_other_bucket(tmp_path: Path,
                                                                                    base: Path) -> None:
    """Chained stages: stage 2's conditions are stage 1's (made earlier in the same run); its latents are new at
    another bucket, and the reason says so."""
    dataset = write_dataset(tmp_path / "data", [("a.mp4", 17, False), ("b.mp4", 17, False)])
    paths = RunPaths(tmp_path / "ws" / "r")
    ctx = PreprocessContext(workspace=tmp_path / "ws", paths=paths)
    one = _stage(paths, dataset)
    two = Step(2, dataset, parse_buckets("96x64x17"), paths.dataset / ".precomputed-stage-2")
    found = forecast(ctx, [one, two], None, mode=T2V, model_path=str(base), text_encoder_path=str(base))
    first, second = found.steps
    assert (first.cached, first.encode, first.made_before) == (0, 4, 0)
    assert per_folder(second) == {"latents": (0, 2, {"other bucket": 2}), "conditions": (2, 0, {})}
    assert second.made_before == 2
    assert "- Stage 2 (96x64x17): 2 of 4 file(s) from the cache (2 encoded by an earlier step of this run), 2 to " \
        "encode" in cache_section(found, by_data_check=False)


def test_off_and_a_stage_the_cache_cannot_key_are_said_with_the_reason(tmp_path: Path, base: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    dataset = write_dataset(tmp_path / "data", [("a.mp4", 17, False)])
    paths = RunPaths(tmp_path / "ws" / "r")
    ctx = PreprocessContext(workspace=tmp_path / "ws", paths=paths)
    found = forecast(ctx, [_stage(paths, dataset, "--some-new-flag")], None, mode=T2V, model_path=str(base),
                     text_encoder_path=str(base))
    assert found.steps[0].whole == "the cache does not key the preprocessing flag(s) --some-new-flag"
    assert "- Stage 1 (64x64x17): preprocessed whole, without the cache: the cache does not key the " \
        "preprocessing flag(s) --some-new-flag" in cache_section(found, by_data_check=True)

    monkeypatch.setenv(LATENT_CACHE_ENV, "off")
    off = forecast(ctx, [_stage(paths, dataset)], None, mode=T2V, model_path=str(base), text_encoder_path=str(base))
    assert off.off == f"{LATENT_CACHE_ENV}=off" and not off.steps
    assert any(line.startswith(f"- The latent cache is off ({LATENT_CACHE_ENV}=off)")
               for line in cache_section(off, by_data_check=True))


def test_the_section_sits_after_preprocessing_and_is_replaced_not_repeated() -> None:
    plan = "# Plan\n\n## Preprocessing\n\n- Stage 1\n\n## Training Config\n\n| a | b |\n"
    once = CACHE_SECTION.put(plan, ["## Latent cache", "", "- first", ""])
    twice = CACHE_SECTION.put(once, ["## Latent cache", "", "- second", ""])
    assert twice == plan.replace("## Training Config", "## Latent cache\n\n- second\n\n## Training Config")
    assert CACHE_SECTION.drop(twice) == plan


