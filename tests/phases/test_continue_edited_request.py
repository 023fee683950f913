"""Issue 33, case 3, the other way in: steps raised in run.yaml, then ``resume``, on the simulated backend.

``run-summary.md`` used to advise editing config.yaml, after which ``resume`` trained nothing; run.yaml
is the run's request, and raising its steps continues a finished run exactly as ``run --steps`` does
(tests/system/test_continue_training.py drives that with the reference trainer). Lowering it under
what has trained is refused in one line naming run.yaml.
"""

from __future__ import annotations

from ltx_pipeline.cli import main
from tests.phases.train_helpers import clips, simulated_args, store_of


def test_steps_raised_in_run_yaml_continue_a_finished_run_on_resume(workspace, tmp_path, capsys,
                                                                    monkeypatch) -> None:
    monkeypatch.setenv("LTX_SIMULATED_TIME_SCALE", "0")
    assert main(simulated_args(workspace, clips(tmp_path / "data"), "--steps", "40")) == 0
    store, run = store_of(workspace)
    trials = len(store.processes(run.id, "trial"))
    run_yaml = workspace / "r1" / "run.yaml"
    run_yaml.write_text(run_yaml.read_text().replace("steps: 40\n", "steps: 100\n"))
    capsys.readouterr()
    resume = ["resume", "--workspace", str(workspace), "--run", "r1"]
    assert main([*resume, "--approve"]) == 0, capsys.readouterr().err
    out = capsys.readouterr().out
    assert "Stage 2/2: continuing from step 40 to 100" in out and "No trial ran" in out
    assert "continued_from:\n- 40\n" in run_yaml.read_text()
    assert len(store.processes(run.id, "trial")) == trials
    stages = store.latest_phase_runs(run.id)["train"].outputs["stages"]
    assert [(s["stage"], s["start_step"], s["final_step"]) for s in stages] == [(1, 0, 40), (2, 40, 60)]
    assert [p.stage for p in store.processes(run.id, "train")] == [1, 2]
    summary = (workspace / "r1" / "outputs" / "run-summary.md").read_text()
    assert "| 2 | 60 (run step 100) |" in summary and "--run r1 --steps 200`" in summary

    run_yaml.write_text(run_yaml.read_text().replace("steps: 100\n", "steps: 70\n"))
    assert main(resume) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"error: Run r1 has trained 100 steps; steps 70 would be fewer ({run_yaml}). Fix: pass --steps "
                   "above 100 to continue it from its final weights, or a new --run to train 70 steps from the start."]
