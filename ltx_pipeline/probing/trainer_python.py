"""The ``--trainer-python`` check: does that interpreter import the trainer, and with which versions?

Runs ``trainer_side/check_environment.py`` with the given interpreter (never imports the trainer into
this process) and turns its JSON into a ``Finding``. The quick form imports ``ltx_trainer`` only, so a
probe costs seconds; ``ltx-pipeline smoke`` runs the full form. ``TRAINER_SIDE`` is where every script
that runs in the trainer's environment lives.
"""

from __future__ import annotations

import json
import os
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ltx_pipeline.probing import Finding, plain_record
from ltx_pipeline.probing.trainer_checkout import TrainerCheck

__all__ = ["ENVIRONMENT_MARK", "TRAINER_SIDE", "TrainerPythonCheck", "check_trainer_python", "environment_report",
           "read_only_env",
           "run_environment_check"]

#: Standalone scripts run with the trainer's interpreter (they import ltx_trainer, never ltx_pipeline).
TRAINER_SIDE = Path(__file__).resolve().parents[1] / "trainer_side"
ENVIRONMENT_MARK = "LTX_PIPELINE_ENVIRONMENT "
_ITEM = "Trainer python"


@dataclass(frozen=True)
class TrainerPythonCheck:
    """What the interpreter said about itself: versions, CUDA, and the problems with their fixes."""

    python: str
    ok: bool
    versions: dict[str, str | None] = field(default_factory=dict)
    cuda: bool = False
    problems: tuple[dict[str, str], ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return plain_record(self)

    def to_finding(self) -> Finding:
        if self.ok:
            trainer = self.versions.get("ltx-trainer") or "?"
            return Finding(_ITEM, "ok", f"{self.python}: ltx-trainer {trainer}, torch {self.versions.get('torch')}"
                                        f"{', CUDA' if self.cuda else ', no CUDA'}")
        first = self.problems[0] if self.problems else {"what": "the check gave no answer", "fix": ""}
        return Finding(_ITEM, "missing", f"{self.python}: {first['what']}", first.get("fix") or None)


def read_only_env() -> dict[str, str]:
    """The environment for a script that only inspects the user's trainer checkout (the environment check, the
    config validator): Python writes no ``__pycache__`` there, since nothing outside the workspace is written."""
    return {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}


def run_environment_check(python: Path, trainer_dir: Path, *, quick: bool,
                          timeout_s: float = 300) -> TrainerPythonCheck:
    """Run the environment check with ``python`` (argv list, no shell) and read its one JSON line."""
    argv = [str(python), str(TRAINER_SIDE / "check_environment.py"), str(trainer_dir), *(["--quick"] if quick else [])]
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout_s, check=False,  # noqa: S603
                              cwd=trainer_dir if trainer_dir.is_dir() else None, env=read_only_env())
    except subprocess.TimeoutExpired:
        return _failed(python, f"the environment check did not finish within {timeout_s:.0f} s",
                       "check that the interpreter starts: run it with -c 'import ltx_trainer'")
    except OSError as exc:
        return _failed(python, f"it could not be run ({exc.strerror or exc})",
                       "pass the python of the venv or conda env where ltx-trainer is installed (ENV/bin/python)")
    data = environment_report(done.stdout)
    if data is None:
        tail = (done.stderr.strip().splitlines() or ["no output"])[-1]
        return _failed(python, f"the environment check failed (exit {done.returncode}): {tail}",
                       "check that this is a Python 3.10+ interpreter of the trainer's environment")
    problems = tuple(data.get("problems") or ())
    return TrainerPythonCheck(str(python), not problems, data.get("versions") or {}, bool(data.get("cuda")), problems)


def environment_report(output: str) -> dict[str, Any] | None:
    """The JSON ``check_environment.py`` printed in ``output`` (its marked line), or None when there is none."""
    line = next((ln for ln in output.splitlines() if ln.startswith(ENVIRONMENT_MARK)), None)
    return dict(json.loads(line[len(ENVIRONMENT_MARK):])) if line is not None else None


def _failed(python: Path, what: str, fix: str) -> TrainerPythonCheck:
    return TrainerPythonCheck(str(python), False, problems=({"what": what, "fix": fix},))


def check_trainer_python(python: Path, trainer: TrainerCheck) -> TrainerPythonCheck:
    """The quick check of ``--trainer-python`` (it imports ``ltx_trainer``), or why it cannot run."""
    if not (python.is_file() and os.access(python, os.X_OK)):
        return _failed(python, "not an executable file",
                       "pass the python of the venv or conda env where ltx-trainer is installed (ENV/bin/python)")
    trainer_dir = Path(trainer.root or ".") / "packages" / "ltx-trainer"
    return run_environment_check(python, trainer_dir, quick=True, timeout_s=120)
