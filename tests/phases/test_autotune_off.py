"""``--autotune off``, and autotune on a machine that cannot measure GPU memory, through the real CLI.

Off: no trial runs, nothing is patched, the plan's baseline config trains as is, and plan.md,
autotune.md, the phase's record and run-summary.md say so. Switching the choice on an existing run
re-runs autotune with the reason the runner gives for any changed input. On the ``ltx`` backend with
GPUs only assumed (``--assume-gpu``, no nvidia-smi), the plan says autotune cannot run there and
blocks approval with ``--autotune off`` as the fix, instead of the sweep failing after approval; the
toy backends measure their own memory and keep autotune.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import yaml

import phases
from ltx_pipeline.cli import main
from ltx_pipeline.ltx.autotune import SPACE_KEYS
from ltx_pipeline.ltx.autotune.availability import OFF_REASON, autotune_plan
from ltx_pipeline.ltx.config_patch import KNOB_PATHS
from tests.conftest import H100_SMI
from tests.phases.test_autotune import GPU_32, LOW, knobs, point, with_autotune, write_surface
from tests.phases.train_helpers import mp4_clips, reference_args, store_of

ASSUMED_H100 = "NVIDIA H100 80GB HBM3,81559"


def config_knobs(config: Path) -> dict:
    """The autotune knobs as the stage config holds them (what the trainer reads)."""
    values = yaml.safe_load(config.read_text())
    out = {}
    for key in SPACE_KEYS:
        section, name = KNOB_PATHS[key].split(".")
        out[key] = values[section][name]
    return out


def latest(workspace: Path) -> dict:
    store, run = store_of(workspace)
    return store.latest_phase_runs(run.id)


# --- the decision itself -----------------------------------------------------------------------------

@pytest.mark.parametrize(("choice", "backend", "assumed", "smi", "runs", "blocked"), [
    ("on", "ltx", False, True, True, False),  # probed GPUs: the sampler measures them
    ("on", "ltx", True, False, False, True),  # a planning host / CPU test: nothing to measure
    ("on", "ltx", True, True, True, False),  # assumed, but a GPU's nvidia-smi is here to measure with
    ("off", "ltx", True, False, False, False),  # the user's choice: no blocker
    ("on", "reference", True, False, True, False),  # the toy counts its own memory on the CPU
    ("on", "simulated", True, False, True, False),  # the cost surface
])
def test_whether_autotune_can_run_is_the_choice_the_backend_and_the_probe(choice, backend, assumed, smi, runs,
                                                                          blocked) -> None:
    verdict = autotune_plan(choice, backend, gpus_assumed=assumed, nvidia_smi_found=smi)
    assert verdict.runs is runs and (verdict.blocker is not None) is blocked
    if blocked:
        assert "--autotune off" in verdict.blocker and "--assume-gpu" in verdict.blocker


# --- off, end to end on the reference backend ----------------------------------------------------------

@pytest.mark.long  # a preprocessing and a 4-step CPU training of the toy model: 20 s on a busy 2-core box (2026-12-07)
def test_autotune_off_trains_the_plans_baseline_as_is_with_no_trial(workspace, tmp_path, fake_smi, capsys) -> None:
    args = reference_args(workspace, mp4_clips(tmp_path / "data", n=2), fake_smi(H100_SMI), "--steps", "4",
                          "--rank", "4", "--autotune", "off")
    code = main(args)
    assert code == 0, capsys.readouterr().err
    run_root = workspace / "r1"
    rows = latest(workspace)
    baseline = {k: rows["plan"].outputs["recipe"]["knobs"][k] for k in SPACE_KEYS}
    out = rows["autotune"].outputs
    # One explicit field, no invented figures: no trials, no objective, no predicted peak.
    assert out["off"] == OFF_REASON and out["baseline"] == baseline
    assert out["deltas"] == {} and out["patches"] == []
    assert not {"trials", "objective", "predicted_peak_gb", "winner"} & set(out)
    assert not list((run_root / "overfit").glob("trial-*"))  # no sanity set, no trial ran
    assert rows["autotune"].summary.startswith("off by your choice: `--autotune off`")
    # The trained config is the plan's baseline, untouched by autotune.
    assert config_knobs(run_root / "config.yaml") == baseline
    plan = (run_root / "plan.md").read_text()
    assert "- Autotune: **off by your choice: `--autotune off` (or `autotune: off` in run.yaml); no sanity trial" \
           in plan
    markdown = (run_root / "autotune.md").read_text()
    assert "Autotune is **off** by your choice: `--autotune off`" in markdown
    assert "the plan's baseline config (plan.md, Training Config) is trained as is" in markdown
    assert f"| optimizer_type | {baseline['optimizer_type']} |" in markdown
    assert f"| batch_size | {baseline['batch_size']} |" in markdown
    assert not (run_root / "autotune.png").exists()
    # Monitor checks no memory model (nothing predicted) and says autotune was off.
    assert rows["monitor"].outputs["memory_model"] is None
    summary = (run_root / "outputs" / "run-summary.md").read_text()
    assert "Autotune: off by your choice" in summary and "Memory model" not in summary


# --- switching the choice on an existing run --------------------------------------------------------------

@pytest.fixture
def through_autotune(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(phases, "PHASES", with_autotune(phases.PHASES))
    monkeypatch.setenv("LTX_SIMULATED_TIME_SCALE", "0")


@pytest.mark.usefixtures("through_autotune")
def test_switching_autotune_off_says_why_it_reruns_and_restores_the_baseline(tmp_path, workspace, clips_dataset,
                                                                             capsys) -> None:
    surface = write_surface(tmp_path, GPU_32, [point(LOW, 4.0, 26.0, 27.0),
                                               point(knobs(LOW, optimizer_type="adamw"), 3.8, 27.0, 27.0)])

    def drive(*extra: str) -> tuple[int, str]:
        code = main(["run", "--workspace", str(workspace), "--run", "r1", "--dataset", str(clips_dataset),
                     "--backend", "simulated", "--surface", str(surface), "--approve", *extra])
        captured = capsys.readouterr()
        return code, captured.out + captured.err

    code, said = drive()
    assert code == 0, said
    sweep = latest(workspace)["autotune"].outputs
    assert sweep["deltas"] == {"optimizer_type": "adamw"}
    config = workspace / "r1" / "config.yaml"
    assert config_knobs(config)["optimizer_type"] == "adamw"  # the winner, patched
    trials_before = len(store_of(workspace)[0].processes(store_of(workspace)[1].id, "trial"))

    code, said = drive("--autotune", "off")
    assert code == 0, said
    rows = latest(workspace)
    assert "autotune added: off" in rows["plan"].reason
    assert "autotune added: off" in rows["autotune"].reason  # the runner's own "why it re-runs"
    assert "autotune runs: autotune added: off" in said
    assert rows["autotune"].outputs["off"] == OFF_REASON
    baseline = rows["autotune"].outputs["baseline"]
    assert baseline["optimizer_type"] == "adamw8bit"
    assert config_knobs(config) == baseline  # config_patch re-ran from the template: the winner is gone
    markdown = (workspace / "r1" / "autotune.md").read_text()
    assert "Autotune is **off**" in markdown and "`autotune.png`) was removed" in markdown
    assert not (workspace / "r1" / "autotune.png").exists()
    assert "autotune off by your choice" in (workspace / "r1" / "autotune.log").read_text()
    store, run = store_of(workspace)
    assert len(store.processes(run.id, "trial")) == trials_before  # off runs no trial

    # Back on: the same sweep inputs, so the study's finished trials are read back, none run again.
    code, said = drive("--autotune", "on")
    assert code == 0, said
    rows = latest(workspace)
    assert "autotune removed" in rows["autotune"].reason
    assert rows["autotune"].outputs["deltas"] == {"optimizer_type": "adamw"} and "off" not in rows["autotune"].outputs
    assert config_knobs(config)["optimizer_type"] == "adamw"
    assert len(store.processes(run.id, "trial")) == trials_before


# --- the ltx backend on a machine with no GPU to measure ---------------------------------------------------

def _without_nvidia_smi(monkeypatch: pytest.MonkeyPatch) -> None:
    """PATH with no nvidia-smi on it (a planning host, a CPU test), and no override of it."""
    monkeypatch.delenv("LTX_PIPELINE_NVIDIA_SMI", raising=False)
    dirs = os.environ.get("PATH", "").split(os.pathsep)
    monkeypatch.setenv("PATH", os.pathsep.join(d for d in dirs if d and not (Path(d) / "nvidia-smi").exists()))


def _ltx_plan(workspace: Path, dataset: Path, prereqs: dict[str, str], *extra: str) -> int:
    args = ["run", "--workspace", str(workspace), "--run", "r1", "--dataset", str(dataset), "--backend", "ltx",
            "--assume-gpu", ASSUMED_H100]
    for key, value in prereqs.items():
        args += ["--" + key.replace("_", "-"), value]
    return main([*args, *extra])


def test_ltx_on_assumed_gpus_blocks_approval_naming_autotune_off(workspace, clips_dataset, ltx_prereqs,
                                                                 monkeypatch, capsys) -> None:
    _without_nvidia_smi(monkeypatch)
    assert _ltx_plan(workspace, clips_dataset, ltx_prereqs) == 3  # stops at the plan gate
    out = capsys.readouterr().out
    blockers = latest(workspace)["plan"].approval_blockers
    [blocker] = [b for b in blockers if b.startswith("Autotune cannot run on this machine")]
    assert "--assume-gpu" in blocker and "`--autotune off`" in blocker
    assert "approve will refuse until these are provided" in out and "--autotune off" in out
    plan = (workspace / "r1" / "plan.md").read_text()
    assert ("- Autotune: **cannot run on this machine: the GPUs are only assumed (--assume-gpu) and this machine has "
            "no nvidia-smi") in plan
    assert f"`ltx-pipeline run --workspace {workspace.resolve()} --run r1 --autotune off`" in plan
    # `run --approve` is refused (exit 4) with the same fix, before anything heavy runs.
    assert _ltx_plan(workspace, clips_dataset, ltx_prereqs, "--approve") == 4
    assert "--autotune off" in capsys.readouterr().err
    assert "autotune" not in latest(workspace)

    # The fix: --autotune off on the same run re-plans without the blocker, and plan.md says it is off.
    assert _ltx_plan(workspace, clips_dataset, ltx_prereqs, "--autotune", "off") == 3
    plan_row = latest(workspace)["plan"]
    assert not [b for b in plan_row.approval_blockers if "utotune" in b]
    assert plan_row.outputs["autotune"] == {"runs": False, "blocker": None,
                                           "reason": plan_row.outputs["autotune"]["reason"]}
    assert "- Autotune: **off by your choice" in (workspace / "r1" / "plan.md").read_text()


def test_the_reference_backend_keeps_autotune_on_assumed_gpus(workspace, tmp_path, monkeypatch, capsys) -> None:
    _without_nvidia_smi(monkeypatch)
    code = main(["run", "--workspace", str(workspace), "--run", "r1", "--dataset",
                 str(mp4_clips(tmp_path / "data", n=2)), "--backend", "reference", "--assume-gpu", ASSUMED_H100,
                 "--buckets", "64x64x17"])
    assert code == 3, capsys.readouterr().err
    plan_row = latest(workspace)["plan"]
    assert plan_row.approval_blockers == [] and plan_row.outputs["autotune"]["runs"] is True
    plan = (workspace / "r1" / "plan.md").read_text()
    assert "- Autotune: on: the reference trainer counts its own (toy) memory" in plan


def test_ltx_on_assumed_gpus_replans_without_the_blocker_where_nvidia_smi_is(workspace, clips_dataset, ltx_prereqs,
                                                                            fake_smi, monkeypatch, capsys) -> None:
    _without_nvidia_smi(monkeypatch)
    assert _ltx_plan(workspace, clips_dataset, ltx_prereqs) == 3
    assert any(b.startswith("Autotune cannot run") for b in latest(workspace)["plan"].approval_blockers)
    # The same run resumed where a GPU's nvidia-smi is on PATH (the training machine): the plan is
    # written again, saying why, and autotune no longer blocks it.
    smi = Path(fake_smi(H100_SMI))
    monkeypatch.setenv("PATH", f"{smi.parent}{os.pathsep}{os.environ['PATH']}")
    assert main(["resume", "--workspace", str(workspace), "--run", "r1"]) == 3
    plan_row = latest(workspace)["plan"]
    assert plan_row.reason == "autotune removed"
    assert plan_row.approval_blockers == [] and plan_row.outputs["autotune"]["runs"] is True
    assert "measured on this machine's GPU, which nvidia-smi finds" in (workspace / "r1" / "plan.md").read_text()
