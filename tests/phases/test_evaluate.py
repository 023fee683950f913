"""The evaluate phase: the final weights rendered for in-distribution, out-of-distribution and held-out prompts.

End to end on the reference backend (real mp4 renders, engine and trainer SIGKILLed mid-render, then
``resume``), through the ltx backend's launch against a fake checkout, the out-of-memory retry on the
simulated backend, ``--skip-eval`` and missing final weights.
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import yaml
from PIL import Image

from ltx_pipeline.backends.ltx import LtxBackend
from ltx_pipeline.backends.simulated import SimulatedBackend
from ltx_pipeline.cli import main
from ltx_pipeline.engine.journal import RunJournal
from ltx_pipeline.errors import RunFailed
from ltx_pipeline.evaluation.render import EvalJob, EvalRenderer
from ltx_pipeline.ltx.config_patch import Patch, apply_patches
from ltx_pipeline.ltx.evaluation import EvalPrompt
from ltx_pipeline.ltx.media import BadMedia, read_frames
from ltx_pipeline.store import Store
from ltx_pipeline.training.validation import LaunchTarget
from tests.conftest import FAKE_UV, GEMMA_FOLDER, H100_SMI, REPO, make_tree, safetensors_bytes
from tests.phases.test_prepare import clip_folder
from tests.phases.train_helpers import clips, simulated_args, store_of, training_registered  # noqa: F401

CATEGORIES = ("in_distribution", "out_of_distribution", "held_out")
NO_AUTOTUNE = "import phases\nphases.PHASES = tuple(p for p in phases.PHASES if p.name != 'autotune')\n"
# The engine without autotune (tested elsewhere), edited in the engine's own process: a sitecustomize would make
# every child (supervisors, preprocessing, the trainer, nvidia-smi) import every phase too, about 1 s of CPU each.
ENGINE_NO_AUTOTUNE = [sys.executable, "-c", f"{NO_AUTOTUNE}from ltx_pipeline.cli import main; main()"]
FAKE_TRAIN = REPO / "tests" / "fixtures" / "fake_checkout" / "scripts" / "train.py"
TEMPLATE = REPO / "ltx_pipeline" / "backends" / "reference_configs" / "t2v_lora.yaml"


def _complete(path: Path, frames: int) -> bool:
    try:
        return len(read_frames(path)) == frames
    except BadMedia:
        return False


@pytest.mark.long  # 36 s on 2 cores (2026-12-06): in the opt-in long suite, `-m long`
@pytest.mark.slow  # a reference run as processes: toy training, then the engine and its render killed
@pytest.mark.timeout(400)
def test_sigkill_during_the_eval_render_then_resume_renders_only_what_is_missing(workspace, tmp_path,
                                                                                  fake_smi) -> None:
    folder = clip_folder(tmp_path / "clips", 8)  # 8 clips: 1 held out (seed 42), 7 trained on
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    args = ["--workspace", str(workspace), "--run", "r1"]
    engine = subprocess.Popen([*ENGINE_NO_AUTOTUNE, "run", *args, "--dataset", str(folder), "--backend", "reference",
                               "--nvidia-smi", fake_smi(H100_SMI), "--buckets", "64x64x17", "--steps", "3",
                               "--rank", "4", "--trigger", "fxclp", "--approve"], env=env,
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True)
    eval_root = workspace / "r1" / "outputs" / "eval"
    first = eval_root / ".work" / "samples" / "step_000000_1.mp4"
    deadline = time.monotonic() + 300
    while not first.exists():
        assert engine.poll() is None, engine.stderr.read()[-2000:]
        assert time.monotonic() < deadline, "the evaluation never started rendering"
        time.sleep(0.01)
    os.killpg(engine.pid, signal.SIGKILL)
    db = sqlite3.connect(workspace / "ltx-pipeline.db")
    (pid,) = db.execute("SELECT pid FROM processes WHERE kind = 'evaluate'").fetchone()
    os.killpg(pid, signal.SIGKILL)  # the render too: its supervisor leads the group
    engine.wait(timeout=30)
    samples = sorted(first.parent.glob("step_000000_*.mp4"))
    kept = {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in samples if _complete(p, 17)}
    assert 1 <= len(kept) < 7, f"not caught mid-render ({len(kept)} complete of 7)"

    done = subprocess.run([*ENGINE_NO_AUTOTUNE, "resume", *args], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    second = yaml.safe_load((workspace / "r1" / "config.eval.yaml").read_text())
    assert len(second["validation"]["samples"]) == 7 - len(kept)  # only what was missing
    assert db.execute("SELECT COUNT(*) FROM processes WHERE kind = 'evaluate'").fetchone() == (2,)
    listing = json.loads((eval_root / "prompts.json").read_text())["renders"]
    by_file = {Path(r["file"]).relative_to(eval_root).as_posix(): r for r in listing}
    for index, digest in enumerate(kept.values(), start=1):  # renders the kill left complete were kept as they are
        assert hashlib.sha256((eval_root / "in_distribution" / f"0{index}.mp4").read_bytes()).hexdigest() == digest

    # What a user finds: playable renders in three folders, their prompts, a contact sheet, the summary.
    on_disk = sorted(p.relative_to(eval_root).as_posix() for p in eval_root.rglob("*.mp4"))
    assert on_disk == sorted(by_file) and len(on_disk) == 7
    assert {Path(f).parent.name for f in on_disk} == set(CATEGORIES)
    assert all(len(read_frames(eval_root / f)) == 17 for f in on_disk)
    training = {r["caption"] for r in json.loads((workspace / "r1" / "dataset" / "dataset.json").read_text())}
    held = [json.loads(line) for line in (workspace / "r1" / "dataset" / "holdout.jsonl").read_text().splitlines()]
    assert {r["prompt"] for r in listing if r["category"] == "in_distribution"} <= {f"fxclp {c}" for c in training}
    assert [r["prompt"] for r in listing if r["category"] == "held_out"] == [f"fxclp {held[0]['caption']}"]
    assert all(r["prompt"].startswith("fxclp ") for r in listing if r["category"] == "out_of_distribution")
    assert not (eval_root / ".work").exists()  # the trainer's cruft: forced checkpoint, training_config.yaml
    assert not list(eval_root.rglob("*.safetensors")) and not list(eval_root.rglob("training_config.yaml"))
    sheet = Image.open(eval_root / "contact-sheet.png").convert("RGB")
    assert sheet.width >= 300 and sheet.height >= 7 * 100
    assert len(np.unique(np.asarray(sheet).reshape(-1, 3), axis=0)) > 50  # frames, not a blank page
    summary = (workspace / "r1" / "outputs" / "run-summary.md").read_text()
    assert "## Evaluation renders" in summary and all(f"`eval/{f}`" in summary for f in on_disk)
    status = json.loads(subprocess.run([*ENGINE_NO_AUTOTUNE, "status", *args, "--json"], env=env, capture_output=True,
                                       text=True, timeout=60).stdout)
    assert ("evaluate", "succeeded") in [(p["phase"], p["status"]) for p in status["runs"][0]["phases"]]


# --- the ltx backend's launch, against a fake checkout ---------------------------------------------------

def _eval_job(tmp_path: Path, template: Path, *, dims: list[int], knobs: dict | None = None) -> EvalJob:
    """A finished stage's config, final weights and data, and three prompts to render."""
    run = tmp_path / "ws" / "r1"
    model = run / "models" / "base.safetensors"
    model.parent.mkdir(parents=True)
    model.write_bytes(safetensors_bytes())
    data = run / "dataset" / ".precomputed"
    for sub in ("latents", "conditions", "audio_latents"):
        (data / sub).mkdir(parents=True)
    weights = run / "outputs" / "checkpoints" / "lora_weights_step_00010.safetensors"
    weights.parent.mkdir(parents=True)
    weights.write_bytes(safetensors_bytes())
    gemma = make_tree(run / "models" / "gemma", GEMMA_FOLDER)
    patches = [Patch("model.model_path", str(model), "t"), Patch("model.text_encoder_path", str(gemma), "t"),
               Patch("data.preprocessed_data_root", str(data), "t"), Patch("output_dir", str(run / "outputs"), "t"),
               Patch("optimization.steps", 10, "t"), Patch("validation.video_dims", dims, "t")]
    patches += [Patch(k, v, "t") for k, v in (knobs or {}).items()]
    config = run / "config.yaml"
    config.write_text(apply_patches(template.read_text(), patches)[0])
    prompts = [EvalPrompt("in_distribution", "fxclp a red square", "/d/a.mp4"),
               EvalPrompt("out_of_distribution", "fxclp a lighthouse at dusk", "generic"),
               EvalPrompt("held_out", "fxclp a red square on white", "/d/h.mp4")]
    return EvalJob(final_config=config, weights=weights, prompts=prompts, eval_root=run / "outputs" / "eval",
                   config_file=run / "config.eval.yaml", logs=run / "logs",
                   target=LaunchTarget(stage=1, buckets="64x64x17", processes=1, dataset_samples=None,
                                       data_root=data))


