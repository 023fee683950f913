"""Model-file rules: what the real trainer demands of the checkpoint and text encoder it is given.

Owns the rules the official trainer meets only when it loads the models, judged here from what the
files say about themselves (no tensor is read): the Gemma text encoder must be the generation the
LTX checkpoint declares in its safetensors ``__metadata__`` (ltx-core's ``_check_gemma_version``),
a Gemma folder or packed text encoder must hold what ``GemmaAssets`` loads and a ``model_type``
that ``get_gemma_ops`` supports, ``acceleration.load_text_encoder_in_8bit`` needs a CUDA GPU
(``ltx_trainer.gemma_8bit``), and ``validation.stg_blocks`` must name blocks the transformer has
(``config.transformer.num_layers``). The rules mirror the trainer's source at commit 400fd31 and
are pure: the caller reads the files and passes their contents. Every finding is a ``Check`` with
its exact fix; ``model_file_fixes`` names the one that is patched on its own.
"""

from __future__ import annotations

import json
import math
from collections.abc import Collection, Iterable, Mapping
from pathlib import PurePosixPath
from typing import Any

from ltx_pipeline.ltx.config_values import config_value, lax_int
from ltx_pipeline.ltx.data_check import Check

__all__ = [
    "DEFAULT_NUM_LAYERS",
    "DEFAULT_STG_BLOCKS",
    "SUPPORTED_GEMMA_TYPES",
    "checkpoint_metadata",
    "gemma_folder_checks",
    "gemma_pairing_checks",
    "is_ltx_checkpoint",
    "model_file_fixes",
    "packed_gemma_config",
    "packed_text_encoder_checks",
    "parse_model_version",
    "stg_blocks_checks",
    "text_encoder_8bit_checks",
]

DEFAULT_NUM_LAYERS = 48  # LTXModelConfigurator: config.get("num_layers", 48)
DEFAULT_STG_BLOCKS = (28,)  # ValidationConfig.stg_blocks default_factory
SUPPORTED_GEMMA_TYPES = ("gemma3", "gemma4", "gemma4_unified")  # get_gemma_ops
# encoder_configurator._GEMMA_SOURCE_CHECKPOINT_REQUIRED_SINCE
_SOURCE_REQUIRED_SINCE = (2, 4, 0)
_TE = "model.text_encoder_path"
_8BIT = "acceleration.load_text_encoder_in_8bit"
_STG = "validation.stg_blocks"
_GEMMA3_REPO = "google/gemma-3-12b-it"
# GemmaAssets: found by name anywhere under the folder (find_matching_file / rglob), config.json and
# tokenizer.json excluded from the sidecars, tokenizer_config.json and processor_config.json required.
_FOLDER_FILES = ("config.json", "model*.safetensors", "tokenizer.json", "tokenizer_config.json",
                 "processor_config.json")
_PACKED_SIDECARS = ("tokenizer_config.json", "processor_config.json")
_LAX_TRUE = {"1", "true", "t", "yes", "y", "on"}  # pydantic's lax bool


def checkpoint_metadata(raw: Mapping[str, Any]) -> dict[str, Any]:
    """A safetensors ``__metadata__`` as the trainer reads it: each value JSON-decoded when it is JSON.

    Mirrors ``SafetensorsModelStateDictLoader.metadata``: ``config`` and ``gemma_source_checkpoint``
    become objects, ``model_version`` stays a string unless it happens to be valid JSON.
    """
    parsed: dict[str, Any] = {}
    for key, value in raw.items():
        try:
            parsed[key] = json.loads(value) if isinstance(value, str) else value
        except ValueError:
            parsed[key] = value
    return parsed


def is_ltx_checkpoint(metadata: Mapping[str, Any]) -> bool:
    """The metadata describes an LTX checkpoint (its ``config`` has a ``transformer`` section)."""
    config = metadata.get("config")
    return isinstance(config, Mapping) and isinstance(config.get("transformer"), Mapping)


def parse_model_version(version: str | None) -> tuple[int, ...]:
    """ltx-core's ``parse_model_version``: the leading dot-separated integers ("2.3.rc1" -> (2, 3))."""
    if not version:
        return ()
    parts: list[int] = []
    for part in version.split("."):
        if not part.isdigit():
            break
        parts.append(int(part))
    return tuple(parts)


def packed_gemma_config(metadata: Mapping[str, Any]) -> dict[str, Any] | None:
    """The Hugging Face config a packed text encoder carries (``gemma_config`` metadata), or None."""
    raw = metadata.get("gemma_config")
    try:
        config = json.loads(raw) if isinstance(raw, str) else raw
    except ValueError:
        return None
    return dict(config) if isinstance(config, Mapping) else None


