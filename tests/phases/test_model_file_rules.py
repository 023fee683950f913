"""The real trainer's model-file rules (issue 32): Gemma generation, Gemma files, 8-bit without CUDA, stg_blocks.

Unit tests of the pure rules in ``ltx.model_files``; then the same rules read from real (tiny) safetensors
files and Gemma folders through ``runtime_checks``; then through the validate phase on the ltx backend.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml
from safetensors.numpy import save_file

from ltx_pipeline.cli import main
from ltx_pipeline.ltx.model_files import (
    checkpoint_metadata,
    gemma_folder_checks,
    gemma_pairing_checks,
    model_file_fixes,
    packed_text_encoder_checks,
    parse_model_version,
    stg_blocks_checks,
    text_encoder_8bit_checks,
)
from ltx_pipeline.training.validation import LaunchTarget, runtime_checks
from tests.conftest import RTX5090_SMI, make_tree

GEMMA3 = {"model_type": "gemma3", "text_config": {"model_type": "gemma3_text"}}
GEMMA3_FILES = ["config.json", "model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors",
                "tokenizer.json", "tokenizer_config.json", "processor_config.json", "preprocessor_config.json"]
PROCESSOR = {"processor_class": "Gemma3Processor", "image_seq_length": 256}
NO_CUDA = "the GPU was only assumed with --assume-gpu (1x test GPU), not measured by nvidia-smi"


def ltx_metadata(num_layers: int | None = None, **extra: Any) -> dict[str, Any]:
    """A checkpoint's ``__metadata__`` as the trainer decodes it."""
    transformer = {} if num_layers is None else {"num_layers": num_layers}
    return {"config": {"transformer": transformer, "vae": {}}, **extra}


def codes(checks: list) -> list[str]:
    return [c.code for c in checks]


# --- the Gemma generation (ltx-core encoder_configurator._check_gemma_version) -----------------------------

def test_metadata_is_decoded_as_the_trainer_decodes_it() -> None:
    raw = {"config": '{"transformer": {"num_layers": 2}}', "model_version": "2.3.0", "license": "x y",
           "gemma_source_checkpoint": '{"gemma_version": "4"}'}
    assert checkpoint_metadata(raw) == {"config": {"transformer": {"num_layers": 2}}, "model_version": "2.3.0",
                                        "license": "x y", "gemma_source_checkpoint": {"gemma_version": "4"}}
    assert checkpoint_metadata({"model_version": "2.3"})["model_version"] == 2.3  # valid JSON: a float


@pytest.mark.parametrize(("version", "parsed"), [(None, ()), ("", ()), ("2.3.rc1", (2, 3)), ("2.4.0", (2, 4, 0)),
                                                 ("2.4-rc2", (2,)), ("2.10", (2, 10))])
def test_model_version_parses_as_ltx_core_parses_it(version: str | None, parsed: tuple[int, ...]) -> None:
    assert parse_model_version(version) == parsed


@pytest.mark.parametrize("metadata", [ltx_metadata(), ltx_metadata(model_version="2.3.0"),
                                      ltx_metadata(model_version="2.4-rc2")])  # (2,) < (2, 4, 0): gemma3 rule
def test_a_checkpoint_without_gemma_source_pairs_with_gemma3_only(metadata: dict[str, Any]) -> None:
    assert gemma_pairing_checks(metadata, GEMMA3, checkpoint="/m/ltx.safetensors", text_encoder="/m/g") == []
    [check] = gemma_pairing_checks(metadata, {"model_type": "gemma4_unified"}, checkpoint="/m/ltx.safetensors",
                                   text_encoder="/m/g4")
    assert (check.severity, check.code, check.path) == ("error", "gemma-generation-mismatch", "model.text_encoder_path")
    assert "model_type 'gemma4_unified'" in check.message and "model_type 'gemma3'" in check.message
    assert "/m/ltx.safetensors" in check.message and "/m/g4" in check.message
    assert "google/gemma-3-12b-it" in (check.fix or "") and "model.model_path" in (check.fix or "")


