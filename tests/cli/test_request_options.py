"""The command line's request fields are assembled in one place, each under its request field's name."""

from __future__ import annotations

from pathlib import Path

import pytest

from ltx_pipeline.cli.request_options import RequestOptions
from ltx_pipeline.errors import BadRequest


def test_given_fields_keep_their_names_and_paths_become_absolute(tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "clips").mkdir()
    (tmp_path / "holdout.jsonl").write_text("")
    given = RequestOptions(dataset=Path("clips"), effective_batch=8, captioner="offline", vllm_url="http://h:1/v1",
                           model_path="m.safetensors", text_encoder_path="https://example.com/gemma",
                           nvidia_smi="nvidia-smi", trainer_root=Path("ltx2"), holdout_file=Path("holdout.jsonl"),
                           eval_prompts=["a cat"], skip_eval=False, slurm=False, slurm_args=["--time=1:00:00"],
                           accept_risk=False).given()
    assert given == {
        "effective_batch": 8, "model_path": str(tmp_path / "m.safetensors"),
        "text_encoder_path": "https://example.com/gemma", "nvidia_smi": "nvidia-smi", "accept_risk": False,
        "dataset": str(tmp_path / "clips"), "trainer_root": str(tmp_path / "ltx2"), "captioner": "offline",
        "vllm_url": "http://h:1/v1", "holdout_file": str(tmp_path / "holdout.jsonl"), "eval_prompts": ["a cat"],
        "skip_eval": False, "slurm": False, "slurm_args": ["--time=1:00:00"],
    }


def test_nothing_given_is_nothing_and_a_missing_path_is_refused(tmp_path: Path) -> None:
    assert RequestOptions().given() == {}
    with pytest.raises(BadRequest, match="does not exist"):
        RequestOptions(surface=tmp_path / "nope.yaml").given()


def test_preprocess_processes_is_a_run_option_kept_under_its_request_name() -> None:
    import typer.main

    from ltx_pipeline.cli.app import app
    from ltx_pipeline.request import build_request

    run = next(c for c in typer.main.get_command(app).commands.values() if c.name == "run")  # type: ignore[attr-defined]
    assert "--preprocess-processes" in {opt for p in run.params for opt in p.opts}
    given = RequestOptions(preprocess_processes=3).given()
    assert given == {"preprocess_processes": 3}
    assert build_request({"dataset": "/clips", **given}).preprocess_processes == 3
