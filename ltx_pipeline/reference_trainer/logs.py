"""Log output in ltx-trainer's layout: ``LEVEL    [rank N] message    file.py:NN`` on stdout.

Owns the ``ltxv_trainer`` logger set-up. Mirrors the trainer's rules (facts §4.1): INFO and
DEBUG on the main process, WARNING and above elsewhere; a ``[rank N] `` prefix when
``LOCAL_RANK`` is set; multi-line messages continue on lines indented by 9 spaces; the source
location closes the first line, as Rich prints it.
"""

from __future__ import annotations

import logging
import os
import sys

__all__ = ["get_logger", "is_main_process", "is_writer", "setup_logging"]

LOGGER_NAME = "ltxv_trainer"


class _TrainerFormatter(logging.Formatter):
    def __init__(self, rank_prefix: str) -> None:
        super().__init__()
        self._prefix = rank_prefix

    def format(self, record: logging.LogRecord) -> str:
        message = record.getMessage()
        first, *rest = (self._prefix + message).split("\n")
        location = f"{record.filename}:{record.lineno}"
        lines = [f"{record.levelname:<8} {first}    {location}"]
        lines += [" " * 9 + line for line in rest]
        if record.exc_info:
            lines.append(self.formatException(record.exc_info))
        return "\n".join(lines)


class _StdoutHandler(logging.StreamHandler):
    """Writes to whatever ``sys.stdout`` is now (so redirections made after set-up are honoured)."""

    @property
    def stream(self):  # noqa: ANN201
        return sys.stdout

    @stream.setter
    def stream(self, value) -> None:  # noqa: ANN001
        del value


def is_main_process() -> bool:
    """True when ``LOCAL_RANK`` is absent or "0", the trainer's definition."""
    return os.environ.get("LOCAL_RANK", "0") == "0"


def is_writer() -> bool:
    """True on the one process of the whole launch that writes outputs: global ``RANK`` absent or "0".

    Over several nodes every node has a ``LOCAL_RANK`` 0 that logs (its node's log shows the steps),
    but only global rank 0 writes into the shared ``output_dir``.
    """
    return os.environ.get("RANK", "0") == "0"


def setup_logging() -> logging.Logger:
    """Configure the ``ltxv_trainer`` logger once for this process and return it."""
    logger = logging.getLogger(LOGGER_NAME)
    if getattr(logger, "_reference_configured", False):
        return logger
    rank = os.environ.get("LOCAL_RANK")
    handler = _StdoutHandler()
    handler.setFormatter(_TrainerFormatter(f"[rank {rank}] " if rank is not None else ""))
    logger.handlers[:] = [handler]
    logger.setLevel(logging.DEBUG if is_main_process() else logging.WARNING)
    logger.propagate = False
    logger._reference_configured = True  # type: ignore[attr-defined]
    return logger


def get_logger() -> logging.Logger:
    """The trainer logger, configured on first use."""
    return setup_logging()