def test_gemma_source_checkpoint_is_matched_on_gemma_version_not_model_type() -> None:
    metadata = ltx_metadata(model_version="2.5.0", gemma_source_checkpoint={"gemma_version": "gemma-4-12b"})
    te = {"model_type": "gemma4_unified", "gemma_version": "gemma-4-12b"}
    assert gemma_pairing_checks(metadata, te, checkpoint="c", text_encoder="t") == []
    # The trainer compares gemma_version only: a dense gemma4 config with the same version passes too.
    assert gemma_pairing_checks(metadata, {**te, "model_type": "gemma4"}, checkpoint="c", text_encoder="t") == []
    [check] = gemma_pairing_checks(metadata, GEMMA3, checkpoint="c", text_encoder="t")
    assert check.code == "gemma-version-mismatch" and "'gemma-4-12b'" in check.message and "None" in check.message
    assert "'gemma-4-12b'" in (check.fix or "")


def test_a_new_checkpoint_without_gemma_source_is_refused_or_unchecked() -> None:
    metadata = ltx_metadata(model_version="2.5.0")
    [check] = gemma_pairing_checks(metadata, {"model_type": "gemma4_unified", "gemma_version": "x"},
                                   checkpoint="c", text_encoder="t")
    assert (check.severity, check.code, check.path) == ("error", "gemma-source-missing", "model.model_path")
    [check] = gemma_pairing_checks(metadata, {"model_type": "gemma4_unified"}, checkpoint="c", text_encoder="t")
    assert (check.severity, check.code) == ("warning", "gemma-version-unchecked")  # the trainer only logs it


def test_a_model_version_that_decodes_to_a_number_is_refused() -> None:
    [check] = gemma_pairing_checks(ltx_metadata(model_version=2.3), GEMMA3, checkpoint="c", text_encoder="t")
    assert check.code == "bad-model-version" and "float" in check.message


# --- the Gemma folder (ltx-core GemmaAssets.from_root, build_gemma_processor) -------------------------------

def test_a_complete_gemma3_folder_passes_and_each_missing_file_is_named() -> None:
    assert gemma_folder_checks(GEMMA3_FILES, GEMMA3, PROCESSOR, folder="/m/g") == []
    for required, named in [("config.json", "config.json"), ("tokenizer.json", "tokenizer.json"),
                            ("tokenizer_config.json", "tokenizer_config.json"),
                            ("processor_config.json", "processor_config.json"),
                            ("preprocessor_config.json", "preprocessor_config.json")]:
        files = [f for f in GEMMA3_FILES if f != required]
        [check] = gemma_folder_checks(files, GEMMA3 if required != "config.json" else None, PROCESSOR,
                                      folder="/m/g")
        assert (check.severity, check.code, check.path) == ("error", "gemma-files-missing", "model.text_encoder_path")
        assert f"lacks {named}" in check.message
        assert "huggingface-cli download google/gemma-3-12b-it --local-dir /m/g" in (check.fix or "")
    [check] = gemma_folder_checks([f for f in GEMMA3_FILES if not f.startswith("model-")], GEMMA3, PROCESSOR,
                                  folder="/m/g")
    assert "lacks model*.safetensors" in check.message


def test_files_are_found_at_any_depth_and_the_image_processor_may_be_nested() -> None:
    nested = [f"snapshots/abc/{f}" for f in GEMMA3_FILES]
    assert gemma_folder_checks(nested, GEMMA3, PROCESSOR, folder="/m/g") == []
    without = [f for f in GEMMA3_FILES if f != "preprocessor_config.json"]
    inline = {**PROCESSOR, "image_processor": {"image_processor_type": "Gemma3ImageProcessor"}}
    assert gemma_folder_checks(without, GEMMA3, inline, folder="/m/g") == []
    # Only a Gemma 3 processor needs it; the Gemma 4 families are not held to it.
    assert gemma_folder_checks(without, {"model_type": "gemma4_unified"}, PROCESSOR, folder="/m/g") == []


@pytest.mark.parametrize("config", [{"model_type": "llama"}, {"model_type": "gemma3_text"}, {}])
def test_a_model_type_the_trainer_cannot_load_is_refused(config: dict[str, Any]) -> None:
    [check] = gemma_folder_checks(GEMMA3_FILES, config, PROCESSOR, folder="/m/g")
    assert check.code == "gemma-model-type-unsupported" and "gemma3, gemma4, gemma4_unified" in check.message
    # The generation rule leaves it to this one: one finding per cause.
    assert gemma_pairing_checks(ltx_metadata(), config, checkpoint="c", text_encoder="t") == []


