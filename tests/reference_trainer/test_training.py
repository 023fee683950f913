"""The reference trainer trains for real: loss falls, checkpoints, resume rules, retention, files."""

from __future__ import annotations

import re

import pytest
import torch
from conftest import peak_bytes, train_in_process

from ltx_pipeline.ltx.media import read_media_info

VALIDATION_FRAMES_W_H = (9, 64, 64)  # the project config's validation.video_dims [64, 64, 9]

STEP = re.compile(r"Step (\d+)/(\d+) - Loss: (\S+), LR: (\S+), Time/Step: ([\d.]+)s, "
                  r"Total Time: (\d+h \d+m|calculating\.\.\.)")


def _steps(out: str) -> list[int]:
    return [int(m.group(1)) for m in STEP.finditer(out)]


def _fixed_loss(model, project) -> float:  # noqa: ANN001
    """Mean flow-matching loss over every sample with fixed noise and timesteps."""
    from ltx_pipeline.ltx.trainer_config import data_sources
    from ltx_pipeline.reference_trainer.data import PrecomputedSamples
    from ltx_pipeline.reference_trainer.flow import Modality, prepare_step, step_loss

    config = project.parsed
    dataset = PrecomputedSamples(project.data_root, data_sources(config))
    batch = torch.utils.data.default_collate([dataset[i] for i in range(len(dataset))])
    torch.manual_seed(1234)
    losses = []
    with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
        for _ in range(8):
            inputs = prepare_step(batch, [Modality("video", "video_latents", True)], "uniform", {}, torch.device("cpu"))
            losses.append(step_loss(model, inputs).item())
    return sum(losses) / len(losses)


def test_loss_falls_on_a_fixed_dataset(project, capsys, monkeypatch):
    import yaml

    from ltx_pipeline.ltx.trainer_config import LtxTrainerConfig
    from ltx_pipeline.reference_trainer.checkpoints import load_weights
    from ltx_pipeline.reference_trainer.logs import get_logger
    from ltx_pipeline.reference_trainer.trainer import _build_model

    config_path = project.config(
        "loss.yaml", output_dir=str(project.root / "loss"),
        lora={"rank": 8, "alpha": 8,
              "target_modules": ["to_k", "to_q", "to_v", "to_out.0", "ff.net.0.proj", "ff.net.2"]},
        optimization={"steps": 60, "learning_rate": 3e-3, "scheduler_type": "constant"},
        flow_matching={"timestep_sampling_mode": "uniform"})
    code, out = train_in_process(config_path, capsys, monkeypatch=monkeypatch)
    assert code == 0, out
    project.parsed = LtxTrainerConfig(**yaml.safe_load(config_path.read_text()))
    model = _build_model(project.parsed, get_logger())
    before = _fixed_loss(model, project)  # LoRA B starts at zero: the frozen base alone
    load_weights(model, project.root / "loss" / "checkpoints" / "lora_weights_step_00060.safetensors", "lora")
    after = _fixed_loss(model, project)
    assert after < before - 0.05, (before, after)


