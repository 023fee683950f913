"""LogFollower: only new complete lines, byte offsets, re-attach, truncation; read_tail."""

from __future__ import annotations

import os
import random
from pathlib import Path

from ltx_pipeline.trainer_log import LogFollower, LogParser, parse_lines, read_tail

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "trainer_logs"


def _append(path: Path, data: bytes) -> None:
    with open(path, "ab") as handle:
        handle.write(data)


def test_missing_file_yields_nothing_until_it_appears(tmp_path: Path) -> None:
    log = tmp_path / "train.log"
    follower = LogFollower(log)
    assert follower.read_new() == ([], 0)
    _append(log, b"first\n")
    assert follower.read_new() == (["first"], 6)


def test_partial_last_line_waits_for_its_newline(tmp_path: Path) -> None:
    log = tmp_path / "train.log"
    _append(log, b"INFO     Step 20/200 - Lo")
    follower = LogFollower(log)
    assert follower.read_new() == ([], 0)
    _append(log, "ss: 0.1\nnext 💾".encode())
    lines, offset = follower.read_new()
    assert lines == ["INFO     Step 20/200 - Loss: 0.1"]
    assert offset == len(b"INFO     Step 20/200 - Loss: 0.1\n")
    assert follower.read_new(final=True) == (["next 💾"], log.stat().st_size)


def test_reattach_from_stored_offset_returns_nothing_twice(tmp_path: Path) -> None:
    log = tmp_path / "train.log"
    _append(log, "a 🎥\nb\n".encode())
    lines, offset = LogFollower(log).read_new()
    _append(log, b"c\n")
    again, new_offset = LogFollower(log, offset).read_new()
    assert lines == ["a 🎥", "b"] and again == ["c"] and new_offset == log.stat().st_size


def test_truncated_file_restarts_at_zero(tmp_path: Path) -> None:
    log = tmp_path / "train.log"
    _append(log, b"old line one\nold line two\n")
    follower = LogFollower(log)
    follower.read_new()
    log.write_bytes(b"new\n")
    assert follower.read_new() == (["new"], 4)


def test_replaced_file_is_read_from_the_start(tmp_path: Path) -> None:
    log = tmp_path / "train.log"
    _append(log, b"x\n")
    follower = LogFollower(log)
    follower.read_new()
    replacement = tmp_path / "rotated"
    replacement.write_bytes(b"fresh 1\nfresh 2\n")
    os.replace(replacement, log)
    assert follower.read_new()[0] == ["fresh 1", "fresh 2"]


def test_invalid_utf8_and_crlf(tmp_path: Path) -> None:
    log = tmp_path / "train.log"
    _append(log, b"bad \xff byte\r\nok\n")
    assert LogFollower(log).read_new()[0] == ["bad \ufffd byte", "ok"]


def test_small_max_bytes_reads_everything_over_several_calls(tmp_path: Path) -> None:
    log = tmp_path / "train.log"
    _append(log, b"".join(f"line {i}\n".encode() for i in range(50)))
    follower = LogFollower(log)
    seen: list[str] = []
    for _ in range(100):
        lines, _offset = follower.read_new(max_bytes=64)
        if not lines:
            break
        seen.extend(lines)
    assert seen == [f"line {i}" for i in range(50)]


def test_following_a_log_written_in_random_chunks_parses_like_the_whole_file(tmp_path: Path) -> None:
    source = (FIXTURES / "happy_run_80col.log").read_bytes()
    log = tmp_path / "train.log"
    log.touch()
    rng = random.Random(7)
    follower, parser, events = LogFollower(log), LogParser(), []
    position = 0
    while position < len(source):
        step = rng.randint(1, 300)
        _append(log, source[position:position + step])
        position += step
        lines, _offset = follower.read_new()
        for line in lines:
            events.extend(parser.feed(line))
    events.extend(parser.flush())
    assert events == parse_lines(source.decode("utf-8").splitlines())


def test_read_tail(tmp_path: Path) -> None:
    log = tmp_path / "train.log"
    _append(log, b"".join(f"line {i}\n".encode() for i in range(1000)))
    assert read_tail(log, 3) == ["line 997", "line 998", "line 999"]
    assert read_tail(log, 5, max_bytes=30)[-1] == "line 999"
    assert all(line.startswith("line ") for line in read_tail(log, 100, max_bytes=50))
    assert read_tail(tmp_path / "missing.log") == []
