"""Check the trainer's environment the way its scripts will use it; run with the trainer's python.

Usage: ``python check_environment.py TRAINER_DIR [--quick]`` (TRAINER_DIR is ``packages/ltx-trainer``).
Prints one JSON object: the interpreter, the versions of ltx-trainer, ltx-core, torch and its
companions, whether CUDA is usable, and ``problems``: each ``{"what", "fix"}``.

Quick mode imports ``ltx_trainer`` only (seconds). The full check also executes the imports of
``scripts/train.py`` and ``scripts/process_dataset.py`` (as modules, never their ``main``), so a
module missing anywhere in what the trainer imports is found now rather than after minutes of model
loading, and loads torchcodec's FFmpeg libraries: without them the trainer's audio extraction fails
silently (``process_videos._load_audio_from_file`` swallows the error) and audio runs lose their clips.
Standalone: it imports nothing from ltx_pipeline.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import json
import runpy
import sys
import traceback
from pathlib import Path

_PACKAGES = ("ltx-trainer", "ltx-core", "torch", "torchvision", "torchaudio", "torchcodec", "transformers",
             "peft", "accelerate")
_FFMPEG_FIX = ("install FFmpeg's shared libraries (versions 4 to 7) where the trainer runs, e.g. on Debian 12: "
               "apt-get install libavcodec59 libavformat59 libavutil57 libswresample4 libswscale6 libavdevice59 "
               "libavfilter8; or train video only")


def _version(name: str) -> str | None:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None


def _import_problem(error: BaseException, what: str) -> dict[str, str]:
    """One problem for an import that failed, naming the module and where the import came from."""
    frames = [f for f in traceback.extract_tb(error.__traceback__) if "importlib" not in f.filename]
    origin = f" (imported at {frames[-1].filename}:{frames[-1].lineno})" if frames else ""
    if isinstance(error, ModuleNotFoundError) and error.name:
        module = error.name.split(".")[0]
        return {"what": f"{what}: module {error.name!r} is not installed{origin}",
                "fix": f"install it into the trainer's environment: {sys.executable} -m pip install {module} "
                       "(or re-run `uv sync` in the checkout)"}
    return {"what": f"{what}: {type(error).__name__}: {error}{origin}",
            "fix": "repair the trainer's environment (reinstall ltx-trainer and its pinned dependencies)"}


def _run_imports(script: Path) -> None:
    """Execute a script's top level (its imports and definitions) without running its main."""
    sys.path.insert(0, str(script.parent))
    try:
        runpy.run_path(str(script), run_name="ltx_pipeline_environment_check")
    finally:
        sys.path.remove(str(script.parent))


def _ffmpeg_problem() -> dict[str, str] | None:
    try:
        importlib.import_module("torchcodec.decoders")
    except ModuleNotFoundError as exc:
        return {"what": f"torchcodec is not installed ({exc}): torchaudio.load cannot read audio, so no audio "
                        "latents would be written", "fix": f"{sys.executable} -m pip install torchcodec"}
    except Exception as exc:  # torchcodec raises RuntimeError when it cannot load FFmpeg
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        return {"what": f"torchcodec cannot load FFmpeg ({first}): the trainer would drop every clip's audio "
                        "without an error", "fix": _FFMPEG_FIX}
    return None


def main() -> int:
    trainer_dir = Path(sys.argv[1])
    quick = "--quick" in sys.argv[2:]
    report: dict[str, object] = {"python": sys.executable, "versions": {n: _version(n) for n in _PACKAGES}}
    problems: list[dict[str, str]] = []
    try:
        importlib.import_module("ltx_trainer")
    except Exception as exc:
        problems.append(_import_problem(exc, "ltx_trainer does not import"))
    if not problems and not quick:
        for script in ("train.py", "process_dataset.py"):
            try:
                _run_imports(trainer_dir / "scripts" / script)
            except Exception as exc:
                problems.append(_import_problem(exc, f"scripts/{script} does not import"))
        ffmpeg = _ffmpeg_problem()
        if ffmpeg:
            problems.append(ffmpeg)
    try:
        torch = importlib.import_module("torch")
        report["cuda"] = bool(torch.cuda.is_available())
        report["devices"] = [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]
    except Exception as exc:
        problems.append(_import_problem(exc, "torch does not import"))
        report["cuda"] = False
    report["problems"] = problems
    print("LTX_PIPELINE_ENVIRONMENT " + json.dumps(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
