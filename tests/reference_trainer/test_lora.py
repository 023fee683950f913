"""The toy's own LoRA layers: PEFT's default LoRA, key for key, draw for draw, without importing PEFT."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
import torch

from ltx_pipeline.reference_trainer.flow import video_coords
from ltx_pipeline.reference_trainer.lora import LoraLinear, add_lora, load_lora_state_dict, lora_state_dict
from ltx_pipeline.reference_trainer.model import (
    AUDIO_BINS,
    AUDIO_CHANNELS,
    LATENT_CHANNELS,
    ToyArchitecture,
    ToyAVTransformer,
    create_base,
    load_base,
)
from ltx_pipeline.reference_trainer.quantize import quantize_frozen

TARGETS = ["to_k", "to_q", "to_v", "to_out.0", "ff.net.0.proj", "ff.net.2"]
_HAS_PEFT = importlib.util.find_spec("peft") is not None


@pytest.fixture(scope="module")
def base_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return create_base(tmp_path_factory.mktemp("lora") / "base.safetensors", ToyArchitecture())


def _base(path: Path, dtype: torch.dtype, quantization: str | None = None) -> ToyAVTransformer:
    model = load_base(path, dtype)
    if quantization:
        quantize_frozen(model, quantization)
    return model


def _inputs(arch: ToyArchitecture, dtype: torch.dtype) -> tuple:
    """Eight video tokens, five audio tokens, a caption: every targeted layer takes part."""
    generator = torch.Generator().manual_seed(3)
    video = torch.randn(1, 8, LATENT_CHANNELS, generator=generator).to(dtype)
    text = torch.randn(1, arch.text_len, arch.text_dim, generator=generator).to(dtype)
    audio = torch.randn(1, 5, AUDIO_CHANNELS * AUDIO_BINS, generator=generator).to(dtype)
    return (video, torch.full((1, 8), 0.5), video_coords(2, 2, 2, torch.device("cpu")), text,
            torch.ones(1, arch.text_len), audio, torch.full((1, 5), 0.5))


def _randomise_b(model: torch.nn.Module) -> None:
    """B starts at zero, which hides any difference in how the update is applied."""
    generator = torch.Generator().manual_seed(5)
    for name, parameter in model.named_parameters():
        if "lora_B" in name:
            parameter.data.copy_(torch.randn(parameter.shape, generator=generator) * 0.1)


def test_only_the_adapters_train_and_a_zero_b_leaves_the_base_output(base_file: Path) -> None:
    base = _base(base_file, torch.float32)
    inputs = _inputs(ToyArchitecture(), torch.float32)
    expected = base(*inputs)[0]
    model = add_lora(_base(base_file, torch.float32), rank=4, alpha=8, dropout=0.0, target_modules=TARGETS)
    trainable = [name for name, p in model.named_parameters() if p.requires_grad]
    assert trainable and all(".lora_A." in n or ".lora_B." in n for n in trainable)
    assert sum(isinstance(m, LoraLinear) for m in model.modules()) == len(trainable) // 2
    assert torch.equal(model(*inputs)[0], expected)
    layer = model.get_submodule("transformer_blocks.0.attn1.to_q")
    assert isinstance(layer, LoraLinear) and layer.scaling == 2.0


def test_a_state_dict_round_trips_and_foreign_keys_are_reported(base_file: Path) -> None:
    torch.manual_seed(1)
    trained = add_lora(_base(base_file, torch.float32), 4, 4, 0.0, TARGETS)
    _randomise_b(trained)
    inputs = _inputs(ToyArchitecture(), torch.float32)
    torch.manual_seed(2)
    fresh = add_lora(_base(base_file, torch.float32), 4, 4, 0.0, TARGETS)
    assert not torch.equal(fresh(*inputs)[0], trained(*inputs)[0])
    assert load_lora_state_dict(fresh, lora_state_dict(trained)) == []
    assert torch.equal(fresh(*inputs)[0], trained(*inputs)[0])
    assert load_lora_state_dict(fresh, {"not.a.layer.lora_A.weight": torch.zeros(1)}) == ["not.a.layer.lora_A.weight"]


def test_targets_that_match_nothing_or_no_linear_layer_are_errors(base_file: Path) -> None:
    with pytest.raises(ValueError, match="not found in the base model"):
        add_lora(_base(base_file, torch.float32), 4, 4, 0.0, ["no_such_layer"])
    with pytest.raises(ValueError, match="is not supported"):
        add_lora(_base(base_file, torch.float32), 4, 4, 0.0, ["to_out"])  # a ModuleList


@pytest.mark.skipif(not _HAS_PEFT, reason="peft is not installed: nothing to compare against")
@pytest.mark.parametrize(("dtype", "quantization", "dropout"), [
    (torch.float32, None, 0.0), (torch.bfloat16, None, 0.1), (torch.bfloat16, "int8-quanto", 0.0),
    (torch.bfloat16, "fp8-quanto", 0.0)])
def test_keys_shapes_initial_values_order_and_outputs_are_peft_s(base_file: Path, dtype: torch.dtype,
                                                                 quantization: str | None, dropout: float) -> None:
    from peft import LoraConfig, get_peft_model, get_peft_model_state_dict, set_peft_model_state_dict

    torch.manual_seed(11)
    theirs = get_peft_model(_base(base_file, dtype, quantization),
                            LoraConfig(r=4, lora_alpha=8, lora_dropout=dropout, target_modules=TARGETS,
                                       init_lora_weights=True))
    torch.manual_seed(11)
    ours = add_lora(_base(base_file, dtype, quantization), 4, 8, dropout, TARGETS)

    peft_state = {k.removeprefix("base_model.model."): v for k, v in get_peft_model_state_dict(theirs).items()}
    our_state = lora_state_dict(ours)
    assert list(our_state) == list(peft_state)  # the checkpoint's key names, in order
    for key, value in our_state.items():  # same draws from the same seed, same rounding through the base dtype
        assert value.shape == peft_state[key].shape and value.dtype == peft_state[key].dtype, key
        assert torch.equal(value, peft_state[key]), key

    def trainable(model: torch.nn.Module) -> list[tuple[str, torch.Size]]:
        return [(n.removeprefix("base_model.model.").replace(".default", ""), p.shape)
                for n, p in model.named_parameters() if p.requires_grad]
    assert trainable(ours) == trainable(theirs)  # what an optimizer state is indexed by

    _randomise_b(ours)
    set_peft_model_state_dict(theirs, {"base_model.model." + k: v for k, v in lora_state_dict(ours).items()})
    ours.eval(), theirs.eval()
    inputs = _inputs(ToyArchitecture(), dtype)
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=dtype != torch.float32):
        ours_out, theirs_out = ours(*inputs)[0], theirs(*inputs)[0]
    assert torch.equal(ours_out, theirs_out)


def test_two_bases_from_one_seed_are_the_same_bytes_and_load(tmp_path: Path) -> None:
    """The latent cache keys on the model file's identity: the toy base of two runs must be one file's bytes."""
    from ltx_pipeline.reference_trainer.model import read_architecture

    # safetensors writes its metadata map in hash order: six files, so unsorted headers would all agree by chance
    # once in 32 runs at most.
    first, *others = [create_base(tmp_path / f"{n}.safetensors", ToyArchitecture(seed=3)) for n in range(6)]
    assert all(other.read_bytes() == first.read_bytes() for other in others)
    second = others[0]
    assert read_architecture(second) == ToyArchitecture(seed=3)  # the rewritten header still reads back