def _model_type_checks(gemma_config: Mapping[str, Any], where: str) -> list[Check]:
    """``build_gemma_hf_config`` needs a model_type; ``get_gemma_ops`` supports three of them."""
    model_type = gemma_config.get("model_type")
    if model_type in SUPPORTED_GEMMA_TYPES:
        return []
    said = f"model_type {model_type!r}" if model_type else "no model_type"
    return [Check("error", "gemma-model-type-unsupported",
                  f"{where} has {said}; the trainer loads only {', '.join(SUPPORTED_GEMMA_TYPES)}", _TE,
                  f"point {_TE} at the LTX checkpoint's own text encoder: {_GEMMA3_REPO} (model_type gemma3) "
                  "for LTX-2 and LTX-2.3, the packed text encoder of an LTX-2.5 split pack")]


def _declared_source(source: Any, actual: Any, checkpoint: str, text_encoder: str) -> list[Check]:
    """A checkpoint that names its Gemma: ``gemma_version`` against the Gemma config's own."""
    if not isinstance(source, Mapping):
        return [Check("error", "bad-gemma-source-checkpoint",
                      f"{checkpoint} has metadata gemma_source_checkpoint {source!r}, not a JSON object: the "
                      "trainer fails reading its gemma_version", "model.model_path",
                      "download the checkpoint again (its metadata is damaged), or point model.model_path at "
                      "an intact LTX checkpoint")]
    expected = source.get("gemma_version")
    if expected == actual:
        return []
    return [Check("error", "gemma-version-mismatch",
                  f"{checkpoint} expects a Gemma with gemma_version {expected!r} (its metadata "
                  f"gemma_source_checkpoint), but {text_encoder} declares gemma_version {actual!r}: the trainer "
                  "stops with 'Gemma version mismatch'", _TE,
                  f"point {_TE} at the text encoder released with this checkpoint (its config declares "
                  f"gemma_version {expected!r}; for an LTX-2.5 split pack, the pack's packed text-encoder "
                  ".safetensors)")]


def _undeclared_source(version: str, actual: Any, checkpoint: str, text_encoder: str) -> list[Check]:
    """A checkpoint of model_version 2.4 or later that does not name its Gemma."""
    if actual is None:
        return [Check("warning", "gemma-version-unchecked",
                      f"{checkpoint} has model_version {version!r} but no gemma_source_checkpoint, and "
                      f"{text_encoder} declares no gemma_version: the trainer skips its Gemma version check",
                      _TE, f"verify by hand that {_TE} is the text encoder released with this checkpoint")]
    return [Check("error", "gemma-source-missing",
                  f"{checkpoint} has model_version {version!r} but no gemma_source_checkpoint in its metadata: "
                  "the trainer refuses it ('must declare gemma_source_checkpoint.gemma_version')",
                  "model.model_path",
                  "download the checkpoint again as released (LTX 2.4 and later carry "
                  "gemma_source_checkpoint in their metadata)")]


def gemma_pairing_checks(metadata: Mapping[str, Any], gemma_config: Mapping[str, Any], *, checkpoint: str,
                         text_encoder: str) -> list[Check]:
    """ltx-core's ``_check_gemma_version``: the text encoder must be the checkpoint's Gemma.

    A checkpoint declaring ``gemma_source_checkpoint`` must match its ``gemma_version`` with the
    Gemma config's top-level ``gemma_version`` (``model_type`` is not compared). One without it but
    with ``model_version`` >= 2.4 was required to declare it: refused when the Gemma config has a
    ``gemma_version``, else the trainer only logs a warning. Any other checkpoint must pair with
    ``model_type`` gemma3.

    Args:
        metadata: the checkpoint's ``__metadata__`` as ``checkpoint_metadata`` decodes it.
        gemma_config: the text encoder's Hugging Face config (its ``config.json``, or a packed
            text encoder's ``gemma_config``).
        checkpoint: the checkpoint's path, for messages.
        text_encoder: the text encoder's path, for messages.
    """
    actual = gemma_config.get("gemma_version")
    if metadata.get("gemma_source_checkpoint") is not None:
        return _declared_source(metadata["gemma_source_checkpoint"], actual, checkpoint, text_encoder)
    version = metadata.get("model_version")
    if version is not None and not isinstance(version, str):
        if version:  # valid JSON such as "2.3" decodes to a number, and parse_model_version calls .split on it
            return [Check("error", "bad-model-version",
                          f"{checkpoint} has metadata model_version {version!r}, which decodes as JSON to a "
                          f"{type(version).__name__}: the trainer's parse_model_version fails on it",
                          "model.model_path",
                          "download the checkpoint again, or point model.model_path at one whose model_version "
                          "is a dotted version string such as '2.3.0'")]
        version = None  # a falsy value parses to (): the gemma3 rule applies
    if version is not None and parse_model_version(version) >= _SOURCE_REQUIRED_SINCE:
        return _undeclared_source(version, actual, checkpoint, text_encoder)
    model_type = gemma_config.get("model_type")
    if model_type == "gemma3" or model_type not in SUPPORTED_GEMMA_TYPES:
        return []  # an unsupported or missing model_type is reported by the folder rules
    return [Check("error", "gemma-generation-mismatch",
                  f"{checkpoint} declares no gemma_source_checkpoint (model_version {version!r}), so the trainer "
                  f"needs a Gemma 3 text encoder (model_type 'gemma3'), but {text_encoder} has model_type "
                  f"{model_type!r}", _TE,
                  f"point {_TE} at a Gemma 3 folder ({_GEMMA3_REPO}), or point model.model_path at the LTX "
                  f"checkpoint this {model_type} text encoder was released with")]


