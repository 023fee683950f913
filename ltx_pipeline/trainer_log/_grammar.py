"""Line grammar of the LTX trainer's log: physical lines in, complete records and their events out.

This module owns the layout that Rich and the terminal impose on the trainer's messages: ANSI
codes, carriage-return redraws, the level column, the right-aligned ``file.py:NN`` location, the
``[rank N]`` prefix, terminal cell widths, and re-joining records that Rich wrapped over several
lines. ``LogParser`` is the stateful line → event parser and ``parse_lines`` its one-shot form; what
a re-joined message *means* is left to ``_messages``. Invariant: a parser holds at most one pending
record (or plain statistics block), so events come out in line order and each record yields its
events exactly once (a ``Step`` record as soon as it matches in full, any other record when the next
record, plain line or ``flush()`` completes it). It imports ``_events`` and ``_messages``, never the
other way round. Pure standard library.

Layout facts the parser relies on (Rich ``RichHandler(show_time=False, markup=True)``, stdout not a TTY):

- A record starts with the level padded to 9 columns (``"INFO     "``); its message may be wrapped
  over several physical lines, each continuation indented by 9 spaces and padded to the width.
- The source location sits right-aligned on the *first* physical line only.
- Rich wraps at whitespace (the space is dropped) but *folds* a word longer than the message column
  mid-word; a folded piece is a single word filling the column exactly, so it is re-joined without
  a space.
- With ``markup=True`` the ``[rank N] `` format prefix is eaten as a markup tag, leaving a leading
  space; both forms are accepted.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable

from ltx_pipeline.trainer_log._events import ErrorSignal, Event
from ltx_pipeline.trainer_log._messages import (
    STATS_ITEM_LINE_RE,
    STEP_RE,
    message_events,
    stats_event,
    step_event,
)

__all__ = ["LogParser", "parse_lines"]

_LEVEL_RE = re.compile(r"(DEBUG|INFO|WARNING|ERROR|CRITICAL)(?: +|$)")
_LOCATION_TOKEN_RE = re.compile(r"[\w.\-]+\.py:\d+")
_RANK_RE = re.compile(r"\[rank \d+\]\s*")
_ANSI_RE = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
_CONTINUATION = " " * 9


def _cell_len(text: str) -> int:
    """Terminal cell width as Rich counts it (wide emoji = 2, VS16 widens its base char)."""
    if text.isascii():
        return len(text)
    width = 0
    previous = 0
    for ch in text:
        if ch == "\ufe0f":
            if previous == 1:
                width += 1
                previous = 2
            continue
        if unicodedata.combining(ch) or unicodedata.category(ch) in ("Mn", "Me", "Cf"):
            continue
        previous = 2 if unicodedata.east_asian_width(ch) in ("W", "F") else 1
        width += previous
    return width


class LogParser:
    """Stateful line → event parser that re-joins Rich-wrapped records.

    Feed physical lines in order; a Rich record is complete when the next record or a plain line
    starts, or on ``flush()``. ``Step`` records are emitted as soon as they match in full, so live
    progress never waits for the next line; other records (checkpoint, validation, stats) surface
    when the next line arrives. Call ``flush()`` once the trainer has exited, or whenever pending
    events are needed now, accepting that a record whose continuation lines are not yet written would
    be parsed without them. Keep one parser per followed file so records split across reads re-join.
    """

    def __init__(self) -> None:
        self._pieces: list[str] = []
        self._first_line = ""
        self._location_end = -1
        self._level = ""
        self._line_widths: list[int] = []
        self._emitted = False
        self._plain_stats: list[str] | None = None

    def feed(self, line: str) -> list[Event]:
        """Parse one physical line (with or without its newline) and return any completed events."""
        line = line.rstrip("\r\n")
        if "\r" in line:
            # Carriage-return redraws (progress bars): only the last state was visible.
            line = line.rsplit("\r", 1)[-1]
        if "\x1b" in line:
            line = _ANSI_RE.sub("", line)
        level = _LEVEL_RE.match(line) if line[:1] in "DIWEC" else None
        if level:
            events = self._finish_record()
            events.extend(self._start_record(line, level))
            return events
        if self._pieces and line.startswith(_CONTINUATION):
            self._pieces.append(line[9:].rstrip())
            self._line_widths.append(_cell_len(line[9:].rstrip()))
            if not self._emitted and self._pieces[0].startswith("Step"):
                return self._try_eager_step()
            return []
        events = self._finish_record()
        events.extend(self._plain(line.rstrip()))
        return events

    def flush(self) -> list[Event]:
        """Complete any pending record or plain statistics block and return its events."""
        events = self._finish_record()
        events.extend(self._finish_plain_stats())
        return events

    # -- Rich records ------------------------------------------------------------------------------

    def _start_record(self, line: str, level: re.Match[str]) -> list[Event]:
        self._level = level.group(1)
        body = line.rstrip()
        # The location is the last space-separated token; rfind avoids a regex scan of the padding.
        cut = body.rfind(" ")
        has_location = cut >= 9 and _LOCATION_TOKEN_RE.fullmatch(body, cut + 1) is not None
        self._first_line = body
        self._location_end = cut + 1 if has_location else -1
        msg = body[level.end():cut] if has_location else body[level.end():]
        if msg.startswith("[rank "):
            msg = _RANK_RE.sub("", msg, count=1)
        msg = msg.strip()
        self._pieces = [msg]
        self._line_widths = [-1]
        self._emitted = False
        if msg.startswith("Step"):
            return self._try_eager_step()
        return []

    def _try_eager_step(self) -> list[Event]:
        match = STEP_RE.match(self._joined())
        if match:
            self._emitted = True
            return [step_event(match)]
        return []

    def _column_width(self) -> int | None:
        """Cells of the message column, known only when the first line carried a location."""
        if self._location_end < 0:
            return None
        return _cell_len(self._first_line[: self._location_end]) - 1 - 9

    def _joined(self) -> str:
        if len(self._pieces) == 1:
            return self._pieces[0]
        width = self._column_width()
        first_text = self._first_line[9: self._location_end].rstrip() if width is not None else ""
        widths = [_cell_len(first_text)] + self._line_widths[1:]
        text = self._pieces[0]
        for index in range(1, len(self._pieces)):
            # Rich folds only a word longer than the column, starting it on a fresh line: such a piece
            # is one word filling the column exactly. A piece with spaces that fills the column merely
            # ended at a word boundary, so the dropped space is restored.
            previous = self._pieces[index - 1]
            folded = width is not None and widths[index - 1] >= width and " " not in previous
            text += ("" if folded else " ") + self._pieces[index]
        return text

    def _finish_record(self) -> list[Event]:
        if not self._pieces:
            return []
        events: list[Event] = []
        if not self._emitted:
            text = self._joined()
            events = message_events(text)
            if self._level in ("ERROR", "CRITICAL") and not any(isinstance(e, ErrorSignal) for e in events):
                events.append(ErrorSignal("logged_error", text))
        self._pieces = []
        self._emitted = False
        return events

    # -- plain lines (stderr, typer.echo, wandb, tracebacks) ---------------------------------------

    def _plain(self, line: str) -> list[Event]:
        if self._plain_stats is not None:
            if STATS_ITEM_LINE_RE.match(line):
                self._plain_stats.append(line.strip())
                return []
            events = self._finish_plain_stats()
        else:
            events = []
        if not line:
            return events
        if "Training Statistics:" in line and stats_event(line) is None:
            self._plain_stats = [line.strip()]
            return events
        msg = line.strip()
        if msg.startswith("[rank "):
            msg = _RANK_RE.sub("", msg, count=1)
        events.extend(message_events(msg) if msg else [])
        return events

    def _finish_plain_stats(self) -> list[Event]:
        if self._plain_stats is None:
            return []
        stats = stats_event(" ".join(self._plain_stats))
        self._plain_stats = None
        return [stats] if stats else []


def parse_lines(lines: Iterable[str]) -> list[Event]:
    """Parse a finished sequence of lines (a whole log or a tail) into events, flushing at the end."""
    parser = LogParser()
    events: list[Event] = []
    for line in lines:
        events.extend(parser.feed(line))
    events.extend(parser.flush())
    return events
