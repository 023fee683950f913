"""``--push-to-hub REPO`` (#45): the trainer's own hub settings in the LAST stage's config only, the repo (never the
token) in plan.md, the token read from the environment and written nowhere, and a run without one refused at the
plan with one line. The simulated backend, up to validate (config_patch is what patches); a whole reference run
with a fake token is tests/phases/test_holdout_plan_and_hub.py.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from ltx_pipeline.cli import main
from ltx_pipeline.yaml_io import load_yaml
from tests.phases.train_helpers import clips, simulated_args, store_of

TOKEN = "hf_pushTestFakeToken0123456789"  # noqa: S105 - a fake: the test greps the run for it


def _hub(config: Path) -> object:
    return (load_yaml(config.read_text()) or {}).get("hub")


@pytest.mark.usefixtures("until_validate")
def test_the_repo_is_patched_into_the_last_stage_only_and_the_token_is_written_nowhere(
        workspace: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("HF_TOKEN", TOKEN)
    args = simulated_args(workspace, clips(tmp_path / "data"), "--strategy", "chain", "--buckets",
                          "960x544x49;960x544x121", "--steps", "20", "--push-to-hub", "me/my-lora")
    assert main(args) == 0, capsys.readouterr().err
    run = workspace / "r1"
    store, row = store_of(workspace)
    [first, last] = store.latest_phase_runs(row.id)["config_patch"].outputs["configs"]
    assert _hub(run / "config.stage-1.yaml") == _hub(Path(first["template"]))  # as the template has it
    assert _hub(run / "config.stage-2.yaml") == {"push_to_hub": True, "hub_model_id": "me/my-lora"}
    assert not any(p["path"].startswith("hub.") for p in first["patches"])
    assert {p["path"]: (p["new"], p["reason"]) for p in last["patches"] if p["path"].startswith("hub.")} == {
        "hub.push_to_hub": (True, "--push-to-hub me/my-lora: the trainer uploads the final weights at the end of "
                                  "training"),
        "hub.hub_model_id": ("me/my-lora", "--push-to-hub me/my-lora: the trainer uploads the final weights at the "
                                           "end of training")}
    assert "push_to_hub: me/my-lora" in (run / "run.yaml").read_text()
    plan = (run / "plan.md").read_text()
    assert "- Hugging Face Hub: at the end of training the trainer itself uploads the final weights" in plan
    assert "`hub.hub_model_id: me/my-lora` in the last stage's config" in plan
    leaked = [str(p) for p in workspace.rglob("*") if p.is_file() and TOKEN.encode() in p.read_bytes()]
    assert leaked == []  # run.yaml, plan.md, the configs, the logs and the store's database
    assert TOKEN not in capsys.readouterr().out


def test_without_a_token_the_plan_refuses_with_one_line(workspace: Path, tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.delenv("HF_TOKEN", raising=False)
    monkeypatch.setenv("HUGGING_FACE_HUB_TOKEN", " ")  # blank is no token
    args = simulated_args(workspace, clips(tmp_path / "data", n=1), "--push-to-hub", "me/my-lora")
    assert main(args) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["error: --push-to-hub me/my-lora needs a Hugging Face token, and none is set in the environment "
                   "(HF_TOKEN or HUGGING_FACE_HUB_TOKEN). Fix: export HF_TOKEN=<a token with write access to the "
                   "repo> in this shell (it is read from the environment only, never written down), then run again; "
                   "or drop --push-to-hub (push_to_hub in run.yaml)."]
    assert not (workspace / "r1" / "plan.md").exists()


@pytest.mark.parametrize("repo", ["me", "me/my/lora", "me/-lora", "me/lo--ra", "me/lora.git", "me/lo ra", "/lora"])
def test_a_bad_repo_id_is_one_line_and_exit_2_before_anything_is_written(workspace: Path, tmp_path: Path,
                                                                        capsys: pytest.CaptureFixture[str],
                                                                        repo: str) -> None:
    (tmp_path / "data").mkdir()
    assert main(["run", "--workspace", str(workspace), "--run", "r1", "--dataset", str(tmp_path / "data"),
                 "--push-to-hub", repo]) == 2
    [line] = capsys.readouterr().err.strip().splitlines()
    assert line.startswith(f"error: {repo!r} is not a Hub repo id") and "(--push-to-hub). Fix: give the repo as " \
        "owner/name" in line
    assert not (workspace / "r1").exists()


@pytest.mark.parametrize("repo", ["me/my-lora", "Org_1/model.v2", "a/b"])
def test_a_good_repo_id_is_kept_as_given(repo: str) -> None:
    from ltx_pipeline.request import build_request

    assert build_request({"dataset": ".", "push_to_hub": f" {repo} "}).push_to_hub == repo


def test_run_help_lists_the_option(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "--help"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "--push-to-hub OWNER/NAME" in out and "HF_TOKEN" in out


def test_a_resume_without_the_token_is_refused_before_the_trainer_launches(
        workspace: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """The plan saw a token; the shell that resumes has none: the upload would fail after the whole training, so the
    launch is refused with the plan's line and no trainer starts."""
    import phases

    everything = phases.PHASES
    names = [p.name for p in everything]
    monkeypatch.setattr(phases, "PHASES", everything[: names.index("validate") + 1])
    monkeypatch.setenv("HF_TOKEN", TOKEN)
    args = simulated_args(workspace, clips(tmp_path / "data", n=2), "--steps", "4", "--push-to-hub", "me/my-lora")
    assert main(args) == 0, capsys.readouterr().err
    capsys.readouterr()
    monkeypatch.setattr(phases, "PHASES", everything)
    monkeypatch.delenv("HF_TOKEN")
    monkeypatch.delenv("HUGGING_FACE_HUB_TOKEN", raising=False)
    assert main(["resume", "--workspace", str(workspace), "--run", "r1"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith("error: --push-to-hub me/my-lora needs a Hugging Face token, and none is set in the "
                              "environment (HF_TOKEN or HUGGING_FACE_HUB_TOKEN). Fix: export HF_TOKEN="), err
    store, row = store_of(workspace)
    assert store.processes(row.id, "train") == []  # no trainer was started
