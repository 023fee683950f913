"""Failures of the trainer's environment and of its data, from the exception lines they print.

``dependency_error``: the environment, not the run (a module missing, a CUDA/driver library that does not
load, a checkpoint or config the installed code does not understand). ``dataset_error``: what the
trainer's own scripts and dataset refuse (``process_videos.py``'s bucket check, ``datasets.py``'s
per-source sample counts). ``stale_embeddings``: cached text embeddings from another model, which fail
as a key or shape mismatch at the first training step. Each finding carries the fix its cause implies;
``missing_file_fix`` is the fix for a path that does not exist, named with the config key that holds it.
Input lines have their launcher prefixes stripped already. Pure standard library.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Mapping
from pathlib import PurePath
from typing import Any, NamedTuple

from ltx_pipeline.ltx.config_values import config_value
from ltx_pipeline.trainer_log._kinds import FixStep

__all__ = ["Finding", "dataset_failure", "dependency_failure", "missing_file_fix", "stale_embeddings_failure"]


class Finding(NamedTuple):
    kind: str
    evidence: str
    fix: list[FixStep]


_SMOKE = "then `ltx-pipeline smoke` checks the whole environment"
# Import names whose pip distribution is spelled differently.
_PACKAGES = {"cv2": "opencv-python", "PIL": "pillow", "yaml": "pyyaml", "sklearn": "scikit-learn",
             "optimum": "optimum-quanto", "bitsandbytes": "bitsandbytes", "decord": "decord", "av": "av"}
_CUDA_LIB = r"lib(?:cudart|cublas\w*|cudnn\w*|nvrtc|cuda|nccl|cusparse\w*|cufft|curand|nvJitLink)"
_CODE_CHECKOUT = ("the model files and the installed code are out of step: use the checkpoint the installed "
                  "ltx-trainer supports (model.model_path, model.text_encoder_path), or update the trainer "
                  "checkout and its environment together (`git pull && uv sync` in the checkout)")

_DEPENDENCY: tuple[tuple[re.Pattern[str], str], ...] = (
    # Without its exception class too: front ends print the message alone ("Error running job: No module named ...").
    (re.compile(r"No module named '([\w.]+)'"),
     "module {module} is missing from the trainer's environment: install it there (`<trainer python> -m pip "
     "install {package}`, or `uv sync` in the checkout), " + _SMOKE),
    (re.compile(r"8-bit Gemma quantization requires a CUDA device"), "8bit"),
    (re.compile(r"Could not load libtorchcodec|libav(?:util|codec|format)\.so"),
     "torchcodec cannot load FFmpeg's shared libraries: install FFmpeg 4-7 where the trainer runs (Debian 12: "
     "apt-get install libavcodec59 libavformat59 libavutil57 libswresample4 libswscale6), or train video only"),
    # Case-blind: a message a user retypes or quotes in prose often starts with a capital ("No kernel image ...").
    (re.compile(r"(?i:NVIDIA driver on your system is too old|CUDA driver version is insufficient|Found no NVIDIA "
                r"driver|no kernel image is available for execution|CUDA driver initialization failed|"
                r"Unexpected error from cudaGetDeviceCount|cudaErrorInsufficientDriver)"),
     "the installed torch build does not run on this GPU driver: `nvidia-smi` shows the highest CUDA version "
     "the driver supports; update the NVIDIA driver, or install the torch build for that CUDA version "
     "(`<trainer python> -m pip install torch torchvision torchaudio --index-url "
     "https://download.pytorch.org/whl/cu121` for CUDA 12.1), " + _SMOKE),
    (re.compile(_CUDA_LIB + r"[\w.]*: cannot open shared object file"),
     "a CUDA library does not load: the torch wheel's bundled CUDA libraries (the nvidia-* pip packages) are "
     "missing or shadowed; unset LD_LIBRARY_PATH entries that point at another CUDA, reinstall torch in the "
     "trainer's environment (`uv sync --reinstall-package torch` in the checkout), " + _SMOKE),
    (re.compile(r"operator torchvision::\w+ does not exist|(lib\w+\.so[.\d]*): cannot open shared object file"),
     "the torch build does not match torchvision/torchaudio (or a system library is missing): install the "
     "versions the trainer pins together, from one index (`uv sync` in the checkout), " + _SMOKE),
    # torch's dispatcher has no such op: the compiled extension that registers the namespace (xformers, torchvision,
    # a custom kernel) did not load, being built for another torch/CUDA or not built at all.
    (re.compile(r"No such operator (\w+)::\w+"),
     "the compiled extension {package} registers no operators in the installed torch: it was built for another "
     "torch/CUDA or not built; reinstall the wheel made for the installed torch (`<trainer python> -m pip install "
     "--force-reinstall --no-cache-dir {package}`), or train without it (for xformers, use torch's SDPA attention)"),
    (re.compile(r"undefined symbol: \S+"),
     "a compiled extension was built against another torch (flash-attn, xformers, torchvision): reinstall it "
     "against the installed torch (`<trainer python> -m pip install --force-reinstall --no-cache-dir <package>`)"),
    (re.compile(r"does not recognize this architecture|model type `\w+` but Transformers does not recognize"),
     "the installed transformers is older than the text encoder's config: install the version the trainer pins "
     "(`uv sync` in the checkout)"),
    (re.compile(r"Error\(s\) in loading state_dict for|Unexpected key\(s\) in state_dict|Missing key\(s\) in "
                r"state_dict|size mismatch for [\w.]+: copying a param|(?i:(?:unexpected|missing) keys?\b.{0,80}"
                r"\bload_state_dict)"), _CODE_CHECKOUT),
    (re.compile(r"TypeError: \w*(?:Config|VAE|Vae|Encoder|Decoder|Transformer)\w*\.__init__\(\) got an unexpected "
                r"keyword argument"), _CODE_CHECKOUT),
    (re.compile(r"cannot import name '(\w+)' from '([\w.]+)'"),
     "the installed {package} lacks {module}: install the version the trainer pins (`<trainer python> -m pip "
     "install -r requirements.txt`, or `uv sync` in the checkout), " + _SMOKE),
    # torch._inductor's TritonMissing (also inside Dynamo's BackendCompilerFailed) and its check of the GPU's age:
    # there is no Triton to compile with, which no cache deletion mends.
    (re.compile(r"Cannot find a working triton installation|too old to be supported by the triton GPU compiler"),
     "torch.compile needs Triton and none works here: install the triton version torch pins (on Windows, "
     "triton-windows), or train without torch.compile; a GPU older than compute capability 7.0 cannot run Triton"),
    # torch.compile's toolchain: Inductor/Dynamo/Triton failing, or a C++ parser meeting the end of a truncated
    # cached kernel ("expected ident but found 'eof'"): the compile cache or the compiler, not the run.
    (re.compile(r"torch\._(?:inductor|dynamo)\.exc\.\w+|triton\.compiler\.errors\.\w+|"
                r"expected \w+ but found 'eof'"),
     "torch.compile's toolchain failed (a corrupt Inductor/Triton cache, or a compiler that does not match torch): "
     "delete the caches (`~/.triton/cache`, `/tmp/torchinductor_$USER`) and retry; if it persists, train without "
     "torch.compile or reinstall the triton version torch pins"),
    # A C++/CUDA extension compiled at run time (torch.utils.cpp_extension's JIT build, DeepSpeed's op builder): the
    # compiler's "fatal error: <header>: No such file or directory" (the toolkit's headers are not there), ninja's
    # "build stopped: subcommand failed", cpp_extension's "Error building extension '<name>'".
    (re.compile(r"fatal error: [\w./+-]+\.(?:h|hh|hpp|hxx|cuh): No such file or directory|"
                r"ninja: build stopped: subcommand failed|Error building extension '[\w.-]+'"),
     "a package compiles C++/CUDA code at run time (DeepSpeed's ops, a torch extension) and the build failed: it "
     "needs the CUDA toolkit of torch's own CUDA version (`torch.version.cuda`: nvcc and its headers) and a C++ "
     "compiler, with CUDA_HOME pointing at that toolkit; or install the package's prebuilt wheel (for DeepSpeed, "
     "pre-build its ops with DS_BUILD_OPS=1, or use an optimizer that needs no compiled op), " + _SMOKE),
    (re.compile(r"^(?:\S+: )?ImportError: .+"),
     "an import failed in the trainer's environment: reinstall ltx-trainer and its pinned dependencies there "
     "(`uv sync` in the checkout), " + _SMOKE),
)
# A KeyError raised while the model files are read is a config the installed code does not know.
_LOADER_FRAME_RE = re.compile(r'File ".*(?:model_loader\.py|ltx_core/\S*(?:loader|config|registry)\S*\.py)"')


def dependency_failure(lines: list[str], config: Mapping[str, Any] | None) -> Finding | None:
    """The environment's failure, from its exception line (the last one wins), with the fix it implies."""
    for pattern, advice in _DEPENDENCY:
        for line in reversed(lines):
            found = pattern.search(line.strip())
            if not found:
                continue
            if advice == "8bit":
                return Finding("dependency_error", line.strip(), _keep(config, [
                    FixStep("acceleration.load_text_encoder_in_8bit", False,
                            "8-bit Gemma needs a CUDA GPU; this machine has none")]))
            module = found.group(1) if found.groups() and found.group(1) else ""
            top = (found.group(2) if found.re.groups > 1 else module).split(".")[0]
            text = advice.format(module=module, package=_PACKAGES.get(top, top))
            return Finding("dependency_error", line.strip(), [FixStep(None, None, text[0].upper() + text[1:] + ".")])
    key_error = next((line.strip() for line in reversed(lines) if line.startswith("KeyError: ")), None)
    if key_error and any(_LOADER_FRAME_RE.search(line) for line in lines):
        return Finding("dependency_error", key_error, [FixStep(None, None, f"A key the loader expects is missing from "
                                                               f"the model files: {_CODE_CHECKOUT}.")])
    return None


