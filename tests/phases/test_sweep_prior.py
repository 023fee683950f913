"""Autotune learns from earlier runs: a second run's sweep takes an earlier finished study as a prior.

The prior is keyed on what the memory surface depends on (GPU model, bucket, mode, training mode, model
file, rank, fixed knobs, the search space; on the simulated backend the surface itself). The baseline is
always measured; the prior's results settle the rest only when its own baseline agrees, and a prior
the baseline contradicts is ignored, saying why, and the sweep runs in full.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from ltx_pipeline.cli import main
from ltx_pipeline.store import Store
from tests.phases.test_autotune import GPU_32, LOW, knobs, point, write_surface

SURFACE = [point(LOW, 4.0, 26.0, 27.0), point(knobs(LOW, optimizer_type="adamw"), 3.8, 27.0, 27.0)]


def run(workspace: Path, name: str, dataset: Path, surface: Path) -> dict:
    assert main(["run", "--workspace", str(workspace), "--run", name, "--dataset", str(dataset), "--backend",
                 "simulated", "--surface", str(surface), "--approve"]) == 0
    store = Store.open(workspace / "ltx-pipeline.db")
    return store.latest_phase_runs(store.get_run(name).id)["autotune"].outputs


def measured(outputs: dict) -> list[dict]:
    return [t for t in outputs["trials"] if not t.get("from_prior")]


@pytest.mark.long  # 10.7 s per run on a 2-core box (2026-12-07): the default suite stays under 6 min
def test_a_second_run_measures_its_baseline_then_takes_the_rest_from_the_first(tmp_path, workspace,
                                                                               clips_dataset) -> None:
    surface = write_surface(tmp_path, GPU_32, SURFACE)
    cold = run(workspace, "first", clips_dataset, surface)
    assert len(measured(cold)) == 3 and cold["prior"] is None
    warm = run(workspace, "second", clips_dataset, surface)
    assert [t["knobs"] for t in measured(warm)] == [{**LOW, "gradient_accumulation_steps": 1}]  # the baseline only
    assert warm["prior"]["used"] is True and warm["prior"]["study"] == "first-autotune"
    assert "agrees" in warm["prior"]["why"]
    borrowed = [t for t in warm["trials"] if t.get("from_prior")]
    assert borrowed and all(t["from_prior"].startswith("first-autotune trial ") for t in borrowed)
    assert warm["winner"] == cold["winner"] and warm["objective"] == cold["objective"]  # still optimal
    assert "from the prior study first-autotune" in (workspace / "second" / "autotune.md").read_text()


@pytest.mark.long  # 13.4 s per run on a 2-core box (2026-12-07): the default suite stays under 6 min
def test_a_prior_the_baseline_contradicts_is_ignored_and_the_sweep_runs_in_full(tmp_path, workspace,
                                                                                clips_dataset) -> None:
    surface = write_surface(tmp_path, GPU_32, SURFACE)
    cold = run(workspace, "first", clips_dataset, surface)
    # The earlier run measured its baseline 50% slower (another driver, another build): the prior's
    # figures no longer describe this machine.
    db = sqlite3.connect(workspace / "optuna.db")
    (trial_id,) = db.execute(
        "SELECT t.trial_id FROM trials t JOIN studies s ON s.study_id = t.study_id JOIN trial_user_attributes a "
        "ON a.trial_id = t.trial_id WHERE s.study_name = 'first-autotune' AND a.key = 'trial_number' "
        "AND a.value_json = '1'").fetchone()
    db.execute("UPDATE trial_user_attributes SET value_json = ? WHERE trial_id = ? AND key = 'step_time_s'",
               (json.dumps(6.0), trial_id))
    db.commit()
    warm = run(workspace, "second", clips_dataset, surface)
    assert warm["prior"]["used"] is False and "differs from this 4.00s by 50%" in warm["prior"]["why"]
    assert len(measured(warm)) == len(measured(cold)) and not any(t.get("from_prior") for t in warm["trials"])
    assert warm["winner"] == cold["winner"]
