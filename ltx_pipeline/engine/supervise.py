"""``python -m ltx_pipeline.engine.supervise EXIT_FILE -- ARGV...``: run a child and record how it ended.

The engine launches trainers through this tiny supervisor, detached in their own session, so the
exit status survives the engine: whoever checks later reads ``EXIT_FILE`` (``{"exit_code": N,
"signal": S}``, written atomically). A supervisor killed with its group leaves no file, which is
how a vanished trainer is recognised as crashed rather than finished. Standard library only, so it
starts fast; SIGINT and SIGTERM are passed on to the child, whose exit is then recorded.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys


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
    code = children[0].wait()
    exit_code = code if code >= 0 else 128 - code
    record = {"exit_code": exit_code, "signal": -code if code < 0 else None}
    tmp = f"{exit_file}.tmp.{os.getpid()}"
    with open(tmp, "w", encoding="utf-8") as handle:
        json.dump(record, handle)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(tmp, exit_file)
    return exit_code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
