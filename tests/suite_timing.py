"""The suite's own wall time, printed as the run's last line, so each suite can be held to its goal.

``.ci/run`` reads these lines (one per pytest run of the README's command) and reports the default
suite's time against its goal (under 6 minutes on 2 cores) and the real-trainer suite's time.
"""

from __future__ import annotations

import time
from typing import Any

import pytest

LINE_PREFIX = "suite wall time:"
_STARTED = pytest.StashKey[float]()


def pytest_configure(config: pytest.Config) -> None:
    config.stash[_STARTED] = time.monotonic()


@pytest.hookimpl(trylast=True)
def pytest_unconfigure(config: pytest.Config) -> None:
    """``suite wall time: 312 s (-m 'not real_trainer', 2 workers, 1370 tests)``, after pytest's own summary.

    xdist workers print nothing: the controller's clock spans the whole run.
    """
    reporter: Any = config.pluginmanager.get_plugin("terminalreporter")
    if reporter is None or hasattr(config, "workerinput") or _STARTED not in config.stash:
        return
    seconds = time.monotonic() - config.stash[_STARTED]
    workers = len(getattr(config.option, "tx", None) or []) if getattr(config.option, "numprocesses", 0) else 0
    tests = sum(1 for key in ("passed", "failed", "skipped", "error") for report in reporter.stats.get(key, [])
                if report.when == "call" or (report.when == "setup" and report.skipped))
    marks = config.getoption("markexpr") or ""
    reporter.write_line(f"{LINE_PREFIX} {seconds:.0f} s (-m {marks!r}, "
                        f"{f'{workers} workers' if workers else 'no workers'}, {tests} tests)")
