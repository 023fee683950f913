"""The commands of the trainer's split preprocessing scripts on each backend (#44).

Every option a command passes must be one the script really has: the trainer's typer options are read from
its source when ../shared/ltx2-src is present, and the toy's from its argparse parser.
"""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest

from ltx_pipeline.backends.ltx import LtxBackend
from ltx_pipeline.backends.reference import ReferenceBackend
from ltx_pipeline.backends.simulated import SimulatedBackend
from ltx_pipeline.errors import BadInput
from tests.conftest import make_tree

ROOT = Path(__file__).resolve().parents[2]
SCRIPTS = ROOT.parent / "shared" / "ltx2-src" / "packages" / "ltx-trainer" / "scripts"
TRAINER = "packages/ltx-trainer"
FILES = {"dataset": "process_dataset.py", "videos": "process_videos.py", "captions": "process_captions.py"}


def _typer_options(script: Path) -> set[str]:
    """The options of the script's typer command: each ``name: T = typer.Option(...)`` parameter of ``main``."""
    tree = ast.parse(script.read_text(encoding="utf-8"))
    main = next(n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == "main")
    options = set()
    for arg, default in zip(main.args.args[-len(main.args.defaults):], main.args.defaults, strict=True):
        if isinstance(default, ast.Call) and ast.unparse(default.func) == "typer.Option":
            options.add("--" + arg.arg.replace("_", "-"))
    return options


def _options(argv: list[str]) -> list[str]:
    return [token for token in argv if token.startswith("--")]


@pytest.fixture
def dataset(tmp_path: Path) -> Path:
    path = tmp_path / "data" / "dataset.jsonl"
    path.parent.mkdir()
    path.write_text(json.dumps({"caption": "a cat", "media_path": "videos/a.mp4"}) + "\n")
    return path


