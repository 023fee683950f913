"""Data check, config patch and validate through the real CLI, on the ltx backend with a fake checkout."""

from __future__ import annotations

import difflib
import json
from pathlib import Path

import pytest
import yaml

from ltx_pipeline.cli import main
from tests.conftest import H100_SMI, H100_X4_SMI, make_tree


@pytest.fixture
def run_cli(capsys, workspace, fake_smi, ltx_prereqs, until_validate):
    def invoke(dataset: Path, *extra: str, smi: str = H100_SMI) -> tuple[int, str, str]:
        args = ["run", "--workspace", str(workspace), "--run", "r1", "--dataset", str(dataset), "--nvidia-smi",
                fake_smi(smi), "--approve", *extra]
        for key, value in ltx_prereqs.items():
            args += ["--" + key.replace("_", "-"), value]
        code = main(args)
        captured = capsys.readouterr()
        return code, captured.out, captured.err

    return invoke


def phase_outputs(workspace: Path, phase: str) -> dict:
    from ltx_pipeline.store import Store

    store = Store.open(workspace / "ltx-pipeline.db")
    run = store.get_run("r1")
    return store.latest_phase_runs(run.id)[phase]


def test_config_is_the_template_plus_recorded_patches_only(run_cli, workspace, clips_dataset, ltx_prereqs) -> None:
    code, out, err = run_cli(clips_dataset, "--trigger", "fxclp", "--steps", "1500", "--rank", "64")
    assert code == 0, err
    template = Path(ltx_prereqs["trainer_root"]) / "packages/ltx-trainer/configs/t2v_lora.yaml"
    config = workspace / "r1" / "config.yaml"
    before = template.read_text().splitlines()
    # One key the templates lack is inserted (#43: a LoRA keeps the trainer's full resume state); the rest are edits.
    after = [line for line in config.read_text().splitlines() if line.strip() != "save_training_state: full"]
    changed = [line for line in difflib.unified_diff(before, after, lineterm="", n=0)
               if line[:1] in "+-" and not line.startswith(("+++", "---"))]
    assert len(changed) == 2 * len([b for b, a in zip(before, after, strict=True) if b != a])  # line-for-line edits
    assert "# ltx-pipeline copies this file into a run" in config.read_text()  # comments survive
    data = yaml.safe_load(config.read_text())
    assert data["optimization"]["steps"] == 1500 and data["lora"] == {**data["lora"], "rank": 64, "alpha": 64}
    assert data["checkpoints"]["save_training_state"] == "full"
    assert data["model"]["model_path"] == ltx_prereqs["model_path"]
    assert data["data"]["preprocessed_data_root"] == str(workspace.resolve() / "r1" / "dataset" / ".precomputed")
    assert all(s["prompt"].startswith("fxclp ") for s in data["validation"]["samples"])
    records = phase_outputs(workspace, "config_patch").outputs["configs"][0]["patches"]
    steps = next(r for r in records if r["path"] == "optimization.steps")
    assert (steps["old"], steps["new"]) == (2000, 1500)
    assert all(r["reason"] for r in records)
    assert template.read_text() == (Path(__file__).resolve().parents[2] / "ltx_pipeline/backends/reference_configs"
                                    / "t2v_lora.yaml").read_text()  # the template was not edited
    launch = phase_outputs(workspace, "validate").outputs["stages"][0]["launch"]
    assert launch["argv"][-3:] == ["scripts/train.py", str(config.resolve()), "--disable-progress-bars"]
    assert "scripts/train.py" in launch["printable"]


def test_chained_stages_warm_start_from_the_previous_final_weights(run_cli, workspace, clips_dataset) -> None:
    code, _, err = run_cli(clips_dataset, "--strategy", "chain", "--steps", "300",
                           "--buckets", "512x288x97;960x544x49;1920x1088x33")  # the clips have 121 frames
    assert code == 0, err
    configs = [yaml.safe_load((workspace / "r1" / f"config.stage-{k}.yaml").read_text()) for k in (1, 2, 3)]
    assert [c["optimization"]["learning_rate"] for c in configs] == [1e-4, 5e-5, 2e-5]
    assert {c["lora"]["rank"] for c in configs} == {32} and {c["lora"]["alpha"] for c in configs} == {32}
    assert configs[0]["model"]["load_checkpoint"] is None
    stage1_final = workspace.resolve() / "r1/outputs/stage-1/checkpoints/lora_weights_step_00300.safetensors"
    assert configs[1]["model"]["load_checkpoint"] == str(stage1_final)
    assert configs[1]["checkpoints"]["no_resume"] is True and configs[2]["checkpoints"]["no_resume"] is True
    assert configs[2]["data"]["preprocessed_data_root"].endswith("dataset/.precomputed-stage-3")
    assert [c["output_dir"] for c in configs] == [str(workspace.resolve() / f"r1/outputs/stage-{k}") for k in (1, 2, 3)]


