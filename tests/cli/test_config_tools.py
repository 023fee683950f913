"""`validate CONFIG` and `command CONFIG`: the standalone tools, for any trainer config."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from ltx_pipeline.cli import main

TEMPLATE = Path(__file__).resolve().parents[2] / "ltx_pipeline" / "backends" / "reference_configs" / "t2v_lora.yaml"


@pytest.fixture
def config(tmp_path: Path) -> Path:
    data = yaml.safe_load(TEMPLATE.read_text())
    model = tmp_path / "model.safetensors"
    model.write_bytes(b"0")
    root = tmp_path / "pre"
    for sub in ("latents", "audio_latents", "conditions"):
        (root / sub).mkdir(parents=True)
    data["model"].update(model_path=str(model), text_encoder_path=str(model))
    data["data"]["preprocessed_data_root"] = str(root)
    data["output_dir"] = str(tmp_path / "out")
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def edit(path: Path, section: str, **values) -> None:
    data = yaml.safe_load(path.read_text())
    data.setdefault(section, {}).update(values)
    path.write_text(yaml.safe_dump(data))


def test_validate_accepts_a_launchable_config(config, capsys) -> None:
    assert main(["validate", str(config)]) == 0
    assert "valid" in capsys.readouterr().out


def test_validate_reports_schema_errors_with_dotted_paths(config, capsys) -> None:
    edit(config, "optimization", learnin_rate=1)
    assert main(["validate", str(config), "--json"]) == 2
    report = json.loads(capsys.readouterr().out)
    assert report["ok"] is False and any(e.startswith("optimization.learnin_rate") for e in report["errors"])


def test_validate_catches_what_the_trainer_only_meets_at_runtime(config, capsys) -> None:
    edit(config, "checkpoints", keep_last_n=1, interval=250)
    edit(config, "optimization", steps=2000)
    assert main(["validate", str(config)]) == 2
    assert "keep-last-n-deletes-final" in capsys.readouterr().out


def test_relaxed_paths_accept_placeholders_but_say_so(capsys) -> None:
    assert main(["validate", str(TEMPLATE), "--relaxed-paths"]) == 0
    assert "paths were not checked" in capsys.readouterr().out
    assert main(["validate", str(TEMPLATE)]) == 2


@pytest.mark.parametrize(("mode", "preset"),
                         [("none", None), ("ddp", "ddp.yaml"), ("fsdp-compile", "fsdp_compile.yaml")])
def test_command_prints_and_never_runs(config, tmp_path, capsys, mode, preset) -> None:
    root = tmp_path / "LTX-2"
    (root / "packages" / "ltx-trainer").mkdir(parents=True)
    assert main(["command", str(config), "--distributed", mode, "--num-processes", "2" if preset else "1",
                 "--trainer-root", str(root), "--json"]) == 0
    record = json.loads(capsys.readouterr().out)
    assert record["executes_training"] is False
    assert record["argv"][-2:] == [str(config.resolve()), "--disable-progress-bars"]
    assert (preset in " ".join(record["argv"])) if preset else "python" in record["argv"]
    assert main(["command", str(config), "--distributed", "nope", "--trainer-root", str(root)]) == 2


MIRROR = "the built-in schema mirror (ltx-trainer 1.2.0)"


def test_validate_names_the_mirror_in_text_and_json(config, capsys) -> None:
    assert main(["validate", str(config)]) == 0
    assert capsys.readouterr().out.strip() == f"{config}: valid (validated by {MIRROR})"
    edit(config, "optimization", learnin_rate=1)
    assert main(["validate", str(config)]) == 2
    assert f"validated by: {MIRROR}" in capsys.readouterr().out.splitlines()
    assert main(["validate", str(config), "--json"]) == 2
    assert json.loads(capsys.readouterr().out)["validator"] == MIRROR


def test_validate_with_a_synced_checkout_runs_the_trainers_own_validator(config, ltx_prereqs, capsys) -> None:
    root = Path(ltx_prereqs["trainer_root"]).resolve()
    assert main(["validate", str(config), "--trainer-root", str(root), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["ok"] is True
    assert report["validator"] == f"the trainer's own LtxTrainerConfig at {root} (commit unknown)"
    assert main(["validate", str(config), "--trainer-root", str(root)]) == 0
    assert "(validated by the trainer's own LtxTrainerConfig at" in capsys.readouterr().out
    # placeholders are the mirror's, and the result says so
    assert main(["validate", str(config), "--trainer-root", str(root), "--relaxed-paths"]) == 0
    assert f"(placeholders allowed; validated by {MIRROR})" in capsys.readouterr().out


def test_validate_refuses_an_unsynced_checkout_rather_than_asking_the_mirror(config, ltx_prereqs, capsys) -> None:
    root = Path(ltx_prereqs["trainer_root"])
    (root / "uv.lock").unlink()
    assert main(["validate", str(config), "--trainer-root", str(root), "--json"]) == 2
    report = json.loads(capsys.readouterr().out)
    assert report["validator"].startswith("the trainer's own LtxTrainerConfig at ")
    assert len(report["errors"]) == 1 and report["errors"][0].startswith("trainer checkout: ")
    assert "not synced (no uv.lock)" in report["errors"][0] and "uv sync" in report["errors"][0]


def test_validate_fails_when_the_checkouts_trainer_does_not_import(config, ltx_prereqs, capsys) -> None:
    root = Path(ltx_prereqs["trainer_root"])
    for name in ("__init__.py", "config.py"):
        (root / "packages/ltx-trainer/src/ltx_trainer" / name).unlink()
    (root / "packages/ltx-trainer/src/ltx_trainer").rmdir()
    assert main(["validate", str(config), "--trainer-root", str(root)]) == 2
    out = capsys.readouterr().out
    assert "error: trainer checkout: the trainer does not import" in out
    assert "ModuleNotFoundError: No module named 'ltx_trainer'" in out
    assert "validated by: the trainer's own LtxTrainerConfig at" in out


@pytest.mark.parametrize("make", [None, "empty"])
def test_command_refuses_a_checkout_that_is_not_there(config, tmp_path, capsys, make) -> None:
    root = tmp_path / "LTX-2" if make else Path("/nonexistent")
    if make:
        root.mkdir()  # a folder, but not an LTX-2 checkout
    assert main(["command", str(config), "--trainer-root", str(root)]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and f"No LTX-2 trainer checkout at {root}" in lines[0] and "Fix:" in lines[0]