def _renderer(tmp_path: Path, backend, said: list[str]) -> tuple[EvalRenderer, RunJournal]:
    store = Store.open(tmp_path / "ws" / "ltx-pipeline.db")
    run = store.create_run("r1", {})
    journal = RunJournal(store, run.id, "evaluate")
    return EvalRenderer(backend=backend, journal=journal, workspace=tmp_path / "ws", narrate=said.append,
                        poll_s=0.02), journal


def test_the_ltx_backend_renders_through_the_trainers_train_script_with_the_eval_config(tmp_path, monkeypatch):
    checkout = tmp_path / "LTX-2"
    trainer = "packages/ltx-trainer"
    make_tree(checkout, {f"{trainer}/scripts/train.py": FAKE_TRAIN.read_text(), "uv.lock": "", ".venv/": None,
                         f"{trainer}/configs/t2v_lora.yaml": TEMPLATE.read_text(),
                         f"{trainer}/src/ltx_trainer/__init__.py": "",
                         f"{trainer}/src/ltx_trainer/config.py":
                             "from ltx_pipeline.ltx.trainer_config import LtxTrainerConfig  # noqa: F401\n"})
    uv = tmp_path / "bin" / "uv"
    make_tree(uv.parent, {"uv": FAKE_UV})
    uv.chmod(0o755)
    argv_log = tmp_path / "argv.jsonl"
    monkeypatch.setenv("FAKE_TRAIN_ARGV_LOG", str(argv_log))
    monkeypatch.setenv("PYTHONPATH", str(REPO))
    backend = LtxBackend(checkout, uv=str(uv))
    job = _eval_job(tmp_path, TEMPLATE, dims=[64, 64, 9])
    said: list[str] = []
    renderer, journal = _renderer(tmp_path, backend, said)
    result = renderer.render(job)
    call = json.loads(argv_log.read_text())
    assert call["argv"] == [str(job.config_file.resolve()), "--disable-progress-bars"]
    assert Path(call["cwd"]) == (checkout / trainer).resolve()
    launched = journal.processes("evaluate")
    assert len(launched) == 1
    assert f"{uv} run --directory {(checkout / trainer).resolve()} python scripts/train.py" in launched[0].printable
    config = call["config"]  # what the trainer read: the skill's eval config
    assert config["model"]["load_checkpoint"] == str(job.weights)
    assert config["optimization"]["steps"] == 1 and config["checkpoints"]["no_resume"] is True
    assert config["checkpoints"]["interval"] is None and config["validation"]["interval"] == 2
    assert [s["prompt"] for s in config["validation"]["samples"]] == [p.prompt for p in job.prompts]
    files = [Path(r["file"]).relative_to(job.eval_root).as_posix() for r in result["renders"]]
    assert files == ["in_distribution/01.mp4", "out_of_distribution/01.mp4", "held_out/01.mp4"]
    assert all(len(read_frames(job.eval_root / f)) == 9 for f in files)
    assert not (job.eval_root / ".work").exists()
    # Nothing is missing: a second render launches nothing.
    renderer.render(job)
    assert len(journal.processes("evaluate")) == 1


