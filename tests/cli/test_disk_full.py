"""A full disk (#43 point 8) is one line, exit 5: what is full (with its free bytes), that nothing was lost, the fix.

SQLite's "database or disk is full" is real here: the store is capped at its current size (``PRAGMA
max_page_count``, SQLite's own SQLITE_FULL), so the next write that needs a page fails as on a full disk.
A file write's ENOSPC comes from ``fsync``; a PostgreSQL server's from its SQLSTATE (53100).
"""

from __future__ import annotations

import errno
import json
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from ltx_pipeline.cli import main
from ltx_pipeline.cli.disk_full import disk_full
from ltx_pipeline.errors import EXIT_NO_SPACE, BadInput
from tests.conftest import H100_SMI


def _cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


@pytest.fixture
def planned(capsys: pytest.CaptureFixture[str], workspace: Path, clips_dataset: Path,
            fake_smi: Callable[..., str]) -> list[str]:
    """A run stopped at its approval gate; the arguments that re-plan it (more steps: a new plan)."""
    args = ["run", "--workspace", str(workspace), "--run", "r1", "--dataset", str(clips_dataset), "--nvidia-smi",
            fake_smi(H100_SMI)]
    code, _, err = _cli(capsys, *args)
    assert code == 3, err
    return [*args, "--steps", "3000"]


def _cap_store_at_its_size(monkeypatch: pytest.MonkeyPatch) -> None:
    from ltx_pipeline.store import store

    configure = store._configure_sqlite

    def capped(dbapi_connection: Any, record: Any) -> None:
        configure(dbapi_connection, record)
        pages = dbapi_connection.execute("PRAGMA page_count").fetchone()[0]
        dbapi_connection.execute(f"PRAGMA max_page_count = {pages}")

    monkeypatch.setattr(store, "_configure_sqlite", capped)


def test_a_full_store_is_one_line_and_loses_nothing(capsys: pytest.CaptureFixture[str], workspace: Path,
                                                    planned: list[str], monkeypatch: pytest.MonkeyPatch) -> None:
    _cap_store_at_its_size(monkeypatch)

    code, _, err = _cli(capsys, *planned)

    assert code == EXIT_NO_SPACE == 5, err
    assert err.count("\n") == 1 and "Traceback" not in err and "Unexpected error" not in err
    store = workspace / "ltx-pipeline.db"
    assert err.startswith(f"error: The disk is full (database or disk is full) writing {store}; "
                          "nothing was lost: the store keeps its last committed state"), err
    assert f"({workspace}: " in err and " free)" in err
    assert err.rstrip().endswith("Fix: free space on that disk (or raise your quota), then run the command again "
                                 "(`ltx-pipeline resume` for a run).")
    assert not (workspace / "logs").exists()  # no crash log: there is nothing unexpected to trace
    monkeypatch.undo()
    assert _status(capsys, workspace)["name"] == "r1"  # the store reads as it was last committed
    assert _cli(capsys, *planned)[0] == 3  # space back: the same command goes on


def test_each_shape_of_no_space_is_recognised_and_nothing_else(tmp_path: Path) -> None:
    import sqlalchemy.exc

    store = tmp_path / "ltx-pipeline.db"
    wrapped = sqlalchemy.exc.OperationalError("INSERT INTO events ...", {}, sqlite3.OperationalError(
        "database or disk is full"))
    quota = OSError(errno.EDQUOT, "Disk quota exceeded", str(tmp_path / "r1" / "train.log"))

    class PostgresDiskFull(Exception):
        sqlstate = "53100"

    try:
        raise BadInput("Could not write x", where=str(tmp_path / "r1" / "plan.md")) from OSError(errno.ENOSPC, "full")
    except BadInput as exc:
        caused = exc
    for error, words in ((wrapped, f"writing {store};"), (quota, f"writing {tmp_path / 'r1' / 'train.log'};"),
                         (caused, f"writing {tmp_path / 'r1' / 'plan.md'};"),
                         (PostgresDiskFull("could not extend file"), "database server has no space left")):
        found = disk_full(error, tmp_path, store)
        assert found is not None and found.exit_code == 5 and words in found.line(), (error, found)
    assert disk_full(sqlite3.OperationalError("database is locked"), tmp_path, store) is None
    assert disk_full(OSError(errno.EACCES, "Permission denied"), tmp_path, store) is None
    try:  # an error of ours raised while a no-space error was being handled, but not caused by it
        try:
            raise OSError(errno.ENOSPC, "full")
        except OSError:
            raise BadInput("Unrelated") from None
    except BadInput as exc:
        assert disk_full(exc, tmp_path, store) is None


def _status(capsys: pytest.CaptureFixture[str], workspace: Path) -> dict[str, Any]:
    code, out, _ = _cli(capsys, "status", "--workspace", str(workspace), "--json")
    assert code == 0
    run: dict[str, Any] = json.loads(out)["runs"][0]
    return run
