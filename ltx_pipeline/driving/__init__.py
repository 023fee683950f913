"""The run-driving layer: every decision about a run's state, for the CLI and the dashboard alike.

Create a run or update its run.yaml (``prepare_run``, ``create_run``, ``resume_run``: whether a finished
training continues from its weights or is re-planned), drive it through the engine (``drive``: the phase
registry, the backend its request names, the approval gates), approve its gate (``approve``), stop its
trainer (``stop_target``, ``stop``), remove it (``removal``, ``remove``). Each takes the workspace, the store
and options, and returns a typed result or raises the project's errors (``errors.py``); none prints, none
imports typer or rich, none picks an exit code: the caller shows the result (``cli/``, ``ui/``).
"""

from ltx_pipeline.driving.drive import DriveHooks, Driven, backend_for, drive, phases_through
from ltx_pipeline.driving.gates import Approval, Gate, approve
from ltx_pipeline.driving.prepare import PreparedRun, create_run, prepare_run, resume_run
from ltx_pipeline.driving.remove import Removal, Removed, removal, remove
from ltx_pipeline.driving.runs import existing_run, find_workspace, latest_run_name, open_workspace
from ltx_pipeline.driving.stop import Stopped, StopTarget, stop, stop_target

__all__ = ["Approval", "DriveHooks", "Driven", "Gate", "PreparedRun", "Removal", "Removed", "StopTarget", "Stopped",
           "approve", "backend_for", "create_run", "drive", "existing_run", "find_workspace", "latest_run_name",
           "open_workspace", "phases_through", "prepare_run", "removal", "remove", "resume_run", "stop",
           "stop_target"]