# -- data ----------------------------------------------------------------------------------------------

_NO_BUCKET_RE = re.compile(r"No resolution buckets have <= (\d+) frames\. Available: (\[.*\])")
_COUNTS_RE = re.compile(r"(?:No valid samples found in .*per-source counts: |Mismatched sample counts across "
                        r"sources: )(\{.*?\})")
_AUDIO_DIR_RE = re.compile(r"Required (\w*audio\w*) directory does not exist: (\S+)")


def dataset_failure(lines: list[str], config: Mapping[str, Any] | None) -> Finding | None:
    """What the trainer's scripts and dataset refuse about the data, with the command or config fix."""
    for line in reversed(lines):
        text = line.strip()
        if match := _NO_BUCKET_RE.search(text):
            return Finding("dataset_error", text, _bucket_fix(int(match.group(1)), match.group(2)))
        if match := _COUNTS_RE.search(text):
            return Finding("dataset_error", text, _counts_fix(match.group(1), config))
        if match := _AUDIO_DIR_RE.search(text):
            return Finding("dataset_error", text, _audio_fix(config, match.group(1)))
    return None


def _buckets(text: str) -> list[tuple[int, int, int]]:
    try:
        value = ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return []
    return [(int(b[0]), int(b[1]), int(b[2])) for b in value if isinstance(b, (list, tuple)) and len(b) == 3]


