"""The parser's fast paths, the batched API and the cheaper follow loop change no result.

The reference is the general path alone (every line through ``LogParser._feed``, which handles any
layout); the fast paths for Step records must give exactly its events on the real fixture logs and on
generated logs that mix every shape near them (wrapped anywhere, CRLF, ANSI, rank prefixes, other
levels, heads whose continuation never comes).
"""

from __future__ import annotations

import dataclasses
import random
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from ltx_pipeline.trainer_log import Event, LogFollower, LogParser, StepEvent, TrainingProgress, parse_lines
from ltx_pipeline.training import follow as follow_module
from ltx_pipeline.training.follow import TrainingFollower

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "trainer_logs"
LOCATIONS = ("trainer.py:311", "validation_runner.py:612", "trainer.py:963")


def _reference(lines: list[str]) -> list[str]:
    """The general path alone, line by line (no Step fast path, no batching), as ``_seen`` shows it."""
    parser = LogParser()
    out: list[Event] = []
    for line in lines:
        parser._feed(line, out)
    out.extend(parser.flush())
    return _seen(out)


def _seen(events: list[Event]) -> list[str]:
    """Events compared by their repr: every field and the type, and a NaN loss equals a NaN loss."""
    return [repr(event) for event in events]


def _rich(msg: str, width: int, level: str = "INFO", loc: str = "trainer.py:311") -> list[str]:
    """``msg`` laid out as Rich does: wrapped at spaces, long words folded, location on the first line."""
    column = width - 9 - len(loc) - 1
    rows: list[str] = []
    current = ""
    for word in msg.split(" "):
        while len(word) > column:  # folded: a word longer than the column fills whole lines
            if current:
                rows.append(current)
                current = ""
            rows.append(word[:column])
            word = word[column:]
        if not current:
            current = word
        elif len(current) + 1 + len(word) <= column:
            current += " " + word
        else:
            rows.append(current)
            current = word
    rows.append(current)
    first = f"{level:<8} {rows[0]:<{column}} {loc}"
    return [first] + [" " * 9 + f"{row:<{column}}" + " " * (len(loc) + 1) for row in rows[1:]]


def _step_message(rng: random.Random, step: int) -> str:
    loss = rng.choice(["0.4123", "nan", "inf", "1.2e-3", f"{rng.random():.4f}"])
    total = rng.choice(["2h 5m", "0h 27m", "calculating...", "12h 0m"])
    lr = rng.choice(["1.00e-04", "9.10e-05"])
    return (f"Step {step}/{rng.choice([200, 2000, 100000])} - Loss: {loss}, LR: {lr}, "
            f"Time/Step: {rng.choice(['3.46', '52.87', '0.5'])}s, Total Time: {total}")


def _other_record(rng: random.Random, step: int) -> str:
    return rng.choice([
        f"🎥 Validation samples for step {step} saved in samples",
        f"💾 Lora weights for step {step} saved in checkpoints/lora_weights_step_{step:05d}.safetensors",
        "Removed old checkpoint: /home/alice/ltx/outputs/my_concept_lora/checkpoints/"
        "lora_weights_step_00050.safetensors",
        "🚀 Starting training...",
        "Offloading optimizer state to CPU (1.3 GB)",
        "Training state saved to checkpoints/training_state_step_00100.pt",
    ])


