"""``ltx-pipeline diagnose LOG``: the engine's failure classifier on any trainer log.

Works on runs ltx-pipeline did not start (a user's own ``train.py`` or ``accelerate launch``, a SLURM
job's output): it reads the same lines the engine reads after a failed launch (``failure_tail``) and
calls the same ``classify_failure``, so ``status``, ``failure.md`` and ``diagnose`` agree on one log.
Exit 0 when the failure was classified, 1 when it was not (kind ``crash``); a bad LOG or config path is
one line and exit 2. The classifier and the config reader are imported when the command runs, never
at CLI start-up.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from ltx_pipeline.cli import Ending
from ltx_pipeline.cli.console import out
from ltx_pipeline.errors import BadInput

if TYPE_CHECKING:
    from ltx_pipeline.trainer_log import Failure, FixStep

__all__ = ["diagnose", "fix_entries", "render_text"]

_UNSET = object()


def diagnose(log: Annotated[Path, typer.Argument(help="The trainer's log (stdout and stderr), e.g. slurm-<job>.out.")],
             exit_code: Annotated[int | None, typer.Option("--exit-code", help="The trainer's exit status, when "
                                                           "known (137: SIGKILL, 135: SIGBUS).")] = None,
             signal: Annotated[int | None, typer.Option("--signal", help="The signal that ended it, when known.")]
             = None,
             config: Annotated[Path | None, typer.Option("--config", help="The run's trainer config YAML: fixes "
                                                         "become patches to it (key: old -> new).")] = None,
             as_json: Annotated[bool, typer.Option("--json", help='Print {"kind", "phase", "evidence", "fix"} '
                                                   "for scripts.")] = False) -> Ending:
    """Classify a failed trainer run from its log: kind, phase, evidence and the fix. Exit 0 classified, 1 not."""
    from ltx_pipeline.trainer_log import classify_failure, failure_tail

    lines = failure_tail(_readable(log))
    values: dict[str, Any] | None = None
    if config is not None:
        from ltx_pipeline.ltx.trainer_config import load_trainer_config_file

        values = load_trainer_config_file(config)
    failure = classify_failure(exit_code, signal, lines, config=values)
    fixes = fix_entries(failure.fix, values)
    if as_json:
        out.print(json.dumps({"kind": failure.kind, "phase": failure.phase, "rank": failure.rank,
                              "evidence": failure.evidence, "fix": fixes}), markup=False, highlight=False)
    else:
        out.print("\n".join(render_text(failure, fixes, config)), markup=False, highlight=False)
    return Ending.FAILED if failure.kind == "crash" else Ending.DONE


def _readable(log: Path) -> Path:
    if not log.exists():
        raise BadInput("The log file does not exist", where=str(log),
                       fix="pass the path of the trainer's output (its stdout/stderr file, e.g. slurm-<job>.out)")
    if not log.is_file():
        raise BadInput("The log path is not a file", where=str(log), fix="pass the log file itself, not its folder")
    try:
        with open(log, "rb"):
            pass
    except OSError as exc:
        raise BadInput(f"The log file cannot be read ({exc.strerror})", where=str(log),
                       fix="make it readable (`chmod u+r`) or copy it somewhere readable") from None
    return log


def fix_entries(steps: list[FixStep], config: dict[str, Any] | None) -> list[dict[str, Any]]:
    """Each fix as a dict: ``path``/``new`` for a config change (with ``old`` when the config is known)."""
    from ltx_pipeline.ltx.config_values import config_value

    entries: list[dict[str, Any]] = []
    for step in steps:
        if step.path is None:
            entries.append({"path": None, "reason": step.reason})
            continue
        entry: dict[str, Any] = {"path": step.path, "new": step.value, "reason": step.reason}
        if config is not None:
            old = config_value(config, step.path, _UNSET)
            entry["old"] = None if old is _UNSET else old
            entry["absent"] = old is _UNSET  # a key the config does not set: the trainer default applies
        entries.append(entry)
    return entries


def render_text(failure: Failure, fixes: list[dict[str, Any]], config: Path | None) -> list[str]:
    """One line per fact: kind, phase (and its witness), rank, evidence, then the numbered fixes."""
    lines = [f"kind: {failure.kind}"]
    if failure.phase:
        lines.append(f"phase: {failure.phase}" + (f" (from: {failure.phase_evidence})" if failure.phase_evidence
                                                  else ""))
    if failure.rank is not None:
        lines.append(f"rank: {failure.rank} (the process that failed)")
    lines.append(f"evidence: {failure.evidence}")
    lines.append(f"fix ({'patches to ' + str(config) if config else 'in order'}):")
    for number, entry in enumerate(fixes, 1):
        if entry["path"] is None:
            lines.append(f"  {number}. {entry['reason']}")
        elif "old" in entry:
            old = "(unset)" if entry["absent"] else json.dumps(entry["old"])
            lines.append(f"  {number}. {entry['path']}: {old} -> {json.dumps(entry['new'])}  ({entry['reason']})")
        else:
            lines.append(f"  {number}. set {entry['path']}: {json.dumps(entry['new'])}  ({entry['reason']})")
    return lines