def _download_fix(folder: str, model_type: Any) -> str:
    gemma3 = (f"`huggingface-cli download {_GEMMA3_REPO} --local-dir {folder}` (config.json, model-*.safetensors, "
              "tokenizer.json, tokenizer_config.json, processor_config.json, preprocessor_config.json)")
    if model_type == "gemma3":
        return f"download the complete folder again, e.g. {gemma3}"
    if model_type in SUPPORTED_GEMMA_TYPES:
        return f"download the complete {model_type} text-encoder folder again into {folder}, or point {_TE} at one"
    return f"download the complete Gemma folder again (for LTX-2 and LTX-2.3: {gemma3}), or point {_TE} at one"


def gemma_folder_checks(files: Iterable[str], gemma_config: Mapping[str, Any] | None,
                        processor_config: Mapping[str, Any] | None, *, folder: str) -> list[Check]:
    """What ``GemmaAssets.from_root`` and the processor the trainer always builds need in a Gemma folder.

    Args:
        files: every file under the folder, as paths relative to it (any depth: the trainer finds
            each file by name anywhere below the folder).
        gemma_config: the parsed ``config.json`` the trainer would read, or None when absent or
            unreadable.
        processor_config: the parsed ``processor_config.json``, or None when absent or unreadable.
        folder: the folder's path, for messages.
    """
    names = {PurePosixPath(f).name for f in files}
    missing = [pattern for pattern in _FOLDER_FILES
               if not any(PurePosixPath(name).match(pattern) for name in names)]
    model_type = (gemma_config or {}).get("model_type")
    # Gemma3Processor's image processor: nested in processor_config.json, else preprocessor_config.json.
    nested = isinstance((processor_config or {}).get("image_processor"), Mapping)
    if model_type == "gemma3" and not nested and "preprocessor_config.json" not in names:
        missing.append("preprocessor_config.json")
    checks = []
    if missing:
        loader = "GemmaAssets" + (" and the Gemma 3 processor" if "preprocessor_config.json" in missing else "")
        checks.append(Check("error", "gemma-files-missing",
                            f"the Gemma folder {folder} lacks {', '.join(missing)}: the trainer cannot load the "
                            f"text encoder (ltx-core {loader})", _TE, _download_fix(folder, model_type)))
    if gemma_config is not None:
        checks += _model_type_checks(gemma_config, f"{folder}/config.json")
    elif "config.json" in names:
        checks.append(Check("error", "gemma-config-unreadable",
                            f"{folder}/config.json is not a JSON object: the trainer cannot read the text "
                            "encoder's config", _TE, _download_fix(folder, None)))
    return checks


def packed_text_encoder_checks(tensor_names: Collection[str], metadata: Mapping[str, Any], *,
                               path: str) -> list[Check]:
    """What ``GemmaAssets.from_single_file`` needs in a packed text-encoder ``.safetensors``.

    Args:
        tensor_names: the tensors its header lists.
        metadata: its raw ``__metadata__`` (string values).
        path: the file's path, for messages.
    """
    fix = (f"point {_TE} at the packed text encoder shipped with the checkpoint, or at a Gemma folder; a file "
           "packed by hand needs ltx-core's build_text_encoder_tensors_from_gemma_root")
    config = packed_gemma_config(metadata)
    if config is None:
        return [Check("error", "packed-text-encoder-invalid",
                      f"{path} has no gemma_config metadata (a JSON Hugging Face config): it is not a packed text "
                      "encoder the trainer can load", _TE, fix)]
    missing = ([] if "tokenizer_json" in tensor_names else ["tensor tokenizer_json"])
    missing += [f"sidecar {name}" for name in _PACKED_SIDECARS
                if f"hf_asset__{name}" not in tensor_names and name not in metadata]
    checks = []
    if missing:
        checks.append(Check("error", "packed-text-encoder-invalid",
                            f"the packed text encoder {path} lacks {', '.join(missing)}: the trainer cannot load it",
                            _TE, fix))
    return checks + _model_type_checks(config, f"{path} (gemma_config)")


