"""What a retry would change: a failed launch's classification and its proposed fix, as typed records.

Owns ``FixProposal`` (what ``<run>/failure.json`` holds: the failure and one rung of the troubleshooting
ladder as an exact config diff of ``ConfigChange``), ``failure_report`` (the proposal and ``failure.md``,
from the lines the launch wrote) and the way ``resume --apply-fix`` reads the proposal back. The JSON
shape of ``failure.json`` is kept as it was when it was a dict: old files read, new files are the same.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ltx_pipeline.ltx.config_values import config_value
from ltx_pipeline.ltx.trainer_config.view import read_config_view
from ltx_pipeline.trainer_log import Failure, classify_failure, failure_tail

__all__ = ["ConfigChange", "FixProposal", "failure_report", "proposed_diff"]


@dataclass(frozen=True)
class ConfigChange:
    """One line of a proposed diff: the dotted config path, its value now, the value proposed, and why."""

    path: str
    old: Any
    new: Any
    reason: str


@dataclass(frozen=True)
class FixProposal:
    """A failed launch as ``failure.json`` records it, with the config diff ``resume --apply-fix`` applies."""

    stage: int
    kind: str
    phase: str | None = None
    rank: int | None = None
    evidence: str = ""
    exit_code: int | None = None
    signal: int | None = None
    log: str = ""
    diff: tuple[ConfigChange, ...] = field(default_factory=tuple)

    def to_json(self) -> str:
        return json.dumps({**asdict(self), "diff": [asdict(c) for c in self.diff]}, indent=2)

    @classmethod
    def read(cls, path: Path) -> FixProposal | None:
        """The proposal in ``path``; None when there is none (or it is not one this engine wrote)."""
        try:
            record = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return None
        if not isinstance(record, dict) or not isinstance(record.get("stage"), int) or "kind" not in record:
            return None
        diff = tuple(ConfigChange(c["path"], c.get("old"), c["new"], c.get("reason", ""))
                     for c in record.get("diff") or [])
        known = {k: record[k] for k in ("phase", "rank", "evidence", "exit_code", "signal", "log") if k in record}
        return cls(stage=record["stage"], kind=str(record["kind"]), diff=diff, **known)

    def diff_line(self) -> str:
        """``path: old -> new; ...`` ("" when no config change is proposed)."""
        return "; ".join(f"{c.path}: {c.old} -> {c.new}" for c in self.diff)


def proposed_diff(failure: Failure, config: Mapping[str, Any]) -> list[ConfigChange]:
    """The next rung of the failure's fix ladder as an exact config diff (dotted path, old, new).

    Fixes are ordered cheapest-first (OOM: batch 1, checkpointing, 8-bit optimizer, ..., cheaper
    validation), and the classifier drops rungs the config already satisfies, so applying one rung per
    failure walks down the ladder. Batch 1 comes with its gradient accumulation, which keeps the
    effective batch. The old value is read at the fix's own dotted path: a patch is addressed that way.
    """
    changes = failure.config_changes
    if not changes:
        return []
    take = changes[:2] if (changes[0].path == "optimization.batch_size" and len(changes) > 1
                           and changes[1].path == "optimization.gradient_accumulation_steps") else changes[:1]
    return [ConfigChange(c.path, config_value(config, c.path), c.value, c.reason) for c in take]


def failure_report(log: Path, config: Mapping[str, Any], exit_code: int | None, signal: int | None,
                   stage: int) -> tuple[Failure, FixProposal, str]:
    """Classify a failed launch from the lines it wrote, and build the proposal and ``failure.md``.

    Only the lines after the last launch boundary count (the stage's log is appended across launches).

    Returns:
        (failure, proposal for ``failure.json``, markdown report).
    """
    tail = failure_tail(log)  # the lines `ltx-pipeline diagnose` reads too
    validation = read_config_view(config, where=str(log)).validation
    failure = classify_failure(exit_code, signal, tail, config=config,
                               initial_validation=bool(validation.interval) and not validation.skip_initial_validation)
    diff = proposed_diff(failure, config)
    proposal = FixProposal(stage=stage, kind=failure.kind, phase=failure.phase, rank=failure.rank,
                           evidence=failure.evidence, exit_code=exit_code, signal=signal, log=str(log),
                           diff=tuple(diff))
    return failure, proposal, _report(failure, proposal)


def _report(failure: Failure, proposal: FixProposal) -> str:
    """``failure.md``: the failure, the diff ``--apply-fix`` applies, then the rungs after it."""
    where = ([f"- phase: {failure.phase}" + (f" (from: `{failure.phase_evidence}`)" if failure.phase_evidence else "")]
             if failure.phase else []) + ([f"- rank: {failure.rank}"] if failure.rank is not None else [])
    code, signal, diff = proposal.exit_code, proposal.signal, proposal.diff
    lines = [f"# Training failure: stage {proposal.stage}", "", f"- class: **{failure.kind}**", *where,
             f"- exit code: {code}" + (f" (signal {signal})" if signal else ""), f"- log: {proposal.log}",
             f"- evidence: `{failure.evidence}`", "", "## Proposed fix"]
    if diff:
        lines += ["", "`ltx-pipeline resume --apply-fix` applies exactly this diff, re-validates and retries:", "",
                  "```diff", *(f"- {c.path}: {json.dumps(c.old)}\n+ {c.path}: {json.dumps(c.new)}" for c in diff),
                  "```", "", *(f"- {c.path}: {c.reason}" for c in diff)]
    else:
        lines += ["", "No config change is proposed; `ltx-pipeline resume` retries as is once the cause is fixed."]
    rest = [f for f in failure.fix if f.path is None or f.path not in {c.path for c in diff}]
    if rest:
        lines += ["", "## If that is not enough (in order)", ""]
        lines += [f"- `{f.path}: {json.dumps(f.value)}`: {f.reason}" if f.path else f"- {f.reason}" for f in rest]
    return "\n".join(lines) + "\n"
