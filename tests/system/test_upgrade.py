"""Issue 49: upgrading ltx-pipeline never costs a run its work.

A workspace is made by an earlier release, exported from the repository's own history
(tests/system/releases/export.py), with a run in each state a user can leave one in
(tests/system/releases/harness.py): finished, awaiting approval, training detached and still running,
killed mid-training, failed with a proposed fix, a chained run between its stages, a finished
continuation. The current code then reads it (``status``, ``status --json``, the dashboard's JSON) and
resumes each run. Every run must resume where it was: no new approval, no new autotune trial, no new
preprocessing, no phase before training run again, the same config for every stage with checkpoints;
finished runs read as before; reading rewrites nothing but the store (its migration). Every problem is
collected, so one run of the test lists them all.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.system.releases import snapshot as snap
from tests.system.releases.export import imported_from, release_tree
from tests.system.releases.harness import (
    AWAITING,
    CHAINED,
    CONTINUED,
    FAILED_FIX,
    FINISHED,
    KILLED,
    LIVE,
    PREPROCESSED,
    Builder,
    Release,
    write_dataset,
)

# Releases to upgrade from: today's base, and the oldest release whose runs the test can make (see
# /tmp/notes/upgrade.md for which older commits were tried and why they cannot).
RELEASES = ("e443a8d", "30fca33", "754381c")
# Phases that may run again on resume: the ones that carry on the training itself.
CARRY_ON = ("train", "monitor", "evaluate")
# New train processes a resume may start, per state: a re-attached trainer is not relaunched.
NEW_TRAINERS = {FINISHED: 0, PREPROCESSED: 0, CONTINUED: 0, AWAITING: 0, LIVE: 0, KILLED: 1, CHAINED: 1, FAILED_FIX: 1}
_REASON = re.compile(r"^\[(\w+)\] \1 runs: (.*)$", re.MULTILINE)


def current(*args: str, timeout: float = 180) -> subprocess.CompletedProcess[str]:
    """The current code's CLI (the editable install), never the release's path."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["LTX_SIMULATED_TIME_SCALE"] = "0"
    return subprocess.run([sys.executable, "-m", "ltx_pipeline.cli", *args], capture_output=True, text=True,
                          env=env, timeout=timeout, check=False)


def _last_line(done: subprocess.CompletedProcess[str]) -> str:
    return (done.stderr.strip().splitlines() or done.stdout.strip().splitlines() or ["(no output)"])[-1]


def _live_trainer_file(path: str, made: dict[str, str]) -> bool:
    """Files a still-running trainer writes by itself while the current code only reads."""
    live = made.get(LIVE)
    return live is not None and (path.startswith(f"{live}/logs/") or path.startswith(f"{live}/outputs/"))


def _read_as_before(old: snap.RunSnapshot, new: dict[str, Any]) -> list[str]:
    """A finished run's state, and each phase's latest (status, attempt), as the release stored them."""
    problems = []
    if old.state != new.get("state"):
        problems.append(f"state {old.state!r} -> {new.get('state')!r}")
    stored = {phase: (status, attempt) for phase, attempt, status in old.phase_rows}  # the latest row wins
    shown = {p["phase"]: (p["status"], p["attempt"]) for p in new.get("phases", []) if p["phase"] in stored}
    if shown != stored:
        problems.append(f"phases (status, attempt) {stored} -> {shown}")
    return problems


def _read_with_current_code(workspace: Path, made: dict[str, str], before: snap.Snapshot,
                            problems: list[str]) -> None:
    text = current("status", "--workspace", str(workspace))
    if text.returncode != 0:
        problems.append(f"status: exit {text.returncode}: {_last_line(text)}")
    for name in made.values():
        if name not in text.stdout:
            problems.append(f"status: run {name} is not listed")
    done = current("status", "--workspace", str(workspace), "--json")
    try:
        runs = {r["name"]: r for r in json.loads(done.stdout)["runs"]}
    except (ValueError, KeyError) as error:
        problems.append(f"status --json: exit {done.returncode}, not parsed ({error}): {_last_line(done)}")
        runs = {}
    for state, name in made.items():
        if runs and name not in runs:
            problems.append(f"status --json: run {name} is missing")
        elif state in (FINISHED, PREPROCESSED, CONTINUED) and name in runs:
            problems += [f"{name} ({state}): status --json: {p}" for p in _read_as_before(before.runs[name],
                                                                                          runs[name])]
    _read_dashboard(workspace, made, problems)


def _read_dashboard(workspace: Path, made: dict[str, str], problems: list[str]) -> None:
    from starlette.testclient import TestClient

    from ltx_pipeline.ui.app import create_app
    from ltx_pipeline.workspace import Workspace

    web = TestClient(create_app(Workspace.at(workspace), None), base_url="http://127.0.0.1:8188")
    listing = web.get("/api/runs")
    if listing.status_code != 200:
        problems.append(f"dashboard /api/runs: HTTP {listing.status_code}: {listing.text[:300]}")
    elif not all(name in listing.text for name in made.values()):
        problems.append(f"dashboard /api/runs lists only: {listing.text[:300]}")
    for name in made.values():
        page = web.get(f"/api/runs/{name}")
        if page.status_code != 200:
            problems.append(f"dashboard /api/runs/{name}: HTTP {page.status_code}: {page.text[:300]}")