# --- out of memory: retried once, smaller, and said ------------------------------------------------------

def _tight_surface(path: Path, validation_peak_gb: float) -> Path:
    """An 80 GB GPU whose validation at 960x544x49 needs ``validation_peak_gb`` (less at smaller dims)."""
    path.write_text(yaml.safe_dump({
        "gpu": {"name": "NVIDIA H100 80GB HBM3", "memory_mib": 81559},
        "points": [{"knobs": {"quantization": None, "optimizer_type": "adamw", "batch_size": 1,
                              "enable_gradient_checkpointing": True},
                    "step_time_s": 1.0, "peak_vram_gb": 40.0, "validation_peak_vram_gb": validation_peak_gb,
                    "validation_dims": [960, 544, 49]}]}))
    return path


KNOBS = {"acceleration.quantization": None, "optimization.optimizer_type": "adamw", "optimization.batch_size": 1,
         "optimization.enable_gradient_checkpointing": True}


def test_an_eval_out_of_memory_is_retried_once_at_smaller_dims_and_said(tmp_path) -> None:
    backend = SimulatedBackend(_tight_surface(tmp_path / "surface.yaml", 100.0))  # 480x256x25 needs ~48 GB
    job = _eval_job(tmp_path, backend.template("t2v_lora.yaml"), dims=[960, 544, 49], knobs=KNOBS)
    said: list[str] = []
    renderer, journal = _renderer(tmp_path, backend, said)
    result = renderer.render(job)
    assert len(journal.processes("evaluate")) == 2
    assert result["retried_dims"] == [480, 256, 25]
    assert any("ran out of GPU memory at 960x544x49" in s and "retrying once at 480x256x25" in s for s in said)
    assert yaml.safe_load(job.config_file.read_text())["validation"]["video_dims"] == [480, 256, 25]
    assert [r["file"] for r in result["renders"]] == [None, None, None]  # the simulated trainer writes no video


