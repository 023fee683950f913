"""Issue 20, cases 4 and 5: the model and the buckets are part of the preprocessed data's identity.

Latents and text conditions made with another model are never reused: a change of ``--model-path``
re-runs data_check (and everything after it) with the reason, the run's own ``.precomputed`` is
moved aside and preprocessed again, and a user's own folder is refused, untouched, with the fix
``--fresh-preprocess``. A bucket change replaces the run's own autotune scratch set instead of
failing. Reference runs are a few steps on two tiny synthetic clips.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

import ltx_pipeline.autotune.trial_runner as trial_runner
import phases
from ltx_pipeline.autotune._trial import TrialSettings
from ltx_pipeline.cli import main
from ltx_pipeline.ltx.data_identity import data_identity, model_identity
from ltx_pipeline.preprocessing.run import IDENTITY_FILE
from tests.conftest import H100_SMI, LTX_METADATA, write_safetensors
from tests.phases.test_autotune import with_autotune
from tests.phases.test_data_config_validate import snapshot, write_latents
from tests.phases.train_helpers import (
    clips,
    mp4_clips,
    simulated_args,
    store_of,
    training_registered,  # noqa: F401 - fixture
)


def make_base(path: Path, seed: int) -> Path:
    from ltx_pipeline.reference_trainer import make_base as toy

    assert toy.main([str(path), "--seed", str(seed)]) == 0
    return path


def reasons(workspace: Path) -> dict[str, str]:
    store, run = store_of(workspace)
    return {name: row.reason for name, row in store.latest_phase_runs(run.id).items()}


def outputs(workspace: Path, phase: str) -> dict:
    store, run = store_of(workspace)
    return store.latest_phase_runs(run.id)[phase].outputs


def events(workspace: Path) -> list[str]:
    store, run = store_of(workspace)
    return [event.message for event in store.events(run.id)]


def reference_run(workspace: Path, dataset: Path, smi: str, *extra: str) -> list[str]:
    return ["run", "--workspace", str(workspace), "--run", "r1", "--dataset", str(dataset), "--backend", "reference",
            "--nvidia-smi", smi, "--approve", "--skip-eval", *extra]  # the renders are test_evaluate's


@pytest.mark.long  # 24 s on 2 cores (2026-12-06): in the opt-in long suite, `-m long`
@pytest.mark.slow  # two preprocessings and two 2-3 step CPU trainings of the toy model
@pytest.mark.usefixtures("training_registered")
def test_another_base_on_the_reference_backend_is_trained_on_freshly_preprocessed_data(
        workspace, tmp_path, fake_smi, capsys) -> None:
    dataset = mp4_clips(tmp_path / "data", n=2)
    args = reference_run(workspace, dataset, fake_smi(H100_SMI), "--buckets", "64x64x17")
    assert main([*args, "--steps", "2"]) == 0, capsys.readouterr().err
    run = workspace / "r1"
    precomputed = run / "dataset" / ".precomputed"
    first = json.loads((precomputed / IDENTITY_FILE).read_text())
    assert first["model"]["path"] == str((run / "models" / "reference-base.safetensors").resolve())
    assert outputs(workspace, "data_check")["stages"][0]["data_identity"] == first["digest"]
    old = snapshot(precomputed)

    other = make_base(tmp_path / "other-base.safetensors", seed=1)
    # NOTE: a new step count makes the train phase launch the stage again; whether a stage trained
    # with another model counts as finished is the train phase's rule (data_identity per stage).
    assert main([*args, "--steps", "3", "--model-path", str(other)]) == 0, capsys.readouterr().err
    why = reasons(workspace)["data_check"]
    assert "model files.checkpoint: reference-base.safetensors (" in why and "-> other-base.safetensors (" in why
    assert "data_check changed" in reasons(workspace)["config_patch"]
    config = yaml.safe_load((run / "config.yaml").read_text())
    assert config["model"]["model_path"] == config["model"]["text_encoder_path"] == str(other)
    assert outputs(workspace, "config_patch")["model_path"] == str(other)
    second = json.loads((precomputed / IDENTITY_FILE).read_text())
    assert second["model"]["path"] == str(other) and second["digest"] != first["digest"]
    assert outputs(workspace, "data_check")["stages"][0]["data_identity"] == second["digest"]
    stale = run / "dataset" / f".precomputed.stale-{first['digest'][7:15]}"
    assert snapshot(stale) == old  # the old latents are kept aside, never reused or overwritten
    told = [m for m in events(workspace) if "made with another model" in m]
    assert told and f"preprocessing again into {precomputed}" in told[0] and str(stale) in told[0]
    capsys.readouterr()
    main(["status", "--workspace", str(workspace), "--run", "r1", "--json"])
    status = json.loads(capsys.readouterr().out)["runs"][0]
    assert next(p for p in status["phases"] if p["phase"] == "data_check")["reason"] == why


@pytest.mark.long  # 31 s on 2 cores (2026-12-06): in the opt-in long suite, `-m long`
@pytest.mark.slow  # two preprocessings of the sanity set and four 4-step trials of the toy model
def test_a_bucket_change_replaces_the_runs_own_scratch_set_instead_of_failing(
        workspace, tmp_path, fake_smi, monkeypatch, capsys) -> None:
    """Where case 5 failed: autotune's scratch set, made at the first run's bucket (train is not needed)."""
    monkeypatch.setattr(phases, "PHASES", with_autotune(phases.PHASES))
    monkeypatch.setattr(trial_runner, "trial_settings",
                        lambda backend: TrialSettings(steps=4, env={"LTX_REFERENCE_LOG_EVERY": "1"}))
    dataset = mp4_clips(tmp_path / "data", n=2)
    args = reference_run(workspace, dataset, fake_smi(H100_SMI), "--steps", "2")
    assert main([*args, "--buckets", "64x64x17"]) == 0, capsys.readouterr().err
    scratch = workspace / "r1" / "overfit" / ".precomputed"
    assert json.loads((scratch / IDENTITY_FILE).read_text())["buckets"] == "64x64x17"
    code = main([*args, "--buckets", "96x64x17"])
    assert code == 0, capsys.readouterr().err
    assert json.loads((scratch / IDENTITY_FILE).read_text())["buckets"] == "96x64x17"
    told = [m for m in events(workspace) if m.startswith(f"Sanity set: {scratch} was made with other buckets")]
    assert told and "64x64x17 -> 96x64x17" in told[0] and "scratch copy was deleted" in told[0]
    assert not list(scratch.parent.glob(".precomputed.stale-*"))  # scratch is deleted, not kept


@pytest.mark.usefixtures("training_registered")
def test_the_simulated_backend_honours_model_path_and_reruns_from_data_check(
        workspace, tmp_path, monkeypatch, capsys) -> None:
    monkeypatch.setenv("LTX_SIMULATED_TIME_SCALE", "0")
    dataset = clips(tmp_path / "data")
    assert main(simulated_args(workspace, dataset, "--steps", "20")) == 0, capsys.readouterr().err
    before = outputs(workspace, "data_check")["stages"][0]["data_identity"]
    model = write_safetensors(tmp_path / "models" / "my-ltx.safetensors")
    assert main(simulated_args(workspace, dataset, "--steps", "20", "--model-path", str(model))) == 0, \
        capsys.readouterr().err
    why = reasons(workspace)
    assert why["data_check"].startswith("model files.checkpoint: simulated-base.safetensors (missing) -> "
                                        "my-ltx.safetensors (")
    assert "data_check changed" in why["config_patch"] and "data_check changed" in why["validate"]
    assert outputs(workspace, "data_check")["stages"][0]["data_identity"] != before
    assert yaml.safe_load((workspace / "r1" / "config.yaml").read_text())["model"]["model_path"] == str(model)
    capsys.readouterr()

    plain = tmp_path / "models" / "weights.bin"
    plain.write_bytes(b"\0" * 64)
    # The probe refuses a checkpoint that is not a .safetensors file before anything else runs.
    assert main(simulated_args(workspace, dataset, "--steps", "20", "--model-path", str(plain))) == 2
    assert "safetensors" in capsys.readouterr().err


@pytest.fixture
def ltx_cli(capsys, workspace, fake_smi, ltx_prereqs, until_validate):
    def invoke(dataset: Path, *extra: str, model: str | None = None) -> tuple[int, str]:
        args = ["run", "--workspace", str(workspace), "--run", "r1", "--dataset", str(dataset), "--nvidia-smi",
                fake_smi(H100_SMI), "--approve", "--trainer-root", ltx_prereqs["trainer_root"],
                "--model-path", model or ltx_prereqs["model_path"],
                "--text-encoder-path", ltx_prereqs["text_encoder_path"], *extra]
        code = main(args)
        return code, capsys.readouterr().err

    return invoke


def other_checkpoint(tmp_path: Path) -> Path:
    """Another LTX checkpoint: same layout, other metadata, so another header."""
    return write_safetensors(tmp_path / "models" / "ltx-2.5-dev.safetensors", {**LTX_METADATA, "version": "2.5"})


def test_on_the_ltx_backend_a_model_change_is_the_data_checks_reason(ltx_cli, workspace, clips_dataset,
                                                                      tmp_path) -> None:
    code, err = ltx_cli(clips_dataset)
    assert code == 0, err
    first = outputs(workspace, "data_check")
    assert first["model_files"]["model"]["kind"] == "safetensors"
    assert first["model_files"]["text_encoder"]["kind"] == "folder"
    code, err = ltx_cli(clips_dataset)
    assert code == 0, err  # nothing changed: skipped
    assert any(m.startswith("data_check unchanged, skipping") for m in events(workspace))
    code, err = ltx_cli(clips_dataset, model=str(other_checkpoint(tmp_path)))
    assert code == 0, err
    why = reasons(workspace)["data_check"]
    assert "model files.checkpoint: ltx-2.3-22b-dev.safetensors (" in why and "-> ltx-2.5-dev.safetensors (" in why
    assert "text encoder" not in why  # the same Gemma folder
    assert outputs(workspace, "data_check")["stages"][0]["data_identity"] != first["stages"][0]["data_identity"]


def test_a_users_own_precomputed_made_with_another_model_is_refused_and_left_as_it_is(
        ltx_cli, workspace, clips_dataset, ltx_prereqs, tmp_path) -> None:
    pre = clips_dataset.parent / ".precomputed"
    write_latents(pre, [f"videos/clip{i}.pt" for i in range(3)], (128, 7, 17, 30))  # 960x544x49, as planned
    gemma = model_identity(ltx_prereqs["text_encoder_path"])
    made_with = data_identity(model_identity(str(other_checkpoint(tmp_path))), gemma, "960x544x49", trigger=None)
    (pre / IDENTITY_FILE).write_text(json.dumps(made_with))
    before = snapshot(pre)
    code, err = ltx_cli(clips_dataset)
    assert code == 2 and err.count("\n") == 1, err
    assert "made with another model (ltx-2.5-dev.safetensors (" in err
    assert "this run uses ltx-2.3-22b-dev.safetensors (" in err and "--fresh-preprocess" in err
    assert "--fresh-preprocess" in (workspace / "r1" / "data-check.md").read_text()
    assert snapshot(pre) == before

    code, err = ltx_cli(clips_dataset, model=str(other_checkpoint(tmp_path)))  # the model it was made with
    assert code == 0, err
    assert outputs(workspace, "data_check")["stages"][0]["source"] == "reuse"
    assert snapshot(pre) == before

    code, err = ltx_cli(clips_dataset, "--fresh-preprocess")  # the fix: the run's own folder instead
    assert code == 0, err
    stage = outputs(workspace, "data_check")["stages"][0]
    assert stage["source"] == "preprocess" and stage["preprocessed_root"].startswith(str(workspace.resolve()))
    assert snapshot(pre) == before


def test_every_refusal_of_a_users_own_precomputed_names_fresh_preprocess(ltx_cli, workspace, clips_dataset) -> None:
    pre = clips_dataset.parent / ".precomputed"
    write_latents(pre, [f"videos/clip{i}.pt" for i in range(3)], (128, 2, 17, 30))  # 960x544x9: not planned
    code, err = ltx_cli(clips_dataset)
    assert code == 2 and "was preprocessed at 960x544x9" in err and "--fresh-preprocess" in err
    sample = pre / "latents" / "videos" / "clip0.pt"
    assert f"(sample {sample}:" in err  # the sample file by its whole path
