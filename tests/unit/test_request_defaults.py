"""Defaults resolved once, where the request is built: ``--captioner`` and ``--vllm-url``.

Every phase reads ``request.captioner`` and ``request.vllm_url`` as the values the run uses; the stored
form of the request (run.yaml, the store, the fingerprints) keeps what was asked, None for "the default",
exactly as before these defaults were resolved here, so no existing run re-plans or re-probes.
"""

from __future__ import annotations

from pathlib import Path

import yaml

from ltx_pipeline.captioning import DEFAULT_VLLM_URL as CAPTIONING_URL
from ltx_pipeline.ltx.preparation import DEFAULT_VLLM_URL
from ltx_pipeline.request import build_request, load_request, save_request


def test_the_default_captioner_follows_the_backend_and_is_stored_as_not_asked() -> None:
    ltx = build_request({"dataset": "/data/clips"})
    toy = build_request({"dataset": "/data/clips", "backend": "reference"})
    assert (ltx.captioner, toy.captioner) == ("qwen_omni", "offline")
    assert ltx.vllm_url == DEFAULT_VLLM_URL == CAPTIONING_URL
    for request in (ltx, toy):
        stored = request.model_dump(mode="json")
        assert stored["captioner"] is None and stored["vllm_url"] is None  # as every earlier run stored them
        assert "captioner" not in request.model_dump(exclude_none=True)
        assert "captioner:" not in request.to_yaml() and "vllm_url" not in request.to_yaml()


def test_an_asked_captioner_is_stored_even_at_its_default() -> None:
    asked = build_request({"dataset": "/data/clips", "backend": "reference", "captioner": "offline",
                           "vllm_url": "http://gpu-box:8001/v1"})
    assert asked.model_dump(mode="json")["captioner"] == "offline"
    assert asked.model_dump(mode="json")["vllm_url"] == "http://gpu-box:8001/v1"
    assert asked.model_copy(update={"steps": 10}).model_dump()["captioner"] == "offline"
    assert "captioner: offline" in asked.to_yaml()


def test_a_re_validated_request_resolves_the_default_again() -> None:
    """The CLI re-validates a run's request with new options: a changed backend changes the default captioner."""
    toy = build_request({"dataset": "/data/clips", "backend": "reference"})
    moved = build_request({**toy.model_dump(exclude_none=True), "backend": "ltx"})
    assert moved.captioner == "qwen_omni" and moved.model_dump()["captioner"] is None


def test_run_yaml_from_before_loads_and_null_means_the_default(tmp_path: Path) -> None:
    (tmp_path / "clips").mkdir()
    old = tmp_path / "run.yaml"
    old.write_text(yaml.safe_dump({"dataset": str(tmp_path / "clips"), "backend": "reference", "captioner": None,
                                   "vllm_url": None}))
    request = load_request(old)
    assert request.captioner == "offline" and request.vllm_url == DEFAULT_VLLM_URL
    assert request.model_dump()["captioner"] is None
    save_request(tmp_path / "again.yaml", request, tmp_path)
    assert "captioner" not in (tmp_path / "again.yaml").read_text()
    named = tmp_path / "named.yaml"
    named.write_text(yaml.safe_dump({"dataset": str(tmp_path / "clips"), "captioner": "gemini_flash"}))
    assert load_request(named).captioner == "gemini_flash"
