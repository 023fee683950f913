"""``python -m ltx_pipeline.engine.supervise EXIT_FILE -- ARGV...``: run a child and record how it ended.

The engine launches trainers through this tiny supervisor, detached in their own session, so the
exit status survives the engine: whoever checks later reads ``EXIT_FILE`` (``{"exit_code": N,
"signal": S}``, written atomically). A supervisor killed with its group leaves no file, which is
how a vanished trainer is recognised as crashed rather than finished. Standard library only, so it
starts fast; SIGINT and SIGTERM are passed on to the child, whose exit is then recorded.

On a store shared by several hosts (``LTX_PIPELINE_STORE`` is a PostgreSQL URL) it also writes a
heartbeat into its own process row every ``LTX_PIPELINE_HEARTBEAT_S`` seconds (default 10), through
psycopg (imported only then), so ``status`` on any host can tell a live remote trainer from a lost one.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading

from ltx_pipeline.env_names import HEARTBEAT_ENV, HOST_ID_ENV, STORE_ENV


def main(argv: list[str]) -> int:
    if len(argv) < 3 or argv[1] != "--":
        print("usage: python -m ltx_pipeline.engine.supervise EXIT_FILE -- ARGV...", file=sys.stderr)
        return 2
    exit_file, command = argv[0], argv[2:]
    children: list[subprocess.Popen[bytes]] = []

    def forward(signum: int, _frame: object) -> None:
        for child in children:
            try:
                child.send_signal(signum)
            except ProcessLookupError:
                pass

    # Installed before the child starts, so an early stop is passed on rather than killing us silently.
    signal.signal(signal.SIGINT, forward)
    signal.signal(signal.SIGTERM, forward)
    children.append(subprocess.Popen(command))  # noqa: S603 - argv list handed over by the engine
    done = threading.Event()
    store = os.environ.get(STORE_ENV, "")
    if store.startswith("postgresql"):
        threading.Thread(target=_heartbeat, args=(store, done), daemon=True).start()
    code = children[0].wait()
    done.set()
    exit_code = code if code >= 0 else 128 - code
    record = {"exit_code": exit_code, "signal": -code if code < 0 else None}
    tmp = f"{exit_file}.tmp.{os.getpid()}"
    with open(tmp, "w", encoding="utf-8") as handle:
        json.dump(record, handle)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(tmp, exit_file)
    return exit_code


def _heartbeat(store_url: str, done: threading.Event) -> None:
    """Mark this supervisor's process row alive until the child ends; best effort (a blip is retried)."""
    import socket

    interval = float(os.environ.get(HEARTBEAT_ENV, "") or 10.0)
    host = os.environ.get(HOST_ID_ENV) or socket.gethostname()
    conninfo = store_url.replace("postgresql+psycopg://", "postgresql://", 1)
    connection = None
    while not done.is_set():
        try:
            import psycopg

            if connection is None or connection.closed:
                connection = psycopg.connect(conninfo, autocommit=True, connect_timeout=10)
            connection.execute("UPDATE processes SET heartbeat_at = now() WHERE host = %s AND pid = %s "
                               "AND status = 'running'", (host, os.getpid()))
        except Exception:  # noqa: BLE001 - the server may be briefly away: the next beat retries
            connection = None
        done.wait(interval)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
