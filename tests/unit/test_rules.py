"""LTX rules: buckets and tokens, tiers, run names and the run request."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ltx_pipeline.errors import BadRequest, UnsafePath
from ltx_pipeline.ltx.buckets import Bucket, parse_buckets
from ltx_pipeline.ltx.tiers import classify_tier, nominal_gb
from ltx_pipeline.request import build_request, default_run_name
from ltx_pipeline.workspace import validate_run_name


@pytest.mark.parametrize(("text", "tokens"), [
    ("768x448x89", 4032), ("960x544x49", 3570), ("960x544x89", 6120), ("576x576x49", 2268),
    ("512x288x321", 5904), ("960x544x121", 8160), ("1920x1088x33", 10200),
])
def test_token_counts_match_the_trainer_docs(text: str, tokens: int) -> None:
    (bucket,) = parse_buckets(text)
    assert bucket.tokens == tokens


@pytest.mark.parametrize(("text", "needle"), [
    ("960x540x49", "multiples of 32"), ("960x544x48", "8k+1"), ("960X544x49", "WxHxF"),
    ("960x544x49;", "empty entry"), ("", "empty entry"), ("960x544x49;960x544x49", "repeats"),
    ("axbxc", "WxHxF"), ("0x544x49", "multiples of 32"),
])
def test_bad_buckets_are_one_clear_line(text: str, needle: str) -> None:
    with pytest.raises(BadRequest) as info:
        parse_buckets(text)
    assert needle in info.value.line() and "\n" not in info.value.line()


@given(st.text(max_size=40))
def test_any_bucket_string_parses_or_raises_bad_request(text: str) -> None:
    try:
        buckets = parse_buckets(text)
    except BadRequest:
        return
    assert all(b.width % 32 == 0 and b.height % 32 == 0 and (b.frames - 1) % 8 == 0 for b in buckets)


@pytest.mark.parametrize(("mib", "nominal", "tier"), [
    (32607, 32, "32GB tier"), (32768, 32, "32GB tier"), (24564, 24, "below the 32GB minimum"),
    (49140, 48, "40–60GB tier"), (46068, 48, "40–60GB tier"), (81559, 80, "80GB+ tier"),
    (81920, 80, "80GB+ tier"), (143771, 141, "80GB+ tier"), (95830, 94, "80GB+ tier"),
])
def test_cards_are_tiered_by_their_marketed_size(mib: int, nominal: int, tier: str) -> None:
    assert nominal_gb(mib) == nominal
    assert classify_tier([mib])[0].name == tier


def test_smallest_gpu_sets_the_tier() -> None:
    assert classify_tier([81559, 49140])[0].name == "40–60GB tier"


@given(st.text(max_size=30))
def test_run_names_are_safe_or_refused(name: str) -> None:
    try:
        validate_run_name(name)
    except UnsafePath:
        return
    assert "/" not in name and ".." not in name and not name.startswith(".")


@pytest.mark.parametrize("name", ["../escape", "a/b", ".hidden", "", "x" * 101, "run name", "ok..no"])
def test_unsafe_run_names_are_refused(name: str) -> None:
    with pytest.raises(UnsafePath):
        validate_run_name(name)


def test_request_rules() -> None:
    request = build_request({"dataset": "/d/clips.json", "strategy": "chain"})
    assert [str(s[0]) for s in request.stages()] == ["512x288x321", "960x544x121", "1920x1088x33"]
    assert build_request({"dataset": "/d", "strategy": "mixed"}).stages()[0] == (
        Bucket(960, 544, 121), Bucket(1280, 704, 81))
    for bad, needle in [({"mode": "t2x"}, "unknown mode"), ({"model_path": "https://hf.co/x.safetensors"}, "URL"),
                        ({"strategy": "single", "buckets": "960x544x49;512x288x121"}, "exactly one"),
                        ({"strategy": "mixed", "buckets": "960x544x49"}, "at least two"),
                        ({"buckets": "960x544x50"}, "8k+1"), ({"rank": 1}, "rank"), ({"nope": 1}, "nope")]:
        with pytest.raises(BadRequest) as info:
            build_request({"dataset": "/d/x.json", **bad})
        assert needle in info.value.line(), info.value.line()


def test_default_run_name_follows_the_skill() -> None:
    from datetime import datetime

    request = build_request({"dataset": "/data/My Clips/dataset.json", "mode": "i2v"})
    assert default_run_name(request, datetime(2026, 12, 2, 9, 5)) == "i2v-My-Clips-20261202-0905"
    request = build_request({"dataset": "/data/fox_clips.csv"})
    assert default_run_name(request, datetime(2026, 1, 2, 3, 4)) == "t2v-fox_clips-20260102-0304"
