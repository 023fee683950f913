"""Detached launches: liveness by pid and start time, exit records that survive the engine, stop."""

from __future__ import annotations

import os
import signal
import sys
import time
from pathlib import Path

from ltx_pipeline.engine.processes import exit_record, is_alive, launch_detached, stop_group, wait_exit

SLEEPER = [sys.executable, "-c", "import time, sys; print('up', flush=True); time.sleep(60)"]


def test_exit_code_is_recorded_by_the_supervisor(tmp_path: Path) -> None:
    log, exit_file = tmp_path / "logs" / "x.log", tmp_path / "x.exit"
    launched = launch_detached([sys.executable, "-c", "print('hello'); raise SystemExit(3)"], cwd=tmp_path,
                               env_overrides={"PYTHONUNBUFFERED": "1"}, log_path=log, exit_file=exit_file)
    assert wait_exit(launched.pid, launched.create_time, launched.host, 30)
    assert exit_record(exit_file) == {"exit_code": 3, "signal": None}
    assert "hello" in log.read_text()


def test_liveness_needs_the_same_start_time_and_stop_interrupts_the_group(tmp_path: Path) -> None:
    exit_file = tmp_path / "s.exit"
    launched = launch_detached(SLEEPER, cwd=tmp_path, env_overrides={}, log_path=tmp_path / "s.log",
                               exit_file=exit_file)
    assert is_alive(launched.pid, launched.create_time, launched.host)
    deadline = time.monotonic() + 30
    while "up" not in (tmp_path / "s.log").read_text() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not is_alive(launched.pid, launched.create_time + 10, launched.host)  # a reused pid is not ours
    assert not is_alive(launched.pid, launched.create_time, "another-host")
    assert stop_group(launched.pid, launched.create_time, launched.host, interrupt_timeout=10) == "SIGINT"
    record = exit_record(exit_file)
    assert record is not None and record["exit_code"] != 0  # KeyboardInterrupt in the child


def test_a_killed_group_leaves_no_exit_record(tmp_path: Path) -> None:
    exit_file = tmp_path / "k.exit"
    launched = launch_detached(SLEEPER, cwd=tmp_path, env_overrides={}, log_path=tmp_path / "k.log",
                               exit_file=exit_file)
    os.killpg(launched.pid, signal.SIGKILL)
    assert wait_exit(launched.pid, launched.create_time, launched.host, 10)
    assert exit_record(exit_file) is None


def test_a_followers_pause_ends_when_the_local_process_exits(tmp_path) -> None:
    """A follower's nap ends at the supervisor's exit (pidfd), not at the end of its back-off."""
    import subprocess
    import sys
    import time

    from ltx_pipeline.engine.processes import pause_unless_exit

    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(0.5)"])  # noqa: S603
    started = time.monotonic()
    pause_unless_exit(child.pid, 60)
    woke = time.monotonic() - started
    child.wait()
    assert woke < 30, f"the pause lasted {woke:.1f}s although the process ended after 0.5s"
    started = time.monotonic()
    pause_unless_exit(child.pid, 60)  # a pid that is gone: no wait at all
    assert time.monotonic() - started < 30