def _resume_problems(state: str, name: str, done: subprocess.CompletedProcess[str], before: snap.RunSnapshot,
                     after: snap.RunSnapshot) -> list[str]:
    wanted_exit = 3 if state == AWAITING else 0
    reasons = [f"{phase} runs: {why}" for phase, why in _REASON.findall(done.stdout)]
    problems = []
    if done.returncode != wanted_exit:
        problems.append(f"resume exit {done.returncode} (wanted {wanted_exit}): {_last_line(done)}")
    if after.approvals != before.approvals:
        problems.append(f"approvals changed: {len(before.approvals)} row(s) -> {len(after.approvals)}")
    if after.processes["trial"] != before.processes["trial"] or after.optuna_trials != before.optuna_trials:
        problems.append(f"autotune trials: {before.processes['trial']} processes / {before.optuna_trials} in the study"
                        f" -> {after.processes['trial']} / {after.optuna_trials}")
    if after.processes["preprocess"] != before.processes["preprocess"]:
        problems.append(f"preprocessing: {before.processes['preprocess']} -> {after.processes['preprocess']}")
    kept = [row for row in before.phase_rows if row[0] not in CARRY_ON]
    now = [row for row in after.phase_rows if row[0] not in CARRY_ON]
    # A phase the release did not have (prepare, added after 30fca33) runs once to hand its outputs to the
    # phases after it; the file and process checks here hold it to changing nothing. Any other row is a re-run.
    known = {row[0] for row in before.phase_rows}
    again = [(p, a, s) for p, a, s in now[len(kept):] if p in known or s != "succeeded"]
    if now[:len(kept)] != kept:
        problems.append(f"phase rows before training changed: {kept} -> {now}")
    elif again:
        problems.append(f"phases run again: {', '.join(f'{p} attempt {a} ({s})' for p, a, s in again)}")
    new_trainers = len(after.train_processes) - len(before.train_processes)
    if new_trainers != NEW_TRAINERS[state]:
        problems.append(f"{new_trainers} train process(es) started (wanted {NEW_TRAINERS[state]})")
    for config, text in before.stage_configs.items():
        changes = snap.config_changes(text, after.stage_configs.get(config, ""))
        if changes:
            problems.append(f"{config} (a stage with checkpoints) changed: {'; '.join(changes)}")
    wanted_state = "awaiting_approval" if state == AWAITING else "finished"
    if after.state != wanted_state:
        problems.append(f"state after resume {after.state!r} (wanted {wanted_state!r})")
    if problems and reasons:
        problems.append("the engine said: " + "; ".join(reasons))
    return problems


def _changed(before: dict[str, str], after: dict[str, str], prefix: str = "") -> list[str]:
    return sorted(p for p in {*before, *after} if p.startswith(prefix) and before.get(p) != after.get(p))


@pytest.mark.long  # ~90 s a release on 2 cores: in the opt-in long suite, `-m long`
@pytest.mark.slow
@pytest.mark.timeout(900)
@pytest.mark.parametrize("revision", RELEASES)
def test_an_upgrade_costs_no_run_its_work(revision: str, tmp_path: Path) -> None:
    try:
        tree = release_tree(revision)
    except LookupError as missing:
        pytest.skip(str(missing))
    imported_from(tree)
    release = Release(tree, tmp_path)
    workspace = tmp_path / "ws"
    made = Builder(release, workspace, write_dataset(tmp_path / "data"), tmp_path).build()
    assert made.runs, f"release {revision} made no run: {made.missing}\n" + "\n".join(release.log)
    for state, why in made.missing.items():  # what this release cannot make is no failure of the upgrade
        print(f"release {revision} could not make a run {state}: {why}")
    before = snap.take(workspace)
    problems: list[str] = []

    _read_with_current_code(workspace, made.runs, before, problems)
    read = snap.files_of(workspace)
    problems += [f"reading rewrote {path}" for path in _changed(before.files, read)
                 if not _live_trainer_file(path, made.runs)]

    for state, name in made.runs.items():
        extra = ["--apply-fix"] if state == FAILED_FIX else []
        done = current("resume", "--workspace", str(workspace), "--run", name, *extra)
        after = snap.take(workspace).runs[name]
        problems += [f"{name} ({state}): {p}" for p in _resume_problems(state, name, done, before.runs[name], after)]
        # A finished run keeps every file; any other keeps its plan (no second plan) and its request.
        problems += [f"{name} ({state}): resume rewrote {p}" for p in _changed(read, snap.files_of(workspace),
                                                                               f"{name}/")
                     if state in (FINISHED, PREPROCESSED, CONTINUED)
                     or p in (f"{name}/plan.md", f"{name}/run.yaml")]
    # The plan the release showed is the plan approved now. (Before the simulated backend, a plan on the
    # ltx backend without a trainer checkout and models was unapprovable in the release too.)
    if AWAITING in made.runs and "--surface" in release.options:
        name = made.runs[AWAITING]
        approve = current("approve", "--workspace", str(workspace), "--run", name)
        done = current("resume", "--workspace", str(workspace), "--run", name)
        if approve.returncode != 0 or done.returncode != 0:
            problems.append(f"{name} ({AWAITING}): approve exit {approve.returncode}, then resume exit "
                            f"{done.returncode}: {_last_line(approve if approve.returncode else done)}")
    assert not problems, f"upgrading from {revision}:\n" + "\n".join(problems)
