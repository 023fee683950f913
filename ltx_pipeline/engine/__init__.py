"""The workflow engine: phase protocol, context, fingerprints, lifecycle, lock and drive loop."""

from ltx_pipeline.engine.context import RunContext
from ltx_pipeline.engine.phase import Phase, PhaseResult
from ltx_pipeline.engine.runner import DriveReport, Outcome, Runner, approve_plan

__all__ = ["DriveReport", "Outcome", "Phase", "PhaseResult", "RunContext", "Runner", "approve_plan"]