def test_a_packed_text_encoder_needs_its_config_tokenizer_and_sidecars() -> None:
    meta = {"gemma_config": json.dumps({"model_type": "gemma4_unified"}), "format": "pt"}
    names = ["model.layers.0.w", "tokenizer_json", "hf_asset__tokenizer_config.json",
             "hf_asset__processor_config.json"]
    assert packed_text_encoder_checks(names, meta, path="/m/te.safetensors") == []
    # Older packs keep the small JSON sidecars as metadata strings.
    assert packed_text_encoder_checks(names[:2], {**meta, "tokenizer_config.json": "{}",
                                                  "processor_config.json": "{}"}, path="/m/te.safetensors") == []
    [check] = packed_text_encoder_checks(names[:1], meta, path="/m/te.safetensors")
    assert check.code == "packed-text-encoder-invalid"
    assert "tensor tokenizer_json, sidecar tokenizer_config.json, sidecar processor_config.json" in check.message
    [check] = packed_text_encoder_checks(names, {"format": "pt"}, path="/m/te.safetensors")
    assert "no gemma_config" in check.message


# --- 8-bit Gemma without CUDA (ltx_trainer.gemma_8bit) ------------------------------------------------------

@pytest.mark.parametrize("value", [True, "true", "yes", 1])
def test_8bit_gemma_without_cuda_is_an_error_with_a_safe_patch(value: Any) -> None:
    config = {"acceleration": {"load_text_encoder_in_8bit": value}}
    [check] = text_encoder_8bit_checks(config, NO_CUDA)
    assert (check.severity, check.code, check.path) == ("error", "text-encoder-8bit-needs-cuda",
                                                        "acceleration.load_text_encoder_in_8bit")
    assert "8-bit Gemma quantization requires a CUDA device" in check.message and NO_CUDA in check.message
    assert check.fix is not None and check.fix.startswith("acceleration.load_text_encoder_in_8bit: false")
    [(path, new, reason)] = model_file_fixes([check])
    assert (path, new) == ("acceleration.load_text_encoder_in_8bit", False) and "--assume-gpu" in reason


@pytest.mark.parametrize(("value", "no_cuda"), [(True, None), (False, NO_CUDA), ("false", NO_CUDA), (None, NO_CUDA)])
def test_8bit_gemma_is_left_alone_with_cuda_or_when_off(value: Any, no_cuda: str | None) -> None:
    config = {"acceleration": {} if value is None else {"load_text_encoder_in_8bit": value}}
    assert text_encoder_8bit_checks(config, no_cuda) == []


# --- validation.stg_blocks vs the checkpoint's blocks (validation_runner, guidance.perturbations) -----------

def test_the_default_stg_block_on_a_two_block_model_is_a_warning_with_the_blocks_that_exist() -> None:
    [check] = stg_blocks_checks({"validation": {}}, ltx_metadata(num_layers=2), checkpoint="/m/tiny.safetensors")
    assert (check.severity, check.code, check.path) == ("warning", "stg-blocks-missing", "validation.stg_blocks")
    assert "[28] (the trainer's default" in check.message and "2 transformer block(s), numbered 0 to 1" in check.message
    assert "perturbs no block at all" in check.message and "/m/tiny.safetensors" in check.message
    assert check.fix is not None and check.fix.startswith("validation.stg_blocks: [1] (blocks 0 to 1 exist)")
    assert model_file_fixes([check]) == []  # a choice, not patched


def test_stg_blocks_partly_outside_the_model_name_the_missing_ones() -> None:
    config = {"validation": {"stg_blocks": [3, 4, -1]}}  # blocks are 0-based: a 4-block model has 0 to 3
    [check] = stg_blocks_checks(config, ltx_metadata(num_layers=4), checkpoint="c")
    assert "block(s) [4, -1] do not exist" in check.message and "only block(s) [3]" in check.message
    assert (check.fix or "").startswith("validation.stg_blocks: [0, 3] (blocks 0 to 3 exist)")  # 4 of 48 ~ 0 of 4


