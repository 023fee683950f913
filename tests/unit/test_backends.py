"""Backends: argv/env/cwd for every launch variant, secret filtering, validation through the trainer."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

import pytest

from ltx_pipeline.backends import MIRROR_VALIDATOR, MIRRORED_TRAINER_VERSION, make_backend
from ltx_pipeline.backends.base import LaunchSpec, is_secret_name, redact_env
from ltx_pipeline.backends.ltx import LtxBackend
from ltx_pipeline.backends.reference import ReferenceBackend
from ltx_pipeline.backends.simulated import SimulatedBackend
from ltx_pipeline.errors import BadInput, BadRequest
from tests.conftest import FAKE_UV, make_tree

TRAINER = "packages/ltx-trainer"


@pytest.fixture
def checkout(tmp_path: Path) -> Path:
    root = tmp_path / "LTX-2"
    make_tree(root, {f"{TRAINER}/configs/t2v_lora.yaml": "model: {}\n",
                     **{f"{TRAINER}/configs/accelerate/{n}.yaml": "x: 1\n"
                        for n in ("ddp", "ddp_compile", "fsdp", "fsdp_compile")},
                     f"{TRAINER}/scripts/train.py": "", f"{TRAINER}/scripts/process_dataset.py": ""})
    return root


@pytest.mark.parametrize(("distributed", "processes", "preset"), [
    ("none", 1, None), ("ddp", 2, "ddp.yaml"), ("ddp-compile", 4, "ddp_compile.yaml"), ("fsdp", 8, "fsdp.yaml"),
    ("fsdp-compile", 2, "fsdp_compile.yaml"),
])
def test_ltx_train_commands(checkout: Path, tmp_path: Path, distributed, processes, preset) -> None:
    config = tmp_path / "run" / "config.yaml"
    spec = LtxBackend(checkout, uv="uv").train_command(config, num_processes=processes, distributed=distributed)
    trainer_dir = checkout.resolve() / TRAINER
    assert spec.cwd == trainer_dir
    assert spec.argv[:4] == ("uv", "run", "--directory", str(trainer_dir))
    assert spec.argv[-3:] == ("scripts/train.py", str(config.resolve()), "--disable-progress-bars")
    if preset is None:
        assert spec.argv[4:6] == ("python", "scripts/train.py")
    else:
        assert spec.argv[4:10] == ("accelerate", "launch", "--num_processes", str(processes), "--config_file",
                                   str(trainer_dir / "configs" / "accelerate" / preset))
    assert spec.env == {"PYTHONUNBUFFERED": "1", "COLUMNS": "500"}
    # `uv run --directory DIR` names its own directory: the printable command says it once, no `cd DIR &&`.
    assert " && " not in spec.printable and spec.printable.count(str(trainer_dir)) == 1 + (preset is not None)
    assert shlex.split(spec.printable)[2:] == list(spec.argv)


def test_ltx_refuses_impossible_launches(checkout: Path, tmp_path: Path) -> None:
    backend = LtxBackend(checkout)
    with pytest.raises(BadInput, match="distributed mode"):
        backend.train_command(tmp_path / "c.yaml", num_processes=2, distributed="none")
    with pytest.raises(BadInput, match="no template"):
        backend.template("nope.yaml")
    with pytest.raises(BadInput, match="--overwrite"):
        backend.preprocess_command(tmp_path / "d.json", "960x544x49", tmp_path / "out", model_path="m",
                                   text_encoder_path="t", extra_flags=["--overwrite"])
    with pytest.raises(BadInput, match="No LTX-2 trainer checkout"):
        LtxBackend(None).train_command(tmp_path / "c.yaml")
    assert backend.template("t2v_lora.yaml") == checkout.resolve() / TRAINER / "configs" / "t2v_lora.yaml"


def test_ltx_preprocess_command(checkout: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("ltx_pipeline.backends.ltx.cuda_present", lambda: True)
    spec = LtxBackend(checkout, uv="uv").preprocess_command(
        tmp_path / "data" / "dataset.json", "960x544x49;512x288x121", tmp_path / "pre", model_path="/m/x.safetensors",
        text_encoder_path="/m/gemma", trigger="fxclp", extra_flags=["--load-text-encoder-in-8bit"])
    argv = list(spec.argv)
    assert argv[4:7] == ["python", "scripts/process_dataset.py", str((tmp_path / "data" / "dataset.json").resolve())]
    assert argv[argv.index("--resolution-buckets") + 1] == "960x544x49;512x288x121"
    assert argv[argv.index("--output-dir") + 1] == str((tmp_path / "pre").resolve())
    assert argv[-3:] == ["--lora-trigger", "fxclp", "--load-text-encoder-in-8bit"]
    assert "--overwrite" not in argv


def test_ltx_preprocess_runs_on_the_cpu_where_there_is_no_gpu(checkout: Path, tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """process_dataset.py defaults to --device cuda, which fails on a machine without a GPU."""
    monkeypatch.setattr("ltx_pipeline.backends.ltx.cuda_present", lambda: False)
    spec = LtxBackend(checkout, uv="uv").preprocess_command(
        tmp_path / "dataset.json", "64x64x25", tmp_path / "pre", model_path="/m/x.safetensors",
        text_encoder_path="/m/gemma")
    assert list(spec.argv)[-2:] == ["--device", "cpu"]


def test_trainer_python_starts_every_script_without_uv(checkout: Path, tmp_path: Path) -> None:
    python = tmp_path / "env" / "bin" / "python"
    backend = LtxBackend(checkout, python=python)
    train = backend.train_command(tmp_path / "config.yaml")
    assert list(train.argv)[:2] == [str(python), "scripts/train.py"]
    assert train.cwd == checkout / "packages" / "ltx-trainer"
    ddp = backend.train_command(tmp_path / "config.yaml", num_processes=2, distributed="ddp")
    assert list(ddp.argv)[:4] == [str(python), "-m", "accelerate.commands.launch", "--num_processes"]
    assert "uv" not in backend.heavy_prerequisites and "Trainer python" in backend.heavy_prerequisites


def test_secrets_never_reach_records_or_printable_commands(tmp_path: Path) -> None:
    spec = LaunchSpec(("python", "train.py"), tmp_path, {"HF_TOKEN": "hf_abc123", "WANDB_API_KEY": "wk_999",
                                                          "COLUMNS": "500", "MY_SECRET": "s3"})
    record = repr(spec.to_record()) + spec.printable
    for secret in ("hf_abc123", "wk_999", "s3cr", "=s3"):
        assert secret not in record
    assert "COLUMNS=500" in spec.printable
    assert is_secret_name("AWS_SECRET_ACCESS_KEY") and is_secret_name("hf_token") and not is_secret_name("PATH")
    assert redact_env({"GITHUB_AUTH": "x", "HOME": "/h"}) == {"GITHUB_AUTH": "***", "HOME": "/h"}


def test_reference_commands(tmp_path: Path) -> None:
    backend = ReferenceBackend(capacity_mib=512, memory_scale=1000.0)
    config = tmp_path / "config.yaml"
    single = backend.train_command(config)
    assert single.argv == (sys.executable, "-m", "ltx_pipeline.reference_trainer", str(config.resolve()),
                           "--disable-progress-bars")
    assert single.env["LTX_REFERENCE_DEVICE_CAPACITY_MIB"] == "512"
    ddp = backend.train_command(config, num_processes=2, distributed="ddp")
    assert ddp.argv[:7] == (sys.executable, "-m", "accelerate.commands.launch", "--multi_gpu", "--num_processes", "2",
                            "-m")
    with pytest.raises(BadInput, match="single-process or DDP"):
        backend.train_command(config, num_processes=2, distributed="fsdp")
    assert backend.template("t2v_lora_low_vram.yaml").is_file()


def test_make_backend_checks_its_inputs(tmp_path: Path) -> None:
    with pytest.raises(BadRequest, match="--surface"):
        make_backend("simulated")
    with pytest.raises(BadRequest, match="Unknown backend"):
        make_backend("magic")
    surface = tmp_path / "s.yaml"
    surface.write_text("gpu: {name: X, memory_mib: 0}\npoints: []\n")
    with pytest.raises(BadInput, match="gpu.memory_mib"):
        make_backend("simulated", surface=str(surface))


SHA = "0123456789abcdef0123456789abcdef01234567"
BAD_CONFIG = "model: {{model_path: /nope.safetensors}}\noptimization: {{learnin_rate: 1}}\n" \
             "data: {{preprocessed_data_root: {root}}}\n"


def sync(checkout: Path, tmp_path: Path, *, trainer: bool = True) -> str:
    """`uv sync` as far as the backend can tell, and a fake `uv`; with ``trainer`` the mirror plays it."""
    make_tree(checkout, {"uv.lock": "", ".venv/": None})
    if trainer:
        make_tree(checkout, {f"{TRAINER}/src/ltx_trainer/__init__.py": "",
                             f"{TRAINER}/src/ltx_trainer/config.py":
                                 "from ltx_pipeline.ltx.trainer_config import LtxTrainerConfig  # noqa: F401\n"})
    uv = tmp_path / "uv"
    uv.write_text(FAKE_UV)
    uv.chmod(0o755)
    return str(uv)


def bad_config(tmp_path: Path) -> Path:
    config = tmp_path / "config.yaml"
    config.write_text(BAD_CONFIG.format(root=tmp_path))
    return config


def test_ltx_validate_runs_the_trainers_own_validator_when_synced(checkout: Path, tmp_path: Path) -> None:
    make_tree(checkout, {".git/HEAD": "ref: refs/heads/main\n", ".git/refs/heads/main": SHA + "\n"})
    backend = LtxBackend(checkout, uv=sync(checkout, tmp_path))
    config = bad_config(tmp_path)
    assert backend.synced
    findings = {(f.path, f.code) for f in backend.validate(config)}
    assert ("optimization.learnin_rate", "extra_forbidden") in findings
    assert any(code == "value_error" and path == "model.model_path" for path, code in findings)
    assert backend.validator() == f"the trainer's own LtxTrainerConfig at {checkout.resolve()} (commit {SHA[:12]})"
    # relaxed validation (placeholders) never asks the trainer, which checks that paths exist
    relaxed = {(f.path, f.code) for f in backend.validate(config, relaxed_paths=True)}
    assert ("optimization.learnin_rate", "extra_forbidden") in relaxed
    assert not any(path == "model.model_path" for path, _ in relaxed)
    assert backend.validator(relaxed_paths=True) == MIRROR_VALIDATOR


def test_the_mirror_names_the_trainer_version_it_mirrors(tmp_path: Path) -> None:
    assert MIRRORED_TRAINER_VERSION == "1.2.0"
    assert MIRROR_VALIDATOR == "the built-in schema mirror (ltx-trainer 1.2.0)"
    surface = tmp_path / "s.yaml"
    surface.write_text("gpu: {name: X, memory_mib: 1000, count: 1}\n"
                       "points: [{knobs: {quantization: null, optimizer_type: adamw, batch_size: 1, "
                       "enable_gradient_checkpointing: true}, step_time_s: 1.0, peak_vram_gb: 0.5}]\n")
    for backend in (ReferenceBackend(), SimulatedBackend(surface)):
        assert backend.validator() == backend.validator(relaxed_paths=True) == MIRROR_VALIDATOR


def test_ltx_without_a_checkout_validates_with_the_mirror_and_says_so(tmp_path: Path) -> None:
    config = tmp_path / "config.yaml"
    config.write_text("model: {model_path: /nope.safetensors}\ndata: {preprocessed_data_root: /nope}\nseed: x\n")
    backend = LtxBackend(None)
    assert {"model.model_path", "data.preprocessed_data_root", "seed"} <= {f.path for f in backend.validate(config)}
    assert backend.validator() == MIRROR_VALIDATOR


def test_ltx_strict_validation_of_an_unsynced_checkout_fails_instead_of_asking_the_mirror(checkout: Path,
                                                                                          tmp_path: Path) -> None:
    backend = LtxBackend(checkout, uv=sync(checkout, tmp_path))
    (checkout / ".venv").rmdir()
    findings = backend.validate(bad_config(tmp_path))
    assert [(f.path, f.code) for f in findings] == [("trainer checkout", "trainer_not_synced")]
    assert "no .venv" in findings[0].message and f"run `uv sync` at {checkout.resolve()}" in findings[0].message
    assert not backend.synced
    assert backend.validator().startswith(f"the trainer's own LtxTrainerConfig at {checkout.resolve()} (commit ")
    assert "unknown" in backend.validator()  # not a git checkout
    # placeholders are still the mirror's to check
    assert {f.code for f in backend.validate(bad_config(tmp_path), relaxed_paths=True)} == {"extra_forbidden"}


def test_ltx_a_synced_checkout_whose_trainer_does_not_import_fails_validation(checkout: Path,
                                                                              tmp_path: Path) -> None:
    backend = LtxBackend(checkout, uv=sync(checkout, tmp_path, trainer=False))  # no src/ltx_trainer
    findings = backend.validate(bad_config(tmp_path))
    assert [(f.path, f.code) for f in findings] == [("trainer checkout", "trainer_import_failed")]
    assert "ModuleNotFoundError: No module named 'ltx_trainer'" in findings[0].message


def test_ltx_strict_validation_needs_the_checkout_and_uv(checkout: Path, tmp_path: Path) -> None:
    config = bad_config(tmp_path)
    missing = LtxBackend(tmp_path / "nowhere").validate(config)
    assert [(f.path, f.code) for f in missing] == [("trainer checkout", "trainer_checkout_missing")]
    sync(checkout, tmp_path)
    no_uv = LtxBackend(checkout, uv="definitely-not-uv").validate(config)
    assert [(f.path, f.code) for f in no_uv] == [("trainer checkout", "uv_not_found")]


def test_ltx_commands_refuse_a_checkout_that_is_not_there(tmp_path: Path) -> None:
    with pytest.raises(BadInput, match="folder does not exist"):
        LtxBackend(tmp_path / "nowhere").train_command(tmp_path / "c.yaml")
    (tmp_path / "not-ltx").mkdir()
    with pytest.raises(BadInput, match="no packages/ltx-trainer"):
        LtxBackend(tmp_path / "not-ltx").preprocess_command(tmp_path / "d.json", "960x544x49", tmp_path / "out",
                                                            model_path="m", text_encoder_path="t")