def test_an_eval_that_runs_out_of_memory_again_fails_naming_its_log(tmp_path) -> None:
    backend = SimulatedBackend(_tight_surface(tmp_path / "surface.yaml", 700.0))  # too much even at 480x256x25
    job = _eval_job(tmp_path, backend.template("t2v_lora.yaml"), dims=[960, 544, 49], knobs=KNOBS)
    renderer, journal = _renderer(tmp_path, backend, [])
    with pytest.raises(RunFailed, match=r"oom_validation.*already retried at 480x256x25") as failed:
        renderer.render(job)
    assert failed.value.where.endswith("evaluate.attempt-2.log")
    assert len(journal.processes("evaluate")) == 2  # once, not again and again


# --- skipping, and weights that are gone -----------------------------------------------------------------

@pytest.mark.usefixtures("training_registered")
def test_skip_eval_is_recorded_and_bringing_it_back_renders_without_training_again(workspace, tmp_path,
                                                                                     capsys) -> None:
    dataset = clips(tmp_path / "data", 3)
    assert main(simulated_args(workspace, dataset, "--steps", "20", "--skip-eval")) == 0
    store, run = store_of(workspace)
    evaluate = store.latest_phase_runs(run.id)["evaluate"]
    assert evaluate.status == "succeeded" and evaluate.summary.startswith("skipped: --skip-eval")
    assert not (workspace / "r1" / "outputs" / "eval").exists()
    capsys.readouterr()
    assert main(["resume", "--workspace", str(workspace), "--run", "r1", "--no-skip-eval",
                 "--eval-prompt", "a cat on a sofa"]) == 0
    out = capsys.readouterr().out
    latest = store.latest_phase_runs(run.id)
    assert latest["evaluate"].attempt == 2 and latest["train"].attempt == 1 and latest["plan"].attempt == 1
    renders = latest["evaluate"].outputs["renders"]
    assert [r["category"] for r in renders] == ["in_distribution"] * 3 + ["out_of_distribution"]
    assert renders[-1]["prompt"] == "a cat on a sofa"
    assert "no holdout file" in latest["evaluate"].outputs["notes"]["held_out"]
    assert "(no file written)" in out  # the simulated trainer renders nothing, and the listing says so
    assert yaml.safe_load((workspace / "r1" / "run.yaml").read_text())["eval_prompts"] == ["a cat on a sofa"]


@pytest.mark.usefixtures("training_registered")
def test_missing_final_weights_fail_the_phase_naming_the_file(workspace, tmp_path, capsys) -> None:
    dataset = clips(tmp_path / "data", 3)
    assert main(simulated_args(workspace, dataset, "--steps", "20", "--skip-eval")) == 0
    weights = workspace / "r1" / "outputs" / "checkpoints" / "lora_weights_step_00020.safetensors"
    weights.unlink()
    capsys.readouterr()
    code = main(["resume", "--workspace", str(workspace), "--run", "r1", "--no-skip-eval"])
    err = capsys.readouterr().err
    assert code != 0 and f"expected {weights}" in err and "Traceback" not in err
