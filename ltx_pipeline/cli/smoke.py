"""``ltx-pipeline smoke``: check the user's own trainer checkout and environment end to end in about a minute.

Prints each step as it finishes, then PASS, or FAIL with the step, the trainer's own evidence, the fix and
the log. Several modes (``--mode`` repeated, or ``all``) share one environment check and one tiny model, then
each runs its own steps and gets its own PASS or FAIL. The scratch folder lives in the workspace
(``<workspace>/smoke/``) and is removed unless ``--keep``; each mode's outcome is recorded there per
checkout + environment, where the probe reads it.
"""

from __future__ import annotations

import json
import shutil
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from ltx_pipeline.cli import Ending
from ltx_pipeline.cli.config_tools import TrainerPythonOpt, TrainerRootOpt
from ltx_pipeline.cli.console import out
from ltx_pipeline.cli.options import WorkspaceOpt

if TYPE_CHECKING:
    from ltx_pipeline.backends.ltx import LtxBackend
    from ltx_pipeline.smoke import SmokeFailed, SmokeStep

__all__ = ["smoke"]

ModeOpt = Annotated[list[str] | None, typer.Option(
    "--mode", help="The mode whose shipped template is trained: any of the 15 (t2v, i2v, v2v, t2a, a2a, ...); "
                   "repeat it for several, or give `all`. Several share one environment check and tiny model.")]


def smoke(workspace: WorkspaceOpt = None,
          trainer_root: TrainerRootOpt = None,
          trainer_python: TrainerPythonOpt = None,
          mode: ModeOpt = None,
          keep: Annotated[bool, typer.Option("--keep", help="Keep the scratch folder (model, data, logs).")] = False,
          as_json: Annotated[bool, typer.Option("--json", help="Print JSON for scripts.")] = False) -> Ending:
    """Run your trainer checkout end to end on a tiny random model (about a minute): PASS, or why not and the fix."""
    from ltx_pipeline.cli.config_tools import ltx_backend
    from ltx_pipeline.errors import BadInput, RunFailed
    from ltx_pipeline.workspace import Workspace

    modes = _modes(mode or ["t2v"])
    backend = ltx_backend(trainer_root, trainer_python)
    checkout = backend.root  # none given, or not a checkout: bad input (exit 2), naming --trainer-root and LTX2_ROOT
    finding = backend.environment_problem()  # an unsynced checkout or a missing interpreter: one line, before anything
    if finding is not None and finding.code == "trainer_python_missing":
        raise BadInput(f"--trainer-python {backend.python} is not an executable file", where="--trainer-python",
                       fix="pass the python of the venv or conda env where ltx-trainer is installed "
                           "(e.g. ENV/bin/python)")
    if finding is not None:
        raise RunFailed(f"The trainer cannot run: {finding.message}", where=f"--trainer-root {checkout}",
                        fix="see the message; then run `ltx-pipeline smoke` again")
    ws = Workspace.at(workspace)
    (ws.root / "smoke").mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix="scratch-", dir=ws.root / "smoke"))
    if not as_json:
        out.print(_header(backend, modes), markup=False)
    started = time.monotonic()
    outcomes = _run_modes(backend, modes, scratch, quiet=as_json)
    kept: dict[Path, Path] = {}  # failed logs already copied: a shared step's failure is every mode's
    records = [_record(ws.root, backend, name, outcome, kept) for name, outcome in outcomes.items()]
    if not keep:
        shutil.rmtree(scratch, ignore_errors=True)
    _print_outcome(backend, records, time.monotonic() - started, scratch if keep else None, as_json, len(modes) > 1)
    return Ending.DONE if all(r["passed"] for r in records) else Ending.FAILED


def _modes(asked: list[str]) -> list[str]:
    """The modes asked for, in order, without repeats (``all``: every one); an unknown one is a BadRequest."""
    from ltx_pipeline.errors import BadRequest
    from ltx_pipeline.smoke import SMOKE_MODES

    names = [name for value in asked for name in (SMOKE_MODES if value == "all" else [value])]
    unknown = [name for name in names if name not in SMOKE_MODES]
    if unknown:
        raise BadRequest(f"The smoke test knows no mode {unknown[0]!r}", where="--mode",
                         fix="choose one of " + ", ".join(SMOKE_MODES) + ", or all")
    return list(dict.fromkeys(names))


def _header(backend: LtxBackend, modes: list[str]) -> str:
    if len(modes) == 1:
        return (f"Smoke test of {backend.root} ({backend.environment_words}), mode {modes[0]}: a tiny random LTX-2 "
                "model, a two-row dataset of the mode's media, preprocessing, two training steps and one "
                "validation sample.")
    return (f"Smoke test of {backend.root} ({backend.environment_words}), {len(modes)} modes ({', '.join(modes)}): "
            "one environment check and tiny random LTX-2 model, then for each mode a two-row dataset of its media, "
            "preprocessing, two training steps and one validation sample.")


Outcome = tuple[datetime, float, "SmokeFailed | None"]