@pytest.mark.parametrize(("config", "metadata"), [
    ({"validation": {"stg_blocks": [0, 1]}}, ltx_metadata(num_layers=2)),
    ({"validation": {}}, ltx_metadata()),  # num_layers absent: the trainer's 48, so block 28 exists
    ({"validation": {"stg_blocks": None}}, ltx_metadata(num_layers=2)),  # null: every block
    ({"validation": {"video_stg_scale": 0.0, "audio_stg_scale": 0}}, ltx_metadata(num_layers=2)),  # STG off
    ({"validation": {}}, {"config": {"vae": {}}}),  # not an LTX checkpoint
])
def test_stg_blocks_that_exist_or_do_not_matter_pass(config: dict[str, Any], metadata: dict[str, Any]) -> None:
    assert stg_blocks_checks(config, metadata, checkpoint="c") == []


# --- the same rules read from real files (runtime_checks) ---------------------------------------------------

def write_checkpoint(path: Path, metadata: dict[str, Any]) -> Path:
    """A tiny safetensors file whose header carries ``metadata`` (JSON-encoded values, as LTX writes them)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    raw = {k: v if isinstance(v, str) else json.dumps(v) for k, v in metadata.items()}
    save_file({"w": np.zeros((2, 2), dtype=np.float32)}, str(path), metadata=raw)
    return path


def write_gemma(folder: Path, config: dict[str, Any] = GEMMA3, files: list[str] = GEMMA3_FILES) -> Path:
    contents = {"config.json": json.dumps(config), "processor_config.json": json.dumps(PROCESSOR)}
    make_tree(folder, {f: contents.get(Path(f).name, "{}") for f in files if not f.endswith(".safetensors")})
    for name in (f for f in files if f.endswith(".safetensors")):
        save_file({"w": np.zeros(2, dtype=np.float32)}, str(folder / name))
    return folder


def checks_for(tmp_path: Path, model: dict[str, Any], *, no_cuda: str | None = None, model_files: bool = True,
               **sections: Any) -> list:
    config = tmp_path / "config.yaml"
    config.write_text(yaml.safe_dump({"model": model, **sections}))
    target = LaunchTarget(stage=1, buckets="960x544x49", processes=1, dataset_samples=None, no_cuda=no_cuda)
    new = {"text-encoder-8bit-needs-cuda", "stg-blocks-missing"}
    return [c for c in runtime_checks(config, target, model_files=model_files)
            if c.code.startswith(("gemma", "packed", "bad-gemma", "bad-model")) or c.code in new]


def test_files_on_disk_are_read_and_judged(tmp_path: Path) -> None:
    ckpt = write_checkpoint(tmp_path / "m" / "tiny.safetensors", ltx_metadata(num_layers=2))
    gemma = write_gemma(tmp_path / "m" / "gemma")
    model = {"model_path": str(ckpt), "text_encoder_path": str(gemma)}
    eight_bit = {"acceleration": {"load_text_encoder_in_8bit": True}}
    assert codes(checks_for(tmp_path, model, validation={"stg_blocks": [0]})) == []
    assert codes(checks_for(tmp_path, model, no_cuda=NO_CUDA, validation={}, **eight_bit)) == [
        "text-encoder-8bit-needs-cuda", "stg-blocks-missing"]
    assert checks_for(tmp_path, model, no_cuda=NO_CUDA, model_files=False, **eight_bit) == []  # toy backends

    (gemma / "tokenizer.json").unlink()
    (gemma / "config.json").write_text(json.dumps({"model_type": "gemma4_unified"}))
    found = checks_for(tmp_path, model, validation={"stg_blocks": [0]})
    assert codes(found) == ["gemma-files-missing", "gemma-generation-mismatch"]
    assert "lacks tokenizer.json" in found[0].message


def test_a_packed_text_encoder_and_a_non_ltx_checkpoint_on_disk(tmp_path: Path) -> None:
    packed = tmp_path / "te.safetensors"
    save_file({"tokenizer_json": np.zeros(4, dtype=np.uint8)}, str(packed),
              metadata={"gemma_config": json.dumps({"model_type": "gemma4_unified", "gemma_version": "g4"}),
                        "tokenizer_config.json": "{}"})
    ckpt = write_checkpoint(tmp_path / "ltx-2.5.safetensors", ltx_metadata(
        model_version="2.5.0", gemma_source_checkpoint={"gemma_version": "g3"}))
    found = checks_for(tmp_path, {"model_path": str(ckpt), "text_encoder_path": str(packed)})
    assert codes(found) == ["packed-text-encoder-invalid", "gemma-version-mismatch"]
    assert "sidecar processor_config.json" in found[0].message and "'g3'" in found[1].message
    toy = write_checkpoint(tmp_path / "toy.safetensors", {"reference_architecture": {"layers": 2}})
    gemma = write_gemma(tmp_path / "gemma", {"model_type": "gemma4"})
    # Not an LTX checkpoint: nothing to pair with or count blocks in; the folder is still judged on its own.
    assert checks_for(tmp_path, {"model_path": str(toy), "text_encoder_path": str(gemma)}, validation={}) == []


# --- through the validate phase (ltx backend, fake checkout) ------------------------------------------------

@pytest.fixture
def tiny_models(ltx_prereqs: dict[str, str]) -> dict[str, str]:
    """The fake checkout's model files made whole: a 2-block LTX checkpoint and a complete Gemma 3 folder."""
    write_gemma(Path(ltx_prereqs["text_encoder_path"]))
    Path(ltx_prereqs["model_path"]).unlink()
    write_checkpoint(Path(ltx_prereqs["model_path"]), ltx_metadata(num_layers=2))
    return ltx_prereqs


