"""A drive hands each phase this invocation's typed flags and the reporter, never a string-keyed bag."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import pytest

from ltx_pipeline.engine import PhaseResult, RunContext, Runner
from ltx_pipeline.engine.options import RunOptions
from ltx_pipeline.engine.outputs import PhaseOutputs
from ltx_pipeline.engine.reporting import SilentReporter, Snapshot
from ltx_pipeline.store import Store
from ltx_pipeline.workspace import Workspace


@dataclass
class Request:
    steps: int = 1


class Looked(PhaseOutputs):
    PHASE: ClassVar[str] = "probe"
    ok: bool


@dataclass
class Looking:
    """A phase that reports a count and keeps what it saw of the context."""

    name: str = "probe"
    heavy: bool = False
    seen: list[RunContext] = field(default_factory=list)
    outputs_type: ClassVar[type[Looked]] = Looked

    def fingerprint(self, ctx: RunContext) -> dict[str, Any]:
        return {"steps": ctx.request.steps}

    def run(self, ctx: RunContext) -> PhaseResult:
        self.seen.append(ctx)
        ctx.reporter.on_count("reading clips", 1, 2)
        return PhaseResult(Looked(ok=True))

    def summary(self, outputs: Looked) -> str:
        return "looked"


class Watching:
    shows_progress = True

    def __init__(self) -> None:
        self.counts: list[tuple[str, int, int]] = []

    def on_count(self, label: str, done: int, total: int) -> None:
        self.counts.append((label, done, total))

    def on_progress(self, snapshot: Snapshot) -> None:
        raise AssertionError("no training here")


@pytest.fixture
def store(workspace: Path):
    ws = Workspace.at(workspace)
    ws.create()
    opened = Store.open(ws.db_file)
    yield ws, opened
    opened.close()


def test_the_phase_reads_typed_flags_and_reports_to_the_reporter(store) -> None:
    ws, db = store
    phase, reporter = Looking(), Watching()
    run = db.create_run("r1", {})
    Runner(db, ws, [phase], options=RunOptions(detach=True, restart_training=True), reporter=reporter).drive(
        run, Request())
    [ctx] = phase.seen
    assert ctx.options == RunOptions(detach=True, apply_fix=False, restart_training=True)
    assert reporter.counts == [("reading clips", 1, 2)]


def test_without_options_or_a_reporter_every_flag_is_off_and_nothing_is_shown(store) -> None:
    ws, db = store
    phase = Looking()
    Runner(db, ws, [phase]).drive(db.create_run("r1", {}), Request())
    [ctx] = phase.seen
    assert ctx.options == RunOptions() and not (ctx.options.detach or ctx.options.apply_fix)
    assert isinstance(ctx.reporter, SilentReporter) and not ctx.reporter.shows_progress


def test_run_options_are_frozen() -> None:
    with pytest.raises(AttributeError):
        RunOptions().detach = True  # type: ignore[misc]