def _run_modes(backend: LtxBackend, modes: list[str], scratch: Path, *, quiet: bool) -> dict[str, Outcome]:
    """Each mode's start, seconds (the shared steps' included) and failure, the shared steps run once."""
    from ltx_pipeline.ltx.modes import MODES
    from ltx_pipeline.smoke import SmokeFailed, prepare_smoke, run_mode

    several = len(modes) > 1

    def report(step: SmokeStep) -> None:
        if not quiet:
            out.print(f"{'  ' if several and step.name not in _SHARED else ''}  ok  {step.name:<12} "
                      f"{step.seconds:5.1f} s  {step.detail}", markup=False)

    begun = datetime.now(timezone.utc)
    started = time.monotonic()
    try:
        shared = prepare_smoke(backend, scratch, on_step=report)
    except SmokeFailed as exc:
        return {name: (begun, time.monotonic() - started, exc) for name in modes}
    shared_seconds = time.monotonic() - started
    outcomes: dict[str, Outcome] = {}
    for name in modes:
        if several and not quiet:
            out.print(f"  {name}:", markup=False)
        mode_started, mode_begun = time.monotonic(), datetime.now(timezone.utc)
        failure: SmokeFailed | None = None
        try:
            run_mode(backend, MODES[name], scratch / name if several else scratch, shared, on_step=report)
        except SmokeFailed as exc:
            failure = exc
        seconds = time.monotonic() - mode_started
        outcomes[name] = (begun if not several else mode_begun, shared_seconds + seconds, failure)
        if several and not quiet:
            _print_mode(name, seconds, failure)
    return outcomes


_SHARED = ("environment", "tiny model")


def _print_mode(name: str, seconds: float, failure: SmokeFailed | None) -> None:
    if failure is None:
        out.print(f"    PASS {name} in {seconds:.0f} s (its own steps)", markup=False)
    else:
        out.print(f"    FAIL {name} at {failure.step} after {seconds:.0f} s: {failure.diagnosis}", markup=False)


def _record(workspace: Path, backend: LtxBackend, mode: str, outcome: Outcome, kept: dict[Path, Path]
            ) -> dict[str, Any]:
    """Save the mode's record (and keep a failed step's log beside it); return it as printed."""
    from ltx_pipeline.smoke import SmokeRecord, save_record
    from ltx_pipeline.smoke.identity import smoke_command, smoke_identity

    started, seconds, failure = outcome
    record = SmokeRecord(key=smoke_identity(backend, mode), passed=failure is None, mode=mode,
                         finished_at=started.isoformat(), seconds=round(seconds, 1), trainer_root=str(backend.root),
                         environment=backend.environment_words, command=smoke_command(backend, mode),
                         failed_step=failure.step if failure else None,
                         diagnosis=failure.diagnosis if failure else None, fix=failure.fix if failure else None)
    save_record(workspace, record)
    log = None
    if failure is not None and failure.log is not None:
        if failure.log not in kept:
            kept[failure.log] = _keep_log(workspace, "" if failure.step in _SHARED else mode, failure.log)
        log = str(kept[failure.log])
    return {**record.to_dict(), "log": log}


def _print_outcome(backend: LtxBackend, records: list[dict[str, Any]], seconds: float, scratch: Path | None,
                   as_json: bool, several: bool) -> None:
    if as_json:
        body: Any = records[0] if not several else {"passed": all(r["passed"] for r in records),
                                                    "seconds": round(seconds, 1), "modes": records}
        out.print_json(json.dumps({**body, "scratch": str(scratch) if scratch else None}))
        return
    failed = [r for r in records if not r["passed"]]
    kept = f" Scratch kept at {scratch}." if scratch else ""
    if not failed:
        what = f"every mode asked ({len(records)}) " if several else ""
        out.print(f"PASS in {seconds:.0f} s: {backend.root} trains {what}with {backend.environment_words}.{kept}",
                  markup=False)
        return
    alike: dict[tuple[str, str, str], list[dict[str, Any]]] = {}  # a shared step's failure fails every mode
    for record in failed:
        alike.setdefault((record["failed_step"], record["diagnosis"], record["fix"]), []).append(record)
    for (step, diagnosis, fix), group in alike.items():
        where = f"{', '.join(r['mode'] for r in group)} at {step}" if several else f"at {step} after {seconds:.0f} s"
        out.print(f"FAIL {where}: {diagnosis}", markup=False)
        out.print(f"  fix: {fix}", markup=False)
        for log in dict.fromkeys(r["log"] for r in group if r["log"]):
            out.print(f"  log: {log}", markup=False)
    if several:
        out.print(f"FAIL in {seconds:.0f} s: {len(failed)} of {len(records)} modes failed "
                  f"({', '.join(r['mode'] for r in failed)}).{kept}", markup=False)
    elif kept:
        out.print(kept.strip(), markup=False)


def _keep_log(workspace: Path, mode: str, log: Path) -> Path:
    """Copy a failed step's log next to the records (the scratch folder is removed)."""
    name = "-".join(part for part in (datetime.now().strftime("%Y%m%d-%H%M%S"), mode, log.name) if part)
    target = workspace / "smoke" / "logs" / name
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(log, target)
    return target