def test_missing_required_column_for_the_mode_is_refused_before_the_run_exists(run_cli, workspace, clips_dataset,
                                                                             ltx_prereqs) -> None:
    configs = Path(ltx_prereqs["trainer_root"]) / "packages/ltx-trainer/configs"
    (configs / "v2v_ic_lora.yaml").write_text((configs / "t2v_lora.yaml").read_text())
    code, _, err = run_cli(clips_dataset, "--mode", "v2v")
    assert code == 2 and "reference_video" in err and err.count("\n") == 1
    assert not (workspace / "r1").exists(), "bad input writes nothing of the run (no plan to approve)"


def test_zero_batches_across_gpus_is_refused_by_validate(run_cli, workspace, clips_dataset) -> None:
    # 3 clips, 4 GPUs, 4 processes asked for (left to itself, the plan launches 3: tests/phases/test_few_samples_*)
    code, _, err = run_cli(clips_dataset, "--effective-batch", "4", "--processes", "4", smi=H100_X4_SMI)
    assert code == 2 and "validate.md" in err
    assert "zero" in (workspace / "r1" / "validate.md").read_text().lower()


def write_latents(root: Path, names: list[str], shape: tuple[int, ...]) -> None:
    import torch

    for source, key, tensor_shape in (("latents", "latents", shape), ("audio_latents", "latents", (8, 10, 16))):
        for name in names:
            path = root / source / name
            path.parent.mkdir(parents=True, exist_ok=True)
            data = {key: torch.zeros(tensor_shape)}
            if source == "latents":
                data.update(num_frames=shape[1], height=shape[2], width=shape[3], fps=24.0)
            torch.save(data, path)
    for name in names:
        path = root / "conditions" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        torch.save({"video_prompt_embeds": torch.zeros(4, 8), "prompt_attention_mask": torch.ones(4)}, path)


def snapshot(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def test_existing_precomputed_is_verified_reused_or_refused_never_touched(run_cli, workspace, clips_dataset) -> None:
    pre = clips_dataset.parent / ".precomputed"
    names = [f"videos/clip{i}.pt" for i in range(3)]
    write_latents(pre, names, (128, 2, 17, 30))  # 960x544x9 latents: not the planned 960x544x49
    before = snapshot(pre)
    code, _, err = run_cli(clips_dataset)
    assert code == 2 and "was preprocessed at 960x544x9" in err
    assert "reuse" in (workspace / "r1" / "data-check.md").read_text()
    assert snapshot(pre) == before

    code, _, err = run_cli(clips_dataset, "--buckets", "960x544x9")  # option (a): reuse at its resolution
    assert code == 0, err
    stage = phase_outputs(workspace, "data_check").outputs["stages"][0]
    assert stage["source"] == "reuse" and stage["preprocessed_root"] == str(pre)
    config = yaml.safe_load((workspace / "r1" / "config.yaml").read_text())
    assert config["data"]["preprocessed_data_root"] == str(pre)

    code, _, err = run_cli(clips_dataset, "--buckets", "960x544x49", "--fresh-preprocess")  # option (b)
    assert code == 0, err
    assert phase_outputs(workspace, "data_check").outputs["stages"][0]["source"] == "preprocess"
    assert snapshot(pre) == before


def test_status_json_shows_every_phase_and_the_patches(run_cli, workspace, clips_dataset, capsys) -> None:
    assert run_cli(clips_dataset)[0] == 0
    main(["status", "--workspace", str(workspace), "--json"])
    run = json.loads(capsys.readouterr().out)["runs"][0]
    assert [p["phase"] for p in run["phases"]] == ["probe", "plan", "prepare", "data_check", "config_patch", "validate"]
    assert all(p["status"] == "succeeded" for p in run["phases"]) and run["state"] == "finished"


def test_dropped_clips_are_named(run_cli, workspace, clips_dataset) -> None:
    pre = clips_dataset.parent / ".precomputed"
    write_latents(pre, ["videos/clip0.pt", "videos/clip1.pt"], (128, 7, 17, 30))  # clip2 was skipped
    make_tree(clips_dataset.parent, {})
    code, out, err = run_cli(clips_dataset)
    assert code == 0, err
    assert "videos/clip2" in err  # the dropped clip is named as a warning


def test_plan_names_the_model_files_and_the_validator(run_cli, workspace, clips_dataset, ltx_prereqs) -> None:
    """Issue 19, cases 3 and 6: plan.md names the files it will use; validate says who validated."""
    code, out, err = run_cli(clips_dataset)
    assert code == 0, err
    plan = (workspace / "r1" / "plan.md").read_text()
    assert f"- LTX checkpoint: `{ltx_prereqs['model_path']}`" in plan
    assert f"- Gemma text encoder: `{ltx_prereqs['text_encoder_path']}`" in plan
    validate = phase_outputs(workspace, "validate")
    root = Path(ltx_prereqs["trainer_root"]).resolve()
    assert validate.outputs["stages"][0]["validator"].startswith(f"the trainer's own LtxTrainerConfig at {root}")
    assert "validated by the trainer's own LtxTrainerConfig" in validate.summary