def run(workspace: Path, dataset: Path, prereqs: dict[str, str], *gpu: str) -> int:
    args = ["run", "--workspace", str(workspace), "--run", "r1", "--dataset", str(dataset), "--approve", *gpu]
    for key, value in prereqs.items():
        args += ["--" + key.replace("_", "-"), value]
    return main(args)


def validate_outputs(workspace: Path) -> dict[str, Any]:
    from ltx_pipeline.store import Store

    store = Store.open(workspace / "ltx-pipeline.db")
    return store.latest_phase_runs(store.get_run("r1").id)["validate"].outputs


def test_validate_patches_8bit_gemma_off_for_an_assumed_gpu_and_warns_on_stg_blocks(
        capsys, workspace, clips_dataset, tiny_models, until_validate) -> None:
    code = run(workspace, clips_dataset, tiny_models, "--assume-gpu", "NVIDIA GeForce RTX 5090,32607",
               "--autotune", "off")  # an assumed GPU has no memory to measure
    err = capsys.readouterr().err
    assert code == 0, err
    config = yaml.safe_load((workspace / "r1" / "config.yaml").read_text())
    assert config["acceleration"]["load_text_encoder_in_8bit"] is False  # the low-VRAM recipe asked for true
    [patch] = [p for p in validate_outputs(workspace)["patches"]
               if p["path"] == "acceleration.load_text_encoder_in_8bit"]
    assert (patch["old"], patch["new"]) == (True, False)
    assert "--assume-gpu" in patch["reason"] and "not measured by nvidia-smi" in patch["reason"]
    assert "patched acceleration.load_text_encoder_in_8bit True -> False" in err
    assert "warning: [stg-blocks-missing] validation.stg_blocks is [28]" in err and "0 to 1" in err


def test_validate_keeps_8bit_gemma_on_measured_gpus(capsys, workspace, clips_dataset, tiny_models, fake_smi,
                                                    until_validate) -> None:
    code = run(workspace, clips_dataset, tiny_models, "--nvidia-smi", fake_smi(RTX5090_SMI))
    assert code == 0, capsys.readouterr().err
    config = yaml.safe_load((workspace / "r1" / "config.yaml").read_text())
    assert config["acceleration"]["load_text_encoder_in_8bit"] is True
    assert not any(p["path"] == "acceleration.load_text_encoder_in_8bit"
                   for p in validate_outputs(workspace)["patches"])


def test_validate_refuses_a_text_encoder_of_another_generation(capsys, workspace, clips_dataset, tiny_models,
                                                               fake_smi, until_validate) -> None:
    config = Path(tiny_models["text_encoder_path"]) / "config.json"
    config.write_text(json.dumps({"model_type": "gemma4_unified"}))
    code = run(workspace, clips_dataset, tiny_models, "--nvidia-smi", fake_smi(RTX5090_SMI))
    err = capsys.readouterr().err
    assert code == 2 and "validate.md" in err
    report = (workspace / "r1" / "validate.md").read_text()
    assert "error [gemma-generation-mismatch]" in report and "model_type 'gemma4_unified'" in report
