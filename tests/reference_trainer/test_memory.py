"""Each autotune knob moves the measured peak the way it does on the real trainer; OOM at capacity."""

from __future__ import annotations

import pytest
import torch
from conftest import make_project, peak_bytes, run_trainer, train_in_process


@pytest.fixture(scope="module")
def big(tmp_path_factory: pytest.TempPathFactory):
    """320 video tokens per sample, so activations matter next to the weights."""
    return make_project(tmp_path_factory.mktemp("memory"), clips=[(f"c{i}.mp4", 33, False) for i in range(2)],
                        bucket="256x256x33")


def _peak(big, capsys, monkeypatch, name: str, **sections) -> int:  # noqa: ANN001, ANN003
    sections["optimization"] = {"steps": 2, **sections.get("optimization", {})}
    config = big.config(f"{name}.yaml", output_dir=str(big.root / name), **sections)
    assert train_in_process(config, capsys, monkeypatch=monkeypatch)[0] == 0
    return peak_bytes(big.root / name)["training"]


@pytest.mark.parametrize(("knob", "low", "high"), [
    ("quantization", {"acceleration": {"quantization": "int8-quanto"}}, {}),
    ("optimizer", {"optimization": {"optimizer_type": "adamw8bit"}}, {}),
    ("checkpointing", {"optimization": {"enable_gradient_checkpointing": True}}, {}),
    ("batch", {}, {"optimization": {"batch_size": 2}}),
    ("accumulation_vs_batch", {"optimization": {"gradient_accumulation_steps": 2}},
     {"optimization": {"batch_size": 2}}),
    ("mixed_precision", {}, {"acceleration": {"mixed_precision_mode": "no"}}),
])
def test_knob_moves_measured_peak(big, capsys, monkeypatch, knob, low, high):
    low_peak = _peak(big, capsys, monkeypatch, f"{knob}-low", **low)
    assert low_peak < _peak(big, capsys, monkeypatch, f"{knob}-high", **high)


def test_eight_bit_states_are_stored_in_eight_bits():
    from ltx_pipeline.reference_trainer.optim import build_optimizer

    param = torch.nn.Parameter(torch.randn(16, 64))
    optimizer = build_optimizer("adamw8bit", [param], 1e-3)
    param.grad = torch.randn_like(param)
    optimizer.step()
    state = optimizer.state[param]
    assert state["state1"].dtype == torch.uint8 and state["state2"].dtype == torch.uint8


@pytest.mark.parametrize("kind", ["int8", "int4", "int2", "fp8"])
def test_quantized_linear_stores_low_bit_weights_and_stays_close(kind):
    from ltx_pipeline.reference_trainer.quantize import QuantizedLinear

    linear = torch.nn.Linear(64, 32)
    layer = QuantizedLinear(linear, kind)
    bits = {"int8": 8, "int4": 4, "int2": 2, "fp8": 8}[kind]
    assert layer.weight.numel() * layer.weight.element_size() * 8 == 64 * 32 * bits
    x = torch.randn(4, 64, requires_grad=True)
    error = (layer(x) - linear(x)).abs().mean() / linear(x).abs().mean()
    assert error < {"int8": 0.02, "int4": 0.2, "int2": 0.9, "fp8": 0.1}[kind]
    layer(x).sum().backward()
    assert x.grad is not None


@pytest.mark.long  # 11.1 s per run on a 2-core box (2026-12-07): the default suite stays under 6 min
def test_capacity_below_need_fails_with_oom_in_training_or_validation(big, capsys, monkeypatch):
    config = big.config("oomv.yaml", output_dir=str(big.root / "oomv"), optimization={"steps": 1},
                        validation={"interval": 1, "video_dims": [512, 512, 33]})
    assert train_in_process(config, capsys, monkeypatch=monkeypatch)[0] == 0
    peaks = peak_bytes(big.root / "oomv")
    assert peaks["validation"] > peaks["training"]
    between = (peaks["training"] + peaks["validation"]) / 2 / 1024**2
    with pytest.raises(torch.OutOfMemoryError, match="out of memory during validation"):
        train_in_process(config, capsys, env={"LTX_REFERENCE_DEVICE_CAPACITY_MIB": f"{between:.4f}"},
                         monkeypatch=monkeypatch)
    assert "out of memory during validation" in (big.root / "oomv" / "reference_memory.json").read_text()

    training_only = big.config("oomt.yaml", output_dir=str(big.root / "oomt"), optimization={"steps": 1})
    half = f"{peaks['training'] / 2 / 1024**2:.4f}"
    result = run_trainer(training_only, env={"LTX_REFERENCE_DEVICE_CAPACITY_MIB": half})
    assert result.returncode == 1
    assert "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate" in result.stderr
    assert "out of memory during training" in result.stderr


@pytest.mark.long  # 10.5 s per run on a 2-core box (2026-12-07): the default suite stays under 6 min
def test_the_step0_validation_peak_depends_on_the_quantization_alone(big, capsys, monkeypatch):
    """Why autotune carries one validation figure per quantization (``ltx.autotune.VALIDATION_KNOBS``):
    the step-0 pass runs before any optimizer state exists, under no_grad, one prompt at a time."""
    def validation(name: str, **sections) -> int:  # noqa: ANN003
        sections["optimization"] = {"steps": 2, **sections.get("optimization", {})}
        # interval 3 > steps 2: the step-0 pass only, the one a trial measures
        config = big.config(f"{name}.yaml", output_dir=str(big.root / name),
                            validation={"interval": 3, "video_dims": [512, 512, 33]}, **sections)
        assert train_in_process(config, capsys, monkeypatch=monkeypatch)[0] == 0
        return peak_bytes(big.root / name)["validation"]

    base = validation("val-base")
    assert base > 0
    # The 8-bit optimizer's few kilobytes of quantization tables exist before the first step: within 0.1 %.
    assert validation("val-optimizer", optimization={"optimizer_type": "adamw8bit"}) == pytest.approx(base, rel=1e-3)
    assert validation("val-checkpointing", optimization={"enable_gradient_checkpointing": True}) == base
    assert validation("val-batch", optimization={"batch_size": 2}) == base
    assert validation("val-int8", acceleration={"quantization": "int8-quanto"}) < base  # the weights it holds