def test_log_lines_files_and_statistics(project, capsys, monkeypatch):
    config = project.config("logs.yaml", output_dir=str(project.root / "logs"),
                            optimization={"steps": 4, "gradient_accumulation_steps": 2},
                            validation={"interval": 2}, checkpoints={"interval": 2, "keep_last_n": -1})
    code, out = train_in_process(config, capsys, monkeypatch=monkeypatch)
    assert code == 0
    assert "NOT LTX-2" in out
    assert re.search(r"^INFO     💾 Training configuration saved to: training_config.yaml\s+\S+\.py:\d+$", out, re.M)
    assert "🚀 Starting training..." in out
    # Under accumulation the trainer repeats a step's line per micro-step, "Step 0/N" included.
    assert _steps(out) == [0, 1, 1, 2, 2, 3, 3, 4]
    for step in (0, 2, 4):
        assert f"🎥 Validation samples for step {step} saved in samples" in out
        sample = read_media_info(project.root / "logs" / "samples" / f"step_{step:06d}_1.mp4")  # a real H.264 clip
        assert (sample.kind, sample.frames, sample.width, sample.height) == ("video", *VALIDATION_FRAMES_W_H)
    for step in (2, 4):
        assert f"💾 Lora weights for step {step} saved in checkpoints/lora_weights_step_{step:05d}.safetensors" in out
        assert (project.root / "logs" / "checkpoints" / f"training_state_step_{step:05d}.pt").is_file()
    stats = out[out.index("📊 Training Statistics:"):]
    for pattern in (r"Total time: ([\d.]+) minutes", r"Training speed: ([\d.]+) steps/second",
                    r"Samples/second: ([\d.]+)", r"Peak GPU memory: ([\d.]+) GB"):
        assert re.search(pattern, stats), pattern
    assert (project.root / "logs" / "training_config.yaml").is_file()
    peaks = peak_bytes(project.root / "logs")
    assert peaks["training"] > 0 and peaks["validation"] > 0


def test_lora_weights_use_the_trainer_key_format(project, capsys, monkeypatch):
    from safetensors.torch import load_file

    config = project.config("fmt.yaml", output_dir=str(project.root / "fmt"), optimization={"steps": 1},
                            checkpoints={"precision": "float32"})
    assert train_in_process(config, capsys, monkeypatch=monkeypatch)[0] == 0
    tensors = load_file(project.root / "fmt" / "checkpoints" / "lora_weights_step_00001.safetensors")
    assert "diffusion_model.transformer_blocks.0.attn1.to_q.lora_A.weight" in tensors
    assert all(key.startswith("diffusion_model.") and "base_model" not in key for key in tensors)
    assert {t.dtype for t in tensors.values()} == {torch.float32}


def test_resume_continues_at_the_saved_step_and_the_rules_that_restart_at_zero(project, capsys, monkeypatch):
    first = project.config("r1.yaml", output_dir=str(project.root / "r1"), optimization={"steps": 4},
                           checkpoints={"interval": 2, "keep_last_n": -1})
    assert train_in_process(first, capsys, monkeypatch=monkeypatch)[0] == 0
    folder = project.root / "r1" / "checkpoints"

    resumed = project.config("r2.yaml", output_dir=str(project.root / "r2"), optimization={"steps": 6},
                             model={"load_checkpoint": str(folder)}, checkpoints={"keep_last_n": -1})
    code, out = train_in_process(resumed, capsys, monkeypatch=monkeypatch)
    assert code == 0
    assert "📌 Resuming from step 4" in out and "🚀 Resuming training from step 4 → 6" in out
    assert _steps(out) == [5, 6]
    assert (project.root / "r2" / "checkpoints" / "lora_weights_step_00006.safetensors").is_file()

    from_file = project.config("r3.yaml", output_dir=str(project.root / "r3"), optimization={"steps": 6},
                               model={"load_checkpoint": str(folder / "lora_weights_step_00002.safetensors")})
    code, out = train_in_process(from_file, capsys, monkeypatch=monkeypatch)
    assert _steps(out) == [3, 4, 5, 6]

    no_resume = project.config("r4.yaml", output_dir=str(project.root / "r4"), optimization={"steps": 2},
                               model={"load_checkpoint": str(folder)}, checkpoints={"no_resume": True})
    code, out = train_in_process(no_resume, capsys, monkeypatch=monkeypatch)
    assert "✅ LoRA checkpoint loaded successfully" in out and "🚀 Starting training..." in out
    assert _steps(out) == [1, 2]

    mismatch = project.config("r5.yaml", output_dir=str(project.root / "r5"),
                              optimization={"steps": 2, "scheduler_type": "cosine"},
                              model={"load_checkpoint": str(folder)})
    code, out = train_in_process(mismatch, capsys, monkeypatch=monkeypatch)
    assert ("⚠️ Training state config mismatch (scheduler_type: linear → cosine). Starting from step 0. "
            "Set checkpoints.no_resume=true to silence this warning.") in out
    assert _steps(out) == [1, 2]