def _odd_step_lines(rng: random.Random, step: int) -> list[str]:
    """Step-like lines the fast path must leave to the general path (or read identically)."""
    msg = _step_message(rng, step)
    return rng.choice([
        [f"DEBUG    {msg}     trainer.py:311"],
        [f"INFO     [rank 0] {msg}     trainer.py:311"],
        [f"INFO      {msg}     trainer.py:311"],  # markup ate the rank prefix: a leading space
        [f"INFO     {msg}     trainer.py:311\r\n"],
        [f"INFO     {msg}\t    trainer.py:311"],
        [f"\x1b[32mINFO\x1b[0m     {msg}     trainer.py:311"],
        [f"INFO     {msg}"],  # no location
        [f"INFO     {msg.replace('Loss: ', 'Loss:  ')}     trainer.py:311"],
        [f"Progress 1/2\rINFO     {msg}     trainer.py:311"],
        # A head whose continuation never comes, or comes in another shape.
        [f"INFO     {msg.split(' Time/Step:')[0]}, Time/Step:     trainer.py:311"],
        [f"INFO     {msg.split(' Time/Step:')[0]}, Time/Step:     trainer.py:311",
         "          3.46s, Total Time: 2h 5m     "],
        [f"INFO     {msg.split(' Time/Step:')[0]}, Time/Step:     trainer.py:311",
         "         3.46s, Total Time: 2h 5m\t"],
        [f"INFO     {msg.split(' Time/Step:')[0]}, Time/Step:     trainer.py:311",
         "         3.46s,", "         Total Time: 2h 5m"],
        [f"INFO     {msg.split(' Time/Step:')[0]}, Time/Step:     trainer.py:311",
         "         3.46s, Total Time: 2h 5m        \r\n", "         more continuation"],
        [f"INFO     {msg.split(' Time/Step:')[0]}, Time/Step:     trainer.py:311", ""],
    ])


def _generated_log(seed: int, records: int = 600) -> list[str]:
    rng = random.Random(seed)
    lines: list[str] = []
    for index in range(records):
        step = 20 * (index + 1)
        kind = rng.random()
        width = rng.choice([80, 80, 120, 160, 200, 50])
        if kind < 0.55:
            lines += _rich(_step_message(rng, step), width)
        elif kind < 0.7:
            lines += _odd_step_lines(rng, step)
        elif kind < 0.85:
            lines += _rich(_other_record(rng, step), width, level=rng.choice(["INFO", "DEBUG", "ERROR"]),
                           loc=rng.choice(LOCATIONS))
        else:
            lines += rng.choice([
                ["wandb: 🚀 View run at https://wandb.ai/team/project/runs/abc123"],
                ["📊 Training Statistics:", " - Total time: 1.5 minutes", " - Training speed: 0.55 steps/second",
                 " - Samples/second: 0.55", " - Peak GPU memory: 20.00 GB"],
                ["torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB."],
                [f"step {step}/2000 - loss: 0.1, lr: 1e-4, time/step: 1.0s, total time: 0h 1m"],
                ["", "   ", "Traceback (most recent call last):"],
            ])
    return lines


def _fixture_logs() -> list[Path]:
    return sorted(p for p in FIXTURES.rglob("*") if p.is_file())


@pytest.mark.parametrize("path", _fixture_logs(), ids=lambda p: str(p.relative_to(FIXTURES)))
def test_fixture_logs_parse_as_the_general_path_reads_them(path: Path) -> None:
    lines = path.read_text(encoding="utf-8").splitlines()
    assert _seen(parse_lines(lines)) == _reference(lines)
    assert _seen(parse_lines(line + "\n" for line in lines)) == _reference(lines)


@pytest.mark.parametrize("seed", range(8))
def test_generated_logs_parse_as_the_general_path_reads_them(seed: int) -> None:
    lines = _generated_log(seed)
    expected = _reference(lines)
    assert sum(e.startswith("StepEvent(") for e in expected) > 300
    assert _seen(parse_lines(lines)) == expected
    # Any batching, and single-line feed, gives the same events.
    rng = random.Random(seed)
    parser, events, start = LogParser(), [], 0
    while start < len(lines):
        end = start + rng.randint(0, 40)
        events += parser.feed(lines[start]) if end == start else parser.feed_lines(lines[start:end])
        start = max(end, start + 1)
    assert _seen(events + parser.flush()) == expected


def _fed_as_text(lines: list[str], rng: random.Random) -> list[str]:
    """The lines joined into blocks cut at random line boundaries, as ``LogFollower.read_text`` returns them."""
    parser, events, start = LogParser(), [], 0
    while start < len(lines):
        end = min(len(lines), start + rng.randint(1, 60))
        events += parser.feed_text("".join(line.rstrip("\r\n") + "\n" for line in lines[start:end]))
        start = end
    return _seen(events + parser.flush())