def _lax_true(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, (int, float)):
        return value == 1
    return isinstance(value, str) and value.strip().lower() in _LAX_TRUE


def text_encoder_8bit_checks(config: Mapping[str, Any], no_cuda: str | None) -> list[Check]:
    """``load_text_encoder_in_8bit: true`` without a CUDA GPU: the trainer refuses it.

    Args:
        config: the trainer config mapping.
        no_cuda: why this machine has no CUDA GPU (e.g. the GPU was only assumed), or None when
            it has one or nothing is known.
    """
    if no_cuda is None or not _lax_true(config_value(config, _8BIT, False)):
        return []
    return [Check("error", "text-encoder-8bit-needs-cuda",
                  f"{_8BIT} is true but {no_cuda}: the trainer stops with '8-bit Gemma quantization requires a "
                  "CUDA device'", _8BIT, f"{_8BIT}: false (8-bit only saves text-encoder memory)")]




def _stg_enabled(config: Mapping[str, Any]) -> bool:
    """STG runs unless both scales are 0.0 (guiders: ``not math.isclose(stg_scale, 0.0)``)."""
    for key in ("validation.video_stg_scale", "validation.audio_stg_scale"):
        value = config_value(config, key, 1.0)
        try:
            if not math.isclose(float(value), 0.0):
                return True
        except (TypeError, ValueError):
            return True  # the schema mirror reports a malformed scale
    return False


def stg_blocks_checks(config: Mapping[str, Any], metadata: Mapping[str, Any], *, checkpoint: str) -> list[Check]:
    """``validation.stg_blocks`` naming blocks the transformer lacks: STG runs but skips no attention there.

    The trainer builds its perturbation mask over ``range(num_layers)`` and matches listed blocks
    by value, so a block outside it (or negative) is silently ignored: a warning, never a failure.
    An absent key is the trainer's default ``[28]``; null perturbs every block.
    """
    if not is_ltx_checkpoint(metadata) or not _stg_enabled(config):
        return []
    stated = config_value(config, _STG, list(DEFAULT_STG_BLOCKS))
    if not isinstance(stated, list):
        return []  # null means every block; anything else is the schema mirror's to report
    blocks = [b for b in (lax_int(v) for v in stated) if b is not None]
    layers = lax_int(metadata["config"]["transformer"].get("num_layers", DEFAULT_NUM_LAYERS))
    if layers is None or layers < 1:
        return []
    lacking = [b for b in blocks if not 0 <= b < layers]
    if not lacking:
        return []
    kept = [b for b in blocks if 0 <= b < layers]
    default = " (the trainer's default, the key being absent)" if config_value(config, _STG) is None else ""
    # The same relative depth as the stated blocks, e.g. 28 of 48 -> 1 of 2.
    scaled = sorted({min(layers - 1, max(0, round(b * layers / DEFAULT_NUM_LAYERS))) for b in lacking} | set(kept))
    effect = f"STG perturbs only block(s) {kept}" if kept else "STG perturbs no block at all"
    return [Check("warning", "stg-blocks-missing",
                  f"{_STG} is {stated}{default} but {checkpoint} has {layers} transformer block(s), numbered 0 to "
                  f"{layers - 1}: block(s) {lacking} do not exist, so {effect} in validation samples", _STG,
                  f"{_STG}: {scaled} (blocks 0 to {layers - 1} exist), null to perturb every block, or "
                  "validation.video_stg_scale and validation.audio_stg_scale 0.0 to turn STG off")]


def model_file_fixes(checks: Iterable[Check]) -> list[tuple[str, Any, str]]:
    """The model-file findings with one safe fix, as config patches ``(dotted path, new value, reason)``.

    Only ``load_text_encoder_in_8bit`` without CUDA: false loads the same text encoder in full
    precision, which only costs memory. The reason repeats the finding, so it says how the
    missing GPU was known.
    """
    return [(_8BIT, False, f"{check.message}; false only costs text-encoder memory")
            for check in checks if check.code == "text-encoder-8bit-needs-cuda"][:1]
