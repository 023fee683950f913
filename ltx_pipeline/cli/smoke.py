"""``ltx-pipeline smoke``: check the user's own trainer checkout and environment end to end in about a minute.

Prints each step as it finishes, then PASS, or FAIL with the step, the trainer's own evidence, the fix and
the log. The scratch folder lives in the workspace (``<workspace>/smoke/``) and is removed unless
``--keep``; the outcome is recorded there per checkout + environment, where the probe reads it.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from datetime import datetime, timezone
from pathlib import Path
from typing import Annotated

import typer

from ltx_pipeline.cli.config_tools import TrainerPythonOpt, TrainerRootOpt
from ltx_pipeline.cli.console import out
from ltx_pipeline.cli.options import WorkspaceOpt

__all__ = ["smoke"]


def smoke(workspace: WorkspaceOpt = None,
          trainer_root: TrainerRootOpt = None,
          trainer_python: TrainerPythonOpt = None,
          mode: Annotated[str, typer.Option(help="The mode whose shipped template is trained (t2v, i2v, v2v, ...).")]
          = "t2v",
          keep: Annotated[bool, typer.Option("--keep", help="Keep the scratch folder (model, clips, logs).")] = False,
          as_json: Annotated[bool, typer.Option("--json", help="Print JSON for scripts.")] = False) -> int:
    """Run your trainer checkout end to end on a tiny random model (about a minute): PASS, or why not and the fix."""
    from ltx_pipeline.cli.config_tools import ltx_backend
    from ltx_pipeline.errors import EXIT_FAILED, EXIT_OK, BadRequest, RunFailed
    from ltx_pipeline.ltx.modes import MODES
    from ltx_pipeline.steps.smoke import SMOKE_MODES, SmokeFailed, SmokeRecord, SmokeStep, run_smoke, save_record
    from ltx_pipeline.steps.smoke.identity import smoke_command, smoke_identity
    from ltx_pipeline.workspace import Workspace

    if mode not in SMOKE_MODES:
        known = mode in MODES
        raise BadRequest(f"The smoke test {'cannot make the media of' if known else 'knows no'} mode {mode!r}",
                         where="--mode", fix="choose one of " + ", ".join(SMOKE_MODES))
    backend = ltx_backend(trainer_root, trainer_python)
    finding = backend.environment_problem()  # a missing checkout or interpreter: one line, before anything
    if finding is not None:
        raise RunFailed(f"The trainer cannot run: {finding.message}", where="--trainer-root / --trainer-python",
                        fix="see the message; then run `ltx-pipeline smoke` again")
    ws = Workspace.at(workspace)
    scratch_parent = ws.root / "smoke"
    scratch_parent.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix="scratch-", dir=scratch_parent))
    command = smoke_command(backend, mode)
    if not as_json:
        out.print(f"Smoke test of {backend.root} ({backend.environment_words}), mode {mode}: a tiny random "
                  "LTX-2 model, two clips, preprocessing and two training steps.", markup=False)

    def report(step: SmokeStep) -> None:
        if not as_json:
            out.print(f"  ok  {step.name:<12} {step.seconds:5.1f} s  {step.detail}", markup=False)

    started = datetime.now(timezone.utc)
    failure: SmokeFailed | None = None
    try:
        run_smoke(backend, MODES[mode], scratch, on_step=report)
    except SmokeFailed as exc:
        failure = exc
    seconds = (datetime.now(timezone.utc) - started).total_seconds()
    identity = smoke_identity(backend, mode)
    record = SmokeRecord(key=identity, passed=failure is None, mode=mode, finished_at=started.isoformat(),
                         seconds=round(seconds, 1), trainer_root=str(backend.root),
                         environment=backend.environment_words, command=command,
                         failed_step=failure.step if failure else None,
                         diagnosis=failure.diagnosis if failure else None, fix=failure.fix if failure else None)
    save_record(ws.root, record)
    kept_log = None
    if failure is not None and failure.log is not None:
        kept_log = _keep_log(ws.root, failure.log)
    if not keep:
        shutil.rmtree(scratch, ignore_errors=True)
    if as_json:
        out.print_json(json.dumps({**record.to_dict(), "log": str(kept_log) if kept_log else None,
                                   "scratch": str(scratch) if keep else None}))
    elif failure is None:
        out.print(f"PASS in {seconds:.0f} s: {backend.root} trains with {backend.environment_words}."
                  + (f" Scratch kept at {scratch}." if keep else ""), markup=False)
    else:
        out.print(f"FAIL at {failure.step} after {seconds:.0f} s: {failure.diagnosis}", markup=False)
        out.print(f"  fix: {failure.fix}", markup=False)
        if kept_log:
            out.print(f"  log: {kept_log}", markup=False)
    return EXIT_OK if failure is None else EXIT_FAILED


def _keep_log(workspace: Path, log: Path) -> Path:
    """Copy a failed step's log next to the records (the scratch folder is removed)."""
    target = workspace / "smoke" / "logs" / f"{datetime.now().strftime('%Y%m%d-%H%M%S')}-{log.name}"
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(log, target)
    return target