def test_nothing_left_to_train_and_bad_checkpoint_paths_fail(project, capsys, monkeypatch):
    done = project.config("d1.yaml", output_dir=str(project.root / "d1"), optimization={"steps": 2})
    assert train_in_process(done, capsys, monkeypatch=monkeypatch)[0] == 0
    again = project.config("d2.yaml", output_dir=str(project.root / "d2"), optimization={"steps": 2},
                           model={"load_checkpoint": str(project.root / "d1" / "checkpoints")})
    with pytest.raises(ValueError, match="No remaining training steps: initial_step=2 >= target_steps=2"):
        train_in_process(again, capsys, monkeypatch=monkeypatch)
    missing = project.config("d3.yaml", model={"load_checkpoint": str(project.root / "nowhere")})
    with pytest.raises(ValueError, match="Invalid checkpoint path"):
        train_in_process(missing, capsys, monkeypatch=monkeypatch)


def test_retention_keeps_the_last_n_and_always_the_final_weights(project, capsys, monkeypatch):
    config = project.config("keep.yaml", output_dir=str(project.root / "keep"), optimization={"steps": 4},
                            checkpoints={"interval": 2, "keep_last_n": 1})
    code, out = train_in_process(config, capsys, monkeypatch=monkeypatch)
    assert code == 0
    names = sorted(p.name for p in (project.root / "keep" / "checkpoints").iterdir())
    assert names == ["lora_weights_step_00004.safetensors", "training_state_step_00004.pt"]
    assert "Removed old checkpoint:" in out


def test_full_mode_writes_model_weights_and_refuses_quantization(project, capsys, monkeypatch):
    config = project.config("full.yaml", output_dir=str(project.root / "full"), optimization={"steps": 1},
                            model={"training_mode": "full"}, lora=None)
    code, out = train_in_process(config, capsys, monkeypatch=monkeypatch)
    assert code == 0 and "💾 Model weights for step 1 saved in checkpoints/model_weights_step_00001.safetensors" in out
    bad = project.config("fullq.yaml", model={"training_mode": "full"}, lora=None,
                         acceleration={"quantization": "int8-quanto"})
    with pytest.raises(ValueError, match="Quantization is not supported in full training mode."):
        train_in_process(bad, capsys, monkeypatch=monkeypatch)


def test_audio_video_strategy_with_conditions_trains_and_validates(project, capsys, monkeypatch):
    strategy = {"name": "flexible",
                "video": {"is_generated": True, "latents_dir": "latents",
                          "conditions": [{"type": "first_frame", "probability": 1.0}]},
                "audio": {"is_generated": True, "latents_dir": "audio_latents",
                          "conditions": [{"type": "prefix", "temporal_boundary": 2}]}}
    config = project.config("av.yaml", output_dir=str(project.root / "av"), training_strategy=strategy,
                            optimization={"steps": 2}, validation={"interval": 2},
                            lora={"rank": 4, "alpha": 4, "target_modules": ["audio_attn1.to_q", "audio_ff.net.2",
                                                                            "video_to_audio_attn.to_k", "attn1.to_q"]})
    code, out = train_in_process(config, capsys, monkeypatch=monkeypatch)
    assert code == 0
    assert "(audio enabled 🔈)" in out
    assert read_media_info(project.root / "av" / "samples" / "step_000002_1.mp4").frames == VALIDATION_FRAMES_W_H[0]
    from safetensors.torch import load_file

    keys = load_file(project.root / "av" / "checkpoints" / "lora_weights_step_00002.safetensors").keys()
    assert any(".audio_attn1.to_q.lora_A" in key for key in keys)
    assert any(".video_to_audio_attn.to_k.lora_B" in key for key in keys)
