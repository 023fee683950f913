"""Line grammar of the LTX trainer's log: physical lines in, complete records and their events out.

This module owns the layout that Rich and the terminal impose on the trainer's messages: ANSI
codes, carriage-return redraws, the level column, the right-aligned ``file.py:NN`` location, the
``[rank N]`` prefix, terminal cell widths, and re-joining records that Rich wrapped over several
lines. ``LogParser`` is the stateful line → event parser and ``parse_lines`` its one-shot form; what
a re-joined message *means* is left to ``_messages``. Invariant: a parser holds at most one pending
record (or plain statistics block), so events come out in line order and each record yields its
events exactly once (a ``Step`` record as soon as it matches in full, any other record when the next
record, plain line or ``flush()`` completes it). Speed: Step records in the two layouts that make
up nearly all of a training log (one line, or an 80-column head wrapped after ``Time/Step:`` plus
its continuation) take a fast path of one strict regex per line with no level, location or joining
work, yielding exactly what the general path would; ``feed_lines`` parses a whole block into one
list. It imports ``_events`` and ``_messages``, never the other way round. Pure standard library.

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

import gc
import re
import unicodedata
from collections.abc import Iterable

from ltx_pipeline.trainer_log._events import ErrorSignal, Event, StepEvent
from ltx_pipeline.trainer_log._messages import (
    STATS_ITEM_LINE_RE,
    STEP_RE,
    message_events,
    stats_event,
    step_event,
)

# ERROR lines the trainer logs that are no failure: on a machine without a GPU its statistics ask nvidia-smi
# for GPU memory at every report and log this (ltx_trainer.gpu_utils; facts: CPU blocker 5).
_HARMLESS_ERRORS = ("Failed to get GPU memory from nvidia-smi",)

__all__ = ["LogParser", "parse_lines"]

_LEVEL_RE = re.compile(r"(DEBUG|INFO|WARNING|ERROR|CRITICAL)(?: +|$)")
_LOCATION_TOKEN_RE = re.compile(r"[\w.\-]+\.py:\d+")
_RANK_RE = re.compile(r"\[rank \d+\]\s*")
_ANSI_RE = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
_CONTINUATION = " " * 9
# The first line of a Step record, the bulk of a log: the whole record (groups 2-8 are STEP_RE's), or
# its head in an 80-column log, wrapped after "Time/Step:" (groups 6-8 absent; _STEP_TAIL_RE is the
# next line). Group 1 is the message; the match ends where the location starts. Stricter than the
# general path (INFO, single spaces, no ANSI, no carriage-return redraw, no rank prefix), so whatever
# it matches the general path reads the same way.
_STEP_LINE_RE = re.compile(
    r"INFO +(Step (\d+)/(\d+) - Loss: ([^,\s\x1b]+), LR: ([^,\s\x1b]+), Time/Step:"
    r"(?: ([\d.]+)s, Total Time: (?:(\d+)h (\d+)m|calculating\.\.\.))?) +(?=[\w.\-]+\.py:\d+ *[\r\n]*\Z)"
)
_STEP_TAIL_RE = re.compile(r" {9}([\d.]+)s, Total Time: (?:(\d+)h (\d+)m|calculating\.\.\.) *[\r\n]*\Z")
# ``feed_text``'s block form of the two fast-path layouts. Every line of a block (or both lines of a
# wrapped Step record) is one ``findall`` tuple, in order: groups 1-4 are the step, total, loss and LR,
# 5-7 the time fields of the one-line layout, 8-10 those of the wrapped one, and group 11 any other line
# (groups 1-10 then empty). Just as strict as _STEP_LINE_RE + _STEP_TAIL_RE; a block holding a carriage
# return is left to the line path.
_TOTAL_TIME = r"Total Time: (?:(\d+)h (\d+)m|calculating\.\.\.)"
_LOCATION = r"[\w.\-]+\.py:\d+"
_BLOCK_LINE_RE = re.compile(
    r"^INFO +Step (\d+)/(\d+) - Loss: ([^,\s\x1b]+), LR: ([^,\s\x1b]+), Time/Step:"
    rf"(?: ([\d.]+)s, {_TOTAL_TIME} +{_LOCATION}| +{_LOCATION} *\n {{9}}([\d.]+)s, {_TOTAL_TIME}) *\n"
    r"|^(.*)\n",
    re.MULTILINE,
)


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
    ``feed_lines`` is ``feed`` over a block of lines (the cheaper call), collecting the events in one list.
    """

    def __init__(self) -> None:
        self._open = False  # a Rich record is pending: indented lines continue it
        self._emitted = False  # its Step event is out already: its continuation lines carry nothing
        self._pieces: list[str] = []
        self._first_line = ""
        self._location_end = -1
        self._level = ""
        self._plain_stats: list[str] | None = None
        self._step_head: tuple[str, ...] | None = None  # a fast-path Step head still alone in its record

    def feed(self, line: str) -> list[Event]:
        """Parse one physical line (with or without its newline) and return any completed events."""
        return self.feed_lines((line,))

    def feed_lines(self, lines: Iterable[str]) -> list[Event]:
        """Parse physical lines in order: the events of ``feed`` on each, in one list."""
        out: list[Event] = []
        match_step = _STEP_LINE_RE.match
        for line in lines:
            # Step records first, inline: nearly every line of a training log is one.
            if line.startswith("INFO ") and (match := match_step(line)):
                groups = match.groups()
                if groups[5] is None:
                    self._start_step_head(line, match, out)
                    continue
                if self._open and not self._emitted:
                    self._finish_record(out)
                self._open = self._emitted = True
                out.append(step_event(*groups[1:]))
            elif self._step_head is not None and (tail := _STEP_TAIL_RE.match(line)):
                # Joined with its head (a piece with spaces, so never folded) it is a whole Step message.
                self._emitted = True
                out.append(step_event(*self._step_head, *tail.groups()))
                self._step_head = None
            else:
                self._feed(line, out)
        return out

    def feed_text(self, text: str) -> list[Event]:
        """Parse a block of whole lines (``LogFollower.read_text``): the events of ``feed_lines`` on its lines.

        One ``findall`` splits the block into Step records and other lines in C; only the other lines go
        through the line path, so a training log's bulk costs no per-line regex call or match object.
        """
        if "\r" in text:
            return self.feed_lines(_split_lines(text))
        if not text.endswith("\n"):
            text += "\n"  # a writer's last line (the trainer has exited)
        out: list[Event] = []
        # The cyclic collector is paused while the block's events are built: they are acyclic (freed by
        # reference counting), and its generation-0 passes over tens of thousands of new objects were an
        # eighth of the parse time. It is restored below even if parsing raises.
        collecting = gc.isenabled()
        gc.disable()
        try:
            self._feed_records(_BLOCK_LINE_RE.findall(text), out)
        finally:
            if collecting:
                gc.enable()
        return out

    def _feed_records(self, records: list[tuple[str, ...]], out: list[Event]) -> None:
        """``feed_text``'s loop over its ``findall`` tuples (Step records and other lines, in order)."""
        append = out.append
        others: list[str] = []  # lines since the last Step record, for the line path
        settled = False  # the parser's state is "a Step record open, its event out"
        totals: dict[str, int] = {}
        for step, total, loss, lr, seconds, hours, minutes, seconds2, hours2, minutes2, other in records:
            if not step:
                others.append(other)
                continue
            if others:
                out.extend(self.feed_lines(others))
                others = []
                settled = False
            if not settled:
                if self._open and not self._emitted:
                    self._finish_record(out)
                self._open = self._emitted = True
                settled = True
            # step_event inlined, and Total Time read once per distinct value: this loop is the log's bulk.
            if not seconds:
                seconds, hours, minutes = seconds2, hours2, minutes2
            if not hours:
                total_time = None
            elif (total_time := totals.get(key := f"{hours}h{minutes}")) is None:
                total_time = totals[key] = int(hours) * 3600 + int(minutes) * 60
            append(StepEvent(int(step), int(total), float(loss), float(lr), float(seconds), total_time))
        if others:
            out.extend(self.feed_lines(others))

    def flush(self) -> list[Event]:
        """Complete any pending record or plain statistics block and return its events."""
        out: list[Event] = []
        self._finish_record(out)
        self._finish_plain_stats(out)
        return out

    def _feed(self, line: str, out: list[Event]) -> None:
        """The general path: any line, in any layout."""
        line = line.rstrip("\r\n")
        if "\r" in line:
            # Carriage-return redraws (progress bars): only the last state was visible.
            line = line.rsplit("\r", 1)[-1]
        if "\x1b" in line:
            line = _ANSI_RE.sub("", line)
        level = _LEVEL_RE.match(line) if line[:1] in "DIWEC" else None
        if level:
            self._finish_record(out)
            self._start_record(line, level, out)
        elif self._open and line.startswith(_CONTINUATION):
            self._continue_record(line, out)
        else:
            self._finish_record(out)
            self._plain(line.rstrip(), out)

    def _start_step_head(self, line: str, match: re.Match[str], out: list[Event]) -> None:
        """Open the record of a Step head as ``_start_record`` would; it waits for its continuation."""
        self._finish_record(out)
        self._open, self._emitted = True, False
        self._level = "INFO"
        self._first_line = line
        self._location_end = match.end()
        self._pieces = [match.group(1)]
        self._step_head = match.group(2, 3, 4, 5)

    # -- Rich records ------------------------------------------------------------------------------

    def _start_record(self, line: str, level: re.Match[str], out: list[Event]) -> None:
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
        self._open = True
        self._emitted = False
        self._step_head = None
        if msg.startswith("Step"):
            self._try_eager_step(out)

    def _continue_record(self, line: str, out: list[Event]) -> None:
        if self._emitted:
            return
        self._step_head = None
        self._pieces.append(line[9:].rstrip())
        if self._pieces[0].startswith("Step"):
            self._try_eager_step(out)

    def _try_eager_step(self, out: list[Event]) -> None:
        match = STEP_RE.match(self._joined())
        if match:
            self._emitted = True
            out.append(step_event(*match.groups()))

    def _column_width(self) -> int | None:
        """Cells of the message column, known only when the first line carried a location."""
        if self._location_end < 0:
            return None
        return _cell_len(self._first_line[: self._location_end]) - 1 - 9

    def _joined(self) -> str:
        pieces = self._pieces
        text = pieces[0]
        for index in range(1, len(pieces)):
            # Rich folds only a word longer than the column, starting it on a fresh line: such a piece
            # is one word filling the column exactly. A piece with spaces that fills the column merely
            # ended at a word boundary, so the dropped space is restored.
            previous = pieces[index - 1]
            folded = " " not in previous and self._fills_column(index - 1)
            text += ("" if folded else " ") + pieces[index]
        return text

    def _fills_column(self, index: int) -> bool:
        """Whether physical line ``index`` of the record filled the message column (known with a location)."""
        width = self._column_width()
        if width is None:
            return False
        text = self._first_line[9: self._location_end].rstrip() if index == 0 else self._pieces[index]
        return _cell_len(text) >= width

    def _finish_record(self, out: list[Event]) -> None:
        if not self._open:
            return
        if not self._emitted:
            text = self._joined()
            events = message_events(text)
            out.extend(events)
            if (self._level in ("ERROR", "CRITICAL") and not any(isinstance(e, ErrorSignal) for e in events)
                    and not text.startswith(_HARMLESS_ERRORS)):
                out.append(ErrorSignal("logged_error", text))
        self._open = self._emitted = False
        self._pieces = []
        self._step_head = None

    # -- plain lines (stderr, typer.echo, wandb, tracebacks) ---------------------------------------

    def _plain(self, line: str, out: list[Event]) -> None:
        if self._plain_stats is not None:
            if STATS_ITEM_LINE_RE.match(line):
                self._plain_stats.append(line.strip())
                return
            self._finish_plain_stats(out)
        if not line:
            return
        if "Training Statistics:" in line and stats_event(line) is None:
            self._plain_stats = [line.strip()]
            return
        msg = line.strip()
        if msg.startswith("[rank "):
            msg = _RANK_RE.sub("", msg, count=1)
        if msg:
            out.extend(message_events(msg))

    def _finish_plain_stats(self, out: list[Event]) -> None:
        if self._plain_stats is None:
            return
        stats = stats_event(" ".join(self._plain_stats))
        self._plain_stats = None
        if stats:
            out.append(stats)


def _split_lines(text: str) -> list[str]:
    """A block's lines without their ``\\n`` (a block ends with one, except a writer's last line)."""
    lines = text.split("\n")
    if lines[-1] == "":
        lines.pop()
    return lines


def parse_lines(lines: Iterable[str]) -> list[Event]:
    """Parse a finished sequence of lines (a whole log or a tail) into events, flushing at the end."""
    parser = LogParser()
    events = parser.feed_lines(lines)
    events.extend(parser.flush())
    return events