def _bucket_fix(frames: int, available: str) -> list[FixStep]:
    # process_videos.py prints buckets as (frames, height, width); --resolution-buckets takes WxHxF.
    buckets = _buckets(available)
    height, width = (buckets[0][1], buckets[0][2]) if buckets else (768, 768)
    if frames <= 1:
        return [
            FixStep(None, None, f"The dataset holds images (1 frame) but every bucket asks for video frames "
                    f"({available}): preprocess images with single-frame buckets, `python scripts/process_dataset.py "
                    f"<dataset.json> --resolution-buckets {width}x{height}x1 --model-path <model.model_path> "
                    f"--text-encoder-path <model.text_encoder_path>`."),
            FixStep(None, None, "Or keep images and videos in separate datasets, each with its own buckets."),
        ]
    fit = max(1, (frames - 1) // 8 * 8 + 1)  # the trainer's 8k+1 frame rule
    return [
        FixStep(None, None, f"A clip has only {frames} frames and no bucket is that short ({available}): add a bucket "
                f"of at most {fit} frames (8k+1), e.g. `--resolution-buckets \"{width}x{height}x{fit}\"` to "
                f"`python scripts/process_dataset.py`, and preprocess again."),
        FixStep(None, None, "Or drop the clips shorter than the shortest bucket from the dataset file "
                "(`ffprobe -count_frames` gives each clip's frame count)."),
    ]


def _counts_fix(counts_text: str, config: Mapping[str, Any] | None) -> list[FixStep]:
    try:
        counts = {str(k): int(v) for k, v in ast.literal_eval(counts_text).items()}
    except (ValueError, SyntaxError, AttributeError, TypeError):
        counts = {}
    most = max(counts.values(), default=0)
    short = [key for key, count in counts.items() if count < most or count == 0]
    audio = [key for key in short if "audio" in key]
    if audio:
        return _audio_fix(config, audio[0], counts_text)
    where = ", ".join(short) or "some sources"
    return [FixStep(None, None, f"The preprocessed sources do not pair up ({counts_text}; short: {where}): "
                    f"preprocess the whole dataset again into data.preprocessed_data_root with one "
                    f"`python scripts/process_dataset.py` run so every sample has each of its files.")]


def _audio_fix(config: Mapping[str, Any] | None, source: str, counts: str = "") -> list[FixStep]:
    seen = f" ({counts})" if counts else ""
    return _keep(config, [
        FixStep(None, None, f"Audio latents are missing{seen}: the clips had no audio track, or preprocessing ran "
                "without audio. Preprocess again with audio (`python scripts/process_dataset.py <dataset.json> "
                "--with-audio ...`; clips without an audio track cannot train audio), then resume."),
        FixStep("training_strategy.with_audio", False, f"or train video only: the {source} source is what "
                "with_audio reads"),
    ])


# -- stale embeddings ----------------------------------------------------------------------------------

_EMBED_KEY_RE = re.compile(r"KeyError: '(?:video_|audio_)?prompt_(?:embeds|attention_mask)'")
_SHAPE_RE = re.compile(r"mat1 and mat2 shapes cannot be multiplied|The size of tensor a \(\d+\) must match the size "
                       r"of tensor b \(\d+\)|shape '\[[^\]]*\]' is invalid for input of size")


def stale_embeddings_failure(lines: list[str], phase: str | None, steps_logged: bool,
                             config: Mapping[str, Any] | None) -> Finding | None:
    """Cached text embeddings from another model: their keys or their width do not fit at the first step."""
    evidence = next((ln.strip() for ln in reversed(lines) if _EMBED_KEY_RE.search(ln)), None)
    if evidence is None and phase == "training" and not steps_logged:
        evidence = next((ln.strip() for ln in reversed(lines) if _SHAPE_RE.search(ln)), None)
    if evidence is None:
        return None
    root = config_value(config, "data.preprocessed_data_root", None) or "<data.preprocessed_data_root>"
    model = config_value(config, "model.model_path", None) or "<model.model_path>"
    encoder = config_value(config, "model.text_encoder_path", None) or "<model.text_encoder_path>"
    return Finding("stale_embeddings", evidence, [
        FixStep(None, None, f"The cached text embeddings in {root}/conditions come from another model or trainer "
                f"version: move that folder aside and compute them again with this run's models: `python "
                f"scripts/process_captions.py <dataset.json> --output-dir {root}/conditions --model-path {model} "
                f"--text-encoder-path {encoder}`."),
        FixStep(None, None, "Keep one data.preprocessed_data_root per model: latents from another VAE fail the same "
                "way (re-run `python scripts/process_dataset.py` for them)."),
    ])


# -- missing files -------------------------------------------------------------------------------------

_MISSING_KEYS = ("model.model_path, model.text_encoder_path, data.preprocessed_data_root, model.load_checkpoint and "
                 "validation media")
# The path in a not-found message: Python's OSError (PIL's Image.open, PyAV's av.open), torchcodec's decoders
# (torchaudio.load since torchaudio 2.9), torchaudio's FFmpeg reader before it, the trainer's own messages.
_MISSING_PATH_RES = (
    re.compile(r"No such file or directory: (['\"])(?P<path>.+)\1"),
    re.compile(r"No such file or directory: (?P<path>[^'\"\s]\S*)"),
    re.compile(r"Could not open input file: (?P<path>.+?) No such file or directory"),
    re.compile(r"Failed to open the input \"(?P<path>.+)\" \(No such file or directory\)"),
    re.compile(r"(?:does not exist|not found): (?P<path>\S.*?)\s*$"),
)
# transformers/diffusers/huggingface_hub's words for a model folder or Hub repo that lacks a file the loader reads.
_HUB_FILE_RE = re.compile(r"(?P<repo>[^\s'\"]+)['\"]? does not appear to have a file named (?P<file>[\w.\-]*\w)")
# The validation_runner.py function that read a validation condition's file -> the condition key naming it.
_MEDIA_FRAME_RE = re.compile(r'validation_runner\.py", line \d+, in (\w+)')
_MEDIA_KEYS = {"_encode_audio": "audio", "_load_audio_mask": "mask", "_load_and_downsample_mask": "mask",
               "_load_first_frame": "image_or_video", "_encode_temporal_condition_media": "video",
               "_encode_sample_conditions": "video"}


def missing_file_fix(evidence: str, lines: list[str], config: Mapping[str, Any] | None) -> list[FixStep]:
    """The fix for a path that does not exist: the path, the config key holding it, and the check to run.

    The key is the one whose value is the path when ``config`` is given, else the validation condition key
    the innermost ``validation_runner.py`` frame reads (``_encode_audio``: ``...conditions[].audio``).
    """
    if hub := _HUB_FILE_RE.search(evidence):
        return [FixStep(None, None, f"{hub.group('repo')} has no {hub.group('file')}: if it is a local folder, point "
                        f"the model path at the folder that holds {hub.group('file')}; if it is a Hugging Face repo "
                        "id, the download failed: a gated repo needs its licence accepted on its page and a token "
                        "with read access (`huggingface-cli login`, or HF_TOKEN), or download it and point at the "
                        "local copy.")]
    path = next((m.group("path") for p in _MISSING_PATH_RES if (m := p.search(evidence.strip()))), None)
    if path is None:
        return [FixStep(None, None, f"A path the trainer needs does not exist; check {_MISSING_KEYS} against the "
                        "evidence line.")]
    keys = _keys_holding(config, path, "")
    frames = [m.group(1) for line in lines if (m := _MEDIA_FRAME_RE.search(line)) and m.group(1) in _MEDIA_KEYS]
    if not keys and frames:
        keys = [f"validation.samples[].conditions[].{_MEDIA_KEYS[frames[-1]]}"]
    if not keys:
        return [FixStep(None, None, f"{path} does not exist; check {_MISSING_KEYS} for it.")]
    what = "file" if PurePath(path).suffix else "path"
    drop = " (or remove that condition)" if all(".conditions" in key for key in keys) else ""
    return [FixStep(None, None, f"{path} does not exist: point {' or '.join(keys)} at an existing {what}{drop}, then "
                    "check the config with `ltx-pipeline validate <config.yaml>` and launch again.")]


def _keys_holding(node: Any, path: str, key: str) -> list[str]:
    """Dotted keys (list items by index, as pydantic names them) whose string value is ``path``."""
    if isinstance(node, str):
        return [key] if key and PurePath(node) == PurePath(path) else []
    items = node.items() if isinstance(node, Mapping) else enumerate(node) if isinstance(node, list) else []
    return [found for name, value in items
            for found in _keys_holding(value, path, f"{key}.{name}" if key else str(name))]


def _keep(config: Mapping[str, Any] | None, steps: list[FixStep]) -> list[FixStep]:
    """Drop config changes the given config already satisfies."""
    if config is None:
        return steps
    missing = object()
    return [s for s in steps if s.path is None or config_value(config, s.path, missing) != s.value]
