"""Resume, stop, continue and remove a run from the page: each the CLI's own command or code.

``resume`` and ``continue`` start ``ltx-pipeline resume --detach [--apply-fix]`` and ``ltx-pipeline run
--steps TOTAL --approve --detach`` detached (TOTAL: the steps the finished training reached plus the extra
ones asked). ``stop`` and ``remove`` run in-process through ``driving.stop`` and ``driving.remove``, what
``ltx-pipeline stop`` and ``ltx-pipeline rm`` call; both need ``confirm``, and a stop without it is refused
with what it would lose (the steps since the last checkpoint).
"""

from __future__ import annotations

from typing import Any

from ltx_pipeline.driving import existing_run, find_workspace, removal, remove, stop, stop_target
from ltx_pipeline.errors import BadRequest
from ltx_pipeline.status.report import driver_alive
from ltx_pipeline.store.rows import saved_id
from ltx_pipeline.ui.actions.create import flag
from ltx_pipeline.ui.actions.detached import shown
from ltx_pipeline.ui.actions.gates import resume_args
from ltx_pipeline.ui.actions.studio import Attempt, Conflict, Done, Studio
from ltx_pipeline.ui.run_state import trained_steps

__all__ = ["continue_run", "remove_run", "resume_run", "stop_run"]

INTERRUPT_TIMEOUT_S = 30.0  # ``ltx-pipeline stop``'s defaults
TERMINATE_TIMEOUT_S = 15.0


def resume_run(studio: Studio, attempt: Attempt, name: str, body: dict[str, Any]) -> Done:
    """``ltx-pipeline resume --detach`` (``--apply-fix`` with ``apply_fix``, ``--queue`` with ``queue``: wait
    for free GPUs in the queue), started detached."""
    apply_fix, queue = flag(body, "apply_fix"), flag(body, "queue")
    args = resume_args(studio, name, "--detach", *(["--apply-fix"] if apply_fix else []),
                       *(["--queue"] if queue else []))
    attempt.command = shown(args)
    _idle_run(studio, name)
    studio.launcher.launch(args, studio.workspace.run(name).logs / "studio.log")
    return Done(name, attempt.command, f"Run {name} resumes detached" + (" with the proposed fix." if apply_fix
                                                                         else "."))


def stop_run(studio: Studio, attempt: Attempt, name: str, body: dict[str, Any]) -> Done:
    """``ltx-pipeline stop``: stop the run's trainer (or render) as Ctrl-C does, once confirmed."""
    attempt.command = shown(["stop", "--workspace", studio.root, "--run", name])
    target = stop_target(studio.workspace.root, name)
    if target.kind == "nothing":
        raise Conflict(f"No trainer of run {name} is running; nothing to stop", where=f"run {name}",
                       fix="reload the page")
    if body.get("confirm") is not True:
        raise BadRequest(f"Stopping loses {_lost(studio, name)}", where="stop",
                         fix="confirm the stop (send confirm: true), or let it run")
    stopped = stop(target, interrupt_timeout=INTERRUPT_TIMEOUT_S, terminate_timeout=TERMINATE_TIMEOUT_S)
    how = "it ended on its own first" if stopped.ended_on_its_own else f"stopped ({stopped.how})"
    return Done(name, attempt.command, f"The {target.kind} of run {name}: {how}.")


def continue_run(studio: Studio, attempt: Attempt, name: str, body: dict[str, Any]) -> Done:
    """``ltx-pipeline run --steps TOTAL --approve --detach``: a finished run trains ``steps`` more, detached."""
    extra = body.get("steps")
    if not isinstance(extra, int) or isinstance(extra, bool) or extra < 1:
        raise BadRequest(f"steps must be a whole number of extra steps from 1, not {extra!r}", where="steps",
                         fix="give how many steps to train past the finished ones, e.g. 20")
    ws, found = find_workspace(studio.workspace.root)
    store, run = existing_run(ws, found, name)
    trained = trained_steps(store, run)
    if trained is None:
        raise Conflict(f"Run {name} has no finished training to continue", where=f"run {name}",
                       fix="resume it, or wait until its training finishes")
    args = ["run", "--workspace", studio.root, "--run", name, "--steps", str(trained + extra), "--approve",
            "--detach"]
    attempt.command = shown(args)
    _idle_run(studio, name)
    studio.launcher.launch(args, ws.run(name).logs / "studio.log")
    return Done(name, attempt.command, f"Run {name} continues from step {trained} to {trained + extra}, detached.")


def remove_run(studio: Studio, attempt: Attempt, name: str, body: dict[str, Any]) -> Done:
    """``ltx-pipeline rm``: the run's rows, folder and studies; refused while anything works on it."""
    attempt.command = shown(["rm", name, "--workspace", studio.root, "--yes"])
    if body.get("confirm") is not True:
        raise BadRequest(f"Removing run {name} deletes its folder, checkpoints and records (your clips stay)",
                         where="remove", fix="confirm the removal (send confirm: true)")
    removed = remove(removal(studio.workspace.root, name))
    return Done(name, attempt.command, f"Removed run {name} ({removed.folder}); its dataset stays.")


def _idle_run(studio: Studio, name: str) -> None:
    """Refuse, before starting a command, a run that does not exist or that a driver works on now."""
    ws, found = find_workspace(studio.workspace.root)
    existing_run(ws, found, name)
    driver = driver_alive(ws.run(name).lock_file)
    if driver is not None:
        raise Conflict(f"Run {name} is being driven now (pid {driver.get('pid')})", where=f"run {name}",
                       fix="wait until it stops or reaches a gate, then try again")


def _lost(studio: Studio, name: str) -> str:
    """The steps a stop now would lose: those trained since the run's newest checkpoint."""
    from ltx_pipeline.status.live import live_training
    from ltx_pipeline.training.readers import log_summary

    _, found = find_workspace(studio.workspace.root)
    store, run = existing_run(studio.workspace, found, name)
    training = live_training(store, run, log_summary=log_summary, query_gpus=False) or {}
    step = training.get("step")
    saved = max((c.step for c in store.checkpoints(saved_id(run), training.get("stage"))), default=None)
    if step is None:
        return "whatever the trainer has done since it started (no step logged yet)"
    if saved is None:
        return f"all {step} step(s) trained so far: no checkpoint is saved yet"
    return f"{max(step - saved, 0)} step(s): trained to step {step}, last checkpoint at step {saved}"