@pytest.fixture
def ltx(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> LtxBackend:
    root = tmp_path / "LTX-2"
    make_tree(root, {f"{TRAINER}/scripts/{name}": "" for name in FILES.values()})
    monkeypatch.setattr("ltx_pipeline.backends.ltx.cuda_present", lambda: False)
    return LtxBackend(root, uv="uv")


def _command(backend, dataset: Path, script: str, flags: tuple[str, ...] = ()) -> list[str]:  # noqa: ANN001
    spec = backend.preprocess_command(dataset, "960x544x49", dataset.parent / ".precomputed", model_path="/m/x.sft",
                                      text_encoder_path="/m/gemma", trigger="TOK", extra_flags=list(flags),
                                      script=script)
    return list(spec.argv)


def test_the_video_half_writes_latents_and_their_sound_under_the_precomputed_root(ltx, dataset) -> None:  # noqa: ANN001
    argv = _command(ltx, dataset, "videos", ("--vae-tiling", "--load-text-encoder-in-8bit", "--batch-size=2"))
    out = (dataset.parent / ".precomputed").resolve()
    assert argv[4:7] == ["python", "scripts/process_videos.py", str(dataset.resolve())]
    assert argv[7:] == ["--resolution-buckets", "960x544x49", "--output-dir", str(out / "latents"),
                        "--model-path", "/m/x.sft", "--video-column", "media_path", "--with-audio",
                        "--audio-output-dir", str(out / "audio_latents"), "--vae-tiling", "--batch-size", "2",
                        "--device", "cpu"]  # no text-encoder flag, no trigger: the video half encodes no text
    skipped = _command(ltx, dataset, "videos", ("--skip-audio",))
    assert "--with-audio" not in skipped and "--audio-output-dir" not in skipped


def test_the_caption_half_writes_conditions_named_after_the_media(ltx, dataset) -> None:  # noqa: ANN001
    argv = _command(ltx, dataset, "captions", ("--vae-tiling", "--load-text-encoder-in-8bit", "--skip-audio"))
    out = (dataset.parent / ".precomputed").resolve()
    assert argv[4:6] == ["python", "scripts/process_captions.py"]
    assert argv[6:] == [str(dataset.resolve()), "--output-dir", str(out / "conditions"), "--model-path", "/m/x.sft",
                        "--text-encoder-path", "/m/gemma", "--caption-column", "caption", "--media-column",
                        "media_path", "--lora-trigger", "TOK", "--load-text-encoder-in-8bit", "--device", "cpu"]
    renamed = _command(ltx, dataset, "captions", ("--video-column", "clip", "--caption-column", "caption"))
    assert renamed[renamed.index("--media-column") + 1] == "media_path"  # an override names only present columns


@pytest.mark.parametrize("flag", ["--decode", "--reference-downscale-factor", "--audio-durations", "--frobnicate"])
def test_a_flag_no_split_script_has_is_refused_never_dropped(ltx, dataset, flag) -> None:  # noqa: ANN001
    for script in ("videos", "captions"):
        with pytest.raises(BadInput, match=f"{flag}' has no counterpart in the trainer's {FILES[script]}"):
            _command(ltx, dataset, script, (flag, "2"))
    with pytest.raises(BadInput, match="never passes --overwrite"):
        _command(ltx, dataset, "captions", ("--overwrite",))


def test_audio_only_data_has_no_video_half(ltx, tmp_path) -> None:  # noqa: ANN001
    audio = tmp_path / "audio.json"
    audio.write_text(json.dumps([{"caption": "rain", "audio": "r.wav"}]))
    with pytest.raises(BadInput, match="no video column, so process_videos.py has nothing to encode"):
        _command(ltx, audio, "videos")
    argv = _command(ltx, audio, "captions")
    assert argv[argv.index("--media-column") + 1] == "audio"


def test_the_default_is_still_process_dataset(ltx, dataset) -> None:  # noqa: ANN001
    assert _command(ltx, dataset, "dataset")[4:6] == ["python", "scripts/process_dataset.py"]


@pytest.mark.skipif(not SCRIPTS.is_dir(), reason="../shared/ltx2-src is absent: the trainer scripts' options "
                                                  "cannot be read")
@pytest.mark.parametrize("script", ["dataset", "videos", "captions"])
def test_every_option_passed_is_one_the_trainers_script_has(ltx, dataset, script) -> None:  # noqa: ANN001
    accepted = _typer_options(SCRIPTS / FILES[script])
    assert {"--model-path", "--output-dir"} <= accepted  # the reader sees the real options
    flags = ("--vae-tiling", "--load-text-encoder-in-8bit", "--remove-llm-prefixes", "--batch-size", "1",
             "--video-vae-path", "/v", "--audio-vae-path", "/a")
    used = set(_options(_command(ltx, dataset, script, flags)[6:]))  # after `uv run --directory D python S`
    assert used <= accepted, used - accepted


@pytest.mark.parametrize("script", ["dataset", "videos", "captions"])
def test_the_toy_runs_the_same_arguments_as_the_trainer(dataset, script) -> None:  # noqa: ANN001
    from ltx_pipeline.reference_trainer import preprocess, process_captions, process_videos

    argv = _command(ReferenceBackend(), dataset, script)
    module = {"dataset": preprocess, "videos": process_videos, "captions": process_captions}[script]
    assert argv[1:3] == ["-m", module.__name__]
    args = module._parser().parse_args(argv[3:])
    assert Path(args.output_dir) == (dataset.parent / ".precomputed" / {"dataset": "", "videos": "latents",
                                                                           "captions": "conditions"}[script])


def test_the_simulated_backend_preprocesses_nothing(tmp_path) -> None:  # noqa: ANN001
    surface = tmp_path / "s.yaml"
    surface.write_text("gpu: {name: X, memory_mib: 1000, count: 1}\n"
                       "points: [{knobs: {quantization: null, optimizer_type: adamw, batch_size: 1, "
                       "enable_gradient_checkpointing: true}, step_time_s: 1.0, peak_vram_gb: 0.5}]\n")
    for script in ("dataset", "videos", "captions"):
        with pytest.raises(BadInput, match="no preprocessing"):
            _command(SimulatedBackend(surface), tmp_path / "d.json", script)