@pytest.mark.parametrize("seed", range(8))
def test_blocks_of_text_parse_as_the_general_path_reads_their_lines(seed: int) -> None:
    lines = [line.rstrip("\r\n") for line in _generated_log(seed)]
    expected = _reference(lines)
    rng = random.Random(seed)
    assert _fed_as_text(lines, rng) == expected
    # The bulk of a real log: long runs of Step records in both fast layouts, a few other records between.
    bulk: list[str] = []
    for index in range(400):
        bulk += _rich(_step_message(rng, 20 * (index + 1)), rng.choice([80, 200, 200]))
        if rng.random() < 0.05:
            bulk += _rich(_other_record(rng, 20 * (index + 1)), 80, loc=rng.choice(LOCATIONS))
    assert _fed_as_text(bulk, rng) == _reference(bulk)


@pytest.mark.parametrize("path", _fixture_logs(), ids=lambda p: str(p.relative_to(FIXTURES)))
def test_fixture_logs_read_as_text_blocks_parse_as_their_lines(path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    lines = text.splitlines()
    parser = LogParser()
    assert _seen(parser.feed_text(text) + parser.flush()) == _reference(lines)


def test_a_block_with_carriage_returns_takes_the_line_path() -> None:
    step = _rich("Step 60/2000 - Loss: 0.3502, LR: 7.30e-05, Time/Step: 3.44s, Total Time: 0h 16m", 200)[0]
    text = f"Progress 1/2\r{step}\n{step}\r\n"
    parser = LogParser()
    assert _seen(parser.feed_text(text) + parser.flush()) == _reference(text.split("\n")[:-1])


def test_each_total_time_in_a_block_is_read_as_written() -> None:
    """1h 15m and 11h 5m are different totals even though their digits are the same."""
    lines = [_rich(f"Step {20 * i}/200 - Loss: 0.5, LR: 1.00e-04, Time/Step: 3.00s, Total Time: {total}", 200)[0]
             for i, total in enumerate(["1h 15m", "11h 5m", "1h 15m", "0h 0m"], start=1)]
    events = LogParser().feed_text("\n".join(lines) + "\n")
    assert [e.total_time_s for e in events if isinstance(e, StepEvent)] == [4500, 39900, 4500, 0]


def test_the_common_step_layouts_give_their_events() -> None:
    step = "Step 60/2000 - Loss: 0.3502, LR: 7.30e-05, Time/Step: 3.44s, Total Time: 0h 16m"
    wide = _rich(step, 200)
    narrow = _rich(step, 80)
    assert len(wide) == 1 and len(narrow) == 2 and narrow[0].split()[-2:] == ["Time/Step:", "trainer.py:311"]
    event = StepEvent(60, 2000, 0.3502, 7.3e-05, 3.44, 960)
    parser = LogParser()
    assert parser.feed_lines(wide) == [event]
    assert parser.feed(narrow[0]) == [] and parser.feed(narrow[1]) == [event]
    # A head that is never continued is an ordinary record: no step, and the next record still counts.
    validation = _rich("🎥 Validation samples for step 60 saved in samples", 80)
    assert _seen(parse_lines([narrow[0], *validation])) == _reference([narrow[0], *validation])
    assert [type(e).__name__ for e in parse_lines([narrow[0], *validation])] == ["ValidationSaved"]


def test_progress_from_batched_and_per_event_folding_agree() -> None:
    events = parse_lines(_generated_log(3)) + parse_lines((FIXTURES / "grad_accum.log").read_text().splitlines())
    batched, single = TrainingProgress(validation_interval=100), TrainingProgress(validation_interval=100)
    batched.feed(events)
    for event in events:
        single.update(event)
    assert repr(vars(batched)) == repr(vars(single))


def test_step_event_is_still_a_frozen_value_dataclass() -> None:
    event = StepEvent(20, 200, 0.5, 1e-4, 3.0, None)
    assert event == StepEvent(step=20, total=200, loss=0.5, lr=1e-4, step_time=3.0, total_time_s=None)
    assert hash(event) == hash(StepEvent(20, 200, 0.5, 1e-4, 3.0, None))
    assert repr(event) == "StepEvent(step=20, total=200, loss=0.5, lr=0.0001, step_time=3.0, total_time_s=None)"
    assert dataclasses.asdict(event)["step_time"] == 3.0
    assert dataclasses.replace(event, step=40).step == 40
    with pytest.raises(dataclasses.FrozenInstanceError):
        event.step = 1  # type: ignore[misc]


def test_follower_skips_the_open_while_the_file_is_unchanged(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    log = tmp_path / "train.log"
    log.write_bytes(b"a\r\nb\n")
    follower = LogFollower(log)
    assert follower.read_new() == (["a", "b"], 5)
    opened: list[Any] = []
    real_open = open
    monkeypatch.setattr("builtins.open", lambda *a, **k: opened.append(a) or real_open(*a, **k))
    assert follower.read_new() == ([], 5) and opened == []
    monkeypatch.undo()
    with open(log, "ab") as handle:
        handle.write(b"c\n")
    assert follower.read_new() == (["c"], 7)
    replacement = tmp_path / "new"
    replacement.write_bytes(b"123456\n")  # the same size as the offset, but another file
    replacement.replace(log)
    assert follower.read_new() == (["123456"], 7)


# -- TrainingFollower.follow: adaptive waits, cheap liveness ------------------------------------------


class _Handle(SimpleNamespace):
    def alive(self) -> bool:
        self.alive_calls += 1
        return bool(self.alive_plan.pop(0)) if self.alive_plan else False

    def pause(self, seconds: float) -> None:
        follow_module.time.sleep(seconds)  # the test's clock (ProcessHandle.pause also wakes at an exit)


class _Journal:
    def __init__(self) -> None:
        self.metrics: list[dict[str, Any]] = []
        self.offsets: list[int] = []

    def add_metrics(self, stage: int, rows: list[dict[str, Any]]) -> None:
        self.metrics += rows

    def set_offset(self, handle: Any, offset: int) -> None:
        self.offsets.append(offset)

    def add_checkpoint(self, *args: Any) -> None:
        pass


def _follower(tmp_path: Path, writes: dict[int, Any], alive_plan: list[bool],
              monkeypatch: pytest.MonkeyPatch) -> tuple[TrainingFollower, _Handle, list[float]]:
    """A follower whose clock is its sleeps; ``writes[n]`` is appended to the log before sleep number n."""
    log = tmp_path / "train.log"
    log.write_text("")
    handle = _Handle(log_path=log, log_offset=0, pid=1, alive_calls=0, alive_plan=list(alive_plan))
    clock = [1000.0]
    sleeps: list[float] = []

    def sleep(seconds: float) -> None:
        sleeps.append(seconds)
        clock[0] += seconds
        if callable(action := writes.get(len(sleeps))):
            action()  # something the trainer does besides logging (a checkpoint, a sample)
        elif action is not None:
            with open(log, "a", encoding="utf-8") as out:
                out.write(action)

    monkeypatch.setattr(follow_module.time, "sleep", sleep)
    monkeypatch.setattr(follow_module.time, "monotonic", lambda: clock[0])
    monkeypatch.setattr(follow_module.time, "time", lambda: clock[0])
    follower = TrainingFollower(_Journal(), handle, stage=1, stages=1, output_dir=tmp_path, stall_s=5.0)
    return follower, handle, sleeps


def test_follow_backs_off_while_silent_and_resets_when_the_log_grows(tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    step = _rich("Step 20/200 - Loss: 0.5000, LR: 1.00e-04, Time/Step: 3.00s, Total Time: 0h 10m", 120)[0] + "\n"
    follower, handle, sleeps = _follower(tmp_path, {4: step}, [True] * 8, monkeypatch)
    follower.follow()
    assert sleeps[:6] == [1.0, 1.5, 1.5, 1.5, 0.5, 1.0]
    assert max(sleeps) <= 1.5  # a dead trainer, a stall and Ctrl-C are noticed within ~1.5 s
    assert [row["step"] for row in follower.journal.metrics] == [20]


def test_follow_checks_liveness_less_often_while_the_log_grows(tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    line = _rich("Step 20/200 - Loss: 0.5000, LR: 1.00e-04, Time/Step: 3.00s, Total Time: 0h 10m", 120)[0] + "\n"
    follower, handle, sleeps = _follower(tmp_path, {n: line for n in range(1, 12)}, [True] * 5, monkeypatch)
    follower.follow()
    # Rounds 2-12 read a line each, 0.5 s apart; they check liveness at most every 2 s (3 times), then
    # the silent rounds check every time until the trainer is dead.
    assert sleeps[1:11] == [0.5] * 10
    assert handle.alive_calls == 6 and len(sleeps) + 1 == 15


def test_follow_reads_the_last_partial_line_of_a_dead_trainer(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    step = "Step 40/200 - Loss: 0.2500, LR: 1.00e-04, Time/Step: 3.00s, Total Time: 0h 10m"
    follower, handle, sleeps = _follower(tmp_path, {1: _rich(step, 120)[0]}, [True, False], monkeypatch)
    assert follower.follow() is handle
    assert [row["step"] for row in follower.journal.metrics] == [40] and len(sleeps) == 1


def test_follow_reports_a_stall(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    warnings: list[str] = []
    follower, _handle, sleeps = _follower(tmp_path, {}, [True] * 7, monkeypatch)
    follower.warn = warnings.append
    follower._last_growth = 1000.0
    follower.follow()
    assert len(warnings) == 1 and "stalled" in warnings[0]


def test_follow_reports_progress_only_when_what_it_shows_changes(tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    step = _rich("Step 20/200 - Loss: 0.5000, LR: 1.00e-04, Time/Step: 3.00s, Total Time: 0h 10m", 120)[0] + "\n"
    follower, _handle, sleeps = _follower(tmp_path, {4: step}, [True] * 8, monkeypatch)
    shown: list[tuple[int | None, bool]] = []
    follower.on_progress = lambda snapshot: shown.append((snapshot.step, snapshot.alive))
    follower.follow()
    # Ten rounds, three of them with news: the start, the step, the trainer's end.
    assert len(sleeps) == 9 and shown == [(None, True), (20, True), (20, False)]


def test_follow_finds_checkpoints_and_samples_written_between_log_lines(tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    checkpoints, samples = tmp_path / "checkpoints", tmp_path / "samples"
    weights, state = checkpoints / "lora_weights_step_00020.safetensors", checkpoints / "training_state_step_00020.pt"

    def half_saved() -> None:  # the weights and an empty state file: a save still going on
        checkpoints.mkdir()
        weights.write_bytes(b"w")
        state.write_bytes(b"")

    def sample() -> None:
        samples.mkdir()
        (samples / "step_000020_1.mp4").write_bytes(b"v")

    recorded: list[int] = []
    follower, _handle, _sleeps = _follower(tmp_path, {2: half_saved, 4: lambda: state.write_bytes(b"s"), 5: sample},
                                           [True] * 7, monkeypatch)
    follower.journal.add_checkpoint = lambda stage, step, *paths: recorded.append(step)
    shown: list[tuple[str | None, str | None]] = []
    follower.on_progress = lambda snapshot: shown.append((snapshot.latest_checkpoint, snapshot.latest_sample))
    follower.follow()
    # The log never grew: the folders' mtimes and the unfinished state file brought the news.
    assert recorded == [20]
    assert shown[-1] == (str(weights), str(samples / "step_000020_1.mp4"))
    assert (str(weights), None) in shown
