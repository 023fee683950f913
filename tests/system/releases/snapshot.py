"""What a workspace holds, read without the engine: the store through stdlib sqlite3, files by digest.

The upgrade test compares a snapshot taken after the earlier release made the workspace with one taken
after the current code read and resumed it. Reading needs no ltx_pipeline import, so the same code reads
a store of any schema: a table or column the release did not have yet reads as empty.
"""

from __future__ import annotations

import hashlib
import re
import sqlite3
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

STORE_FILES = ("ltx-pipeline.db", "ltx-pipeline.db-wal", "ltx-pipeline.db-shm", "ltx-pipeline.db-journal")
# Where a run's driver holds its lock (pid and host): every command that drives a run writes it.
LOCK_FILE = ".driver.lock"
_OUTPUT_DIR = re.compile(r"^output_dir:\s*[\"']?([^\"'\n]+)[\"']?\s*$", re.MULTILINE)


@dataclass(frozen=True)
class RunSnapshot:
    """One run as the store and its folder hold it."""

    state: str
    approvals: tuple[tuple[str, ...], ...]  # (subject, approved_by, approved_at) per row
    phase_rows: tuple[tuple[str, int, str], ...]  # (phase, attempt, status), oldest first
    processes: Counter[str]  # rows per kind: trial, preprocess, train, evaluate, ...
    train_processes: tuple[tuple[int, int | None], ...]  # (id, stage) of each train process
    optuna_trials: int  # trials of the run's studies in <workspace>/optuna.db
    stage_configs: dict[str, str] = field(default_factory=dict)  # config file -> text, stages with checkpoints


@dataclass(frozen=True)
class Snapshot:
    runs: dict[str, RunSnapshot]
    files: dict[str, str]  # path relative to the workspace -> sha256, every file but the store's


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def files_of(workspace: Path) -> dict[str, str]:
    return {str(p.relative_to(workspace)): digest(p) for p in sorted(workspace.rglob("*"))
            if p.is_file() and p.name not in (*STORE_FILES, LOCK_FILE)}


def _rows(db: sqlite3.Connection, sql: str, *args: object) -> list[tuple[object, ...]]:
    """Rows of ``sql``, or none when the release's schema lacks the table or column."""
    try:
        return list(db.execute(sql, args))
    except sqlite3.OperationalError as error:
        if "no such" in str(error):
            return []
        raise


def _optuna_trials(workspace: Path) -> Counter[str]:
    path = workspace / "optuna.db"
    if not path.is_file():
        return Counter()
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return Counter({str(name): int(str(n)) for name, n in _rows(
            db, "SELECT s.study_name, COUNT(t.trial_id) FROM studies s LEFT JOIN trials t "
                "ON t.study_id = s.study_id GROUP BY s.study_name")})
    finally:
        db.close()


def checkpointed_configs(run_folder: Path) -> dict[str, str]:
    """Each trainer config of the run whose ``output_dir`` holds checkpoints: name -> text."""
    found: dict[str, str] = {}
    for config in sorted(run_folder.glob("config*.yaml")):
        match = _OUTPUT_DIR.search(config.read_text(encoding="utf-8", errors="replace"))
        if match and config.name != "config.eval.yaml":
            checkpoints = Path(match.group(1).strip()) / "checkpoints"
            if checkpoints.is_dir() and any(checkpoints.glob("*.safetensors")):
                found[config.name] = config.read_text(encoding="utf-8")
    return found


def take(workspace: Path) -> Snapshot:
    db = sqlite3.connect(f"file:{workspace / 'ltx-pipeline.db'}?mode=ro", uri=True)
    studies = _optuna_trials(workspace)
    runs: dict[str, RunSnapshot] = {}
    try:
        for run_id, name, state in _rows(db, "SELECT id, name, state FROM runs ORDER BY id"):
            approvals = tuple(tuple(str(v) for v in row) for row in _rows(
                db, "SELECT subject, approved_by, approved_at FROM approvals WHERE run_id = ? ORDER BY id", run_id))
            phases = tuple((str(p), int(str(a)), str(s)) for p, a, s in _rows(
                db, "SELECT phase, attempt, status FROM phase_runs WHERE run_id = ? ORDER BY id", run_id))
            kinds = Counter(str(k) for (k,) in _rows(db, "SELECT kind FROM processes WHERE run_id = ?", run_id))
            train = tuple((int(str(i)), None if s is None else int(str(s))) for i, s in _rows(
                db, "SELECT id, stage FROM processes WHERE run_id = ? AND kind = 'train' ORDER BY id", run_id))
            trials = sum(n for study, n in studies.items() if study.startswith(f"{name}-"))
            runs[str(name)] = RunSnapshot(str(state), approvals, phases, kinds, train, trials,
                                          checkpointed_configs(workspace / str(name)))
    finally:
        db.close()
    return Snapshot(runs, files_of(workspace))


def _flat(values: object, prefix: str = "") -> dict[str, object]:
    if isinstance(values, dict):
        return {k: v for key, sub in values.items() for k, v in _flat(sub, f"{prefix}{key}.").items()}
    return {prefix.rstrip("."): values}


def config_changes(old: str, new: str) -> list[str]:
    """Settings that differ between two texts of one trainer config, as ``path: old -> new``.

    Resuming a stage points ``model.load_checkpoint`` at the stage's own newest checkpoint (the
    trainer's resume mechanism, steps/resume.py): that alone is no change of the stage's config."""
    import yaml

    before, after = _flat(yaml.safe_load(old)), _flat(yaml.safe_load(new) or {})
    own = f"{str(after.get('output_dir') or '').rstrip('/')}/checkpoints/"

    def resume_point(value: object) -> bool:  # none yet, or one of the stage's own checkpoints
        return value in (None, "") or (isinstance(value, str) and value.startswith(own))

    if resume_point(before.get("model.load_checkpoint")) and resume_point(after.get("model.load_checkpoint")):
        before.pop("model.load_checkpoint", None)
        after.pop("model.load_checkpoint", None)
    return [f"{path}: {before.get(path, '(absent)')!r} -> {after.get(path, '(absent)')!r}"
            for path in sorted({*before, *after}) if before.get(path) != after.get(path)]
