"""Follow a running (or finished) training: parse its log from the stored offset, record what it did.

Owns the bridge from the trainer's log and output folder to the journal: new log lines are read
from the offset stored with the process (so a re-attach continues where the last follower stopped
and nothing is parsed twice), step events go to the store in one batch per poll (deduplicated by
step; ``clean=False`` for steps whose time includes a validation pass or a checkpoint save),
checkpoint pairs are discovered on disk as well as from log lines, and a log that stops growing
for ``LTX_PIPELINE_STALL_SECONDS`` (default 900) is reported once as stalled. Liveness is the
journal handle's pid plus start time. The offset is stored after the batch it covers, so an engine
killed in between re-reads at most one poll's lines, and storing them again is idempotent.
``follow`` waits between polls adaptively (longer while the log is silent, short again once it
grows) and checks liveness less often while the log grows; the output folders are listed again only
when their modification time changed, the log grew or a checkpoint was half-written, and progress is
reported only when something it shows changed, so following a slow trainer costs little CPU; a dead
trainer, a stall or Ctrl-C is still noticed within about two seconds.
"""

from __future__ import annotations

import json
import math
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from ltx_pipeline.checkpoints.discovery import CheckpointPair, checkpoint_pairs
from ltx_pipeline.engine.reporting import Snapshot
from ltx_pipeline.env_names import STALL_SECONDS_ENV as STALL_ENV
from ltx_pipeline.trainer_log import (
    LogFollower,
    LogParser,
    StepEvent,
    TrainingProgress,
    parse_lines,
    read_tail,
)
from ltx_pipeline.workspace import atomic_write

if TYPE_CHECKING:
    from ltx_pipeline.engine.journal import ProcessHandle, RunJournal

__all__ = ["DEFAULT_STALL_SECONDS", "STALL_ENV", "Snapshot", "TrainingFollower", "latest_sample", "log_summary",
           "request_stop", "stall_seconds", "stop_requested"]

DEFAULT_STALL_SECONDS = 900.0
_SAMPLE_SUFFIXES = (".mp4", ".png", ".wav", ".gif")
_Listing = TypeVar("_Listing")


def stall_seconds() -> float:
    """The stall threshold: ``$LTX_PIPELINE_STALL_SECONDS`` or 900 s."""
    try:
        return float(os.environ.get(STALL_ENV, "") or DEFAULT_STALL_SECONDS)
    except ValueError:
        return DEFAULT_STALL_SECONDS


def latest_sample(output_dir: Path) -> str | None:
    """The newest validation sample file in ``<output_dir>/samples`` (by step in its name, then mtime)."""
    folder = output_dir / "samples"
    if not folder.is_dir():
        return None
    found = [p for p in folder.iterdir() if p.suffix in _SAMPLE_SUFFIXES and p.is_file()]
    return str(max(found, key=lambda p: (p.name, p.stat().st_mtime))) if found else None


class TrainingFollower:
    """Follows one trainer process of one stage through its journal handle."""

    def __init__(self, journal: RunJournal, handle: ProcessHandle, *, stage: int, stages: int, output_dir: Path,
                 offset: int | None = None, total_steps: int | None = None, validation_interval: int | None = None,
                 checkpoint_interval: int | None = None, on_progress: Callable[[Snapshot], None] | None = None,
                 warn: Callable[[str], None] | None = None, poll_s: float = 0.5, max_poll_s: float = 1.5,
                 alive_every_s: float = 2.0, stall_s: float | None = None) -> None:
        self.journal, self.handle = journal, handle
        self.stage, self.stages, self.output_dir = stage, stages, output_dir
        self.reader = LogFollower(handle.log_path, handle.log_offset if offset is None else offset)
        self.parser = LogParser()
        # The config's steps until the log says its own total: a trainer that logs no step line (a run shorter
        # than its logging interval) still ends on a full bar, never "0/?".
        self.progress = TrainingProgress(total_steps, validation_interval=validation_interval,
                                         checkpoint_interval=checkpoint_interval)
        self.on_progress, self.warn = on_progress, warn
        self.poll_s, self.max_poll_s, self.alive_every_s = poll_s, max(poll_s, max_poll_s), alive_every_s
        self.stall_s = stall_seconds() if stall_s is None else stall_s
        self.stalled = False
        self._last_growth = _mtime(Path(handle.log_path)) or time.time()
        self._known_checkpoints: set[int] = set()
        self._checkpoints = _FolderScan(output_dir / "checkpoints",
                                        lambda folder: checkpoint_pairs(folder, complete_only=False))
        self._samples = _FolderScan(output_dir / "samples", lambda folder: latest_sample(folder.parent))
        self._reported: tuple[Any, ...] | None = None

    def seed(self, metrics: list[dict[str, Any]]) -> None:
        """Fill progress with the steps stored before a re-attach (their log lines are behind the offset)."""
        for row in metrics:
            if row.get("loss") is not None:
                self.progress.losses[row["step"]] = row["loss"]
            if row.get("clean") and row.get("step_time_s") is not None:
                self.progress.step_times[row["step"]] = row["step_time_s"]
            self.progress.last_step = max(self.progress.last_step or 0, row["step"])

    def poll(self) -> bool:
        """Read what is new, record it, report progress; returns whether the trainer is still alive."""
        alive = self.handle.alive()
        self._round(alive)
        return alive

    def follow(self) -> ProcessHandle:
        """Poll until the trainer ends; returns the handle settled by the journal (exit code or crashed).

        The wait between rounds starts at ``poll_s``, doubles while the log is silent up to ``max_poll_s``
        and drops back when it grows, so a trainer that logs every few seconds costs few wake-ups. Liveness
        (several /proc reads) is checked on every silent round, and at least every ``alive_every_s`` while
        the log grows: a trainer that died is seen within about ``max_poll_s`` of its last line.
        """
        delay, grew, alive, checked_at = self.poll_s, False, True, -math.inf
        while True:
            now = time.monotonic()
            if not grew or now - checked_at >= self.alive_every_s:
                alive, checked_at = self.handle.alive(), now
            grew = self._round(alive)
            if not alive:
                return self.handle
            delay = self.poll_s if grew else min(delay * 2, self.max_poll_s)
            self.handle.pause(delay)  # woken early when the trainer's supervisor exits

    def _round(self, alive: bool) -> bool:
        """One poll with the trainer's liveness known; returns whether the log grew."""
        grew = self._read(alive)
        # A grown log or an ended trainer re-lists the folders whatever their mtime says (a shared
        # filesystem may cache it); a half-written checkpoint is looked at until it is complete.
        pending = any(pair.state is None for pair in self._pairs())
        folders_changed = self._checkpoints.refresh(force=grew or not alive or pending) | self._samples.refresh(
            force=grew or not alive)
        self._discover_checkpoints()
        was_stalled = self.stalled
        self._check_stall(alive)
        if self.on_progress is not None and (grew or folders_changed or not alive or self.stalled != was_stalled
                                             or self._reported is None):
            snapshot = self.snapshot(alive)
            shown = _shown(snapshot)
            if shown != self._reported:  # a silent round changes nothing on the bar: no redraw
                self._reported = shown
                self.on_progress(snapshot)
        return grew

    def _read(self, alive: bool) -> bool:
        """Parse and record every complete new line, one store batch per block read; True if there were any."""
        grew = False
        while True:
            text, offset = self.reader.read_text(final=not alive)
            events = self.parser.feed_text(text)
            if not alive and not text:
                events += self.parser.flush()
            self._record(events)
            if not text:
                return grew
            grew = True
            self._last_growth = time.time()
            self.journal.set_offset(self.handle, offset)

    def snapshot(self, alive: bool) -> Snapshot:
        progress = self.progress
        checkpoint = progress.latest_checkpoint
        if not self._checkpoints.scanned:
            self._checkpoints.refresh()
        if not self._samples.scanned:
            self._samples.refresh()
        pairs = self._checkpoints.value
        latest_ckpt = str(pairs[-1].weights) if pairs else (checkpoint.path if checkpoint else None)
        sample = self._samples.value
        losses = progress.last_losses(5)
        return Snapshot(self.stage, self.stages, progress.last_step, progress.total_steps, progress.percent,
                        losses[-1] if losses else None, losses, progress.steady_step_time(), progress.eta_seconds(),
                        latest_ckpt, sample, progress.wandb_url, alive, self.stalled,
                        finished=progress.stats is not None)

    # -- recording ---------------------------------------------------------------------------------

    def _record(self, events: list[Any]) -> None:
        rows: dict[int, dict[str, Any]] = {}
        for event in events:
            self.progress.update(event)
            if isinstance(event, StepEvent):
                rows[event.step] = {"step": event.step, "loss": event.loss, "learning_rate": event.lr,
                                    "step_time_s": event.step_time}
        for step, row in rows.items():
            row["clean"] = step in self.progress.step_times
        if rows:
            self.journal.add_metrics(self.stage, list(rows.values()))

    def _pairs(self) -> list[CheckpointPair]:
        """Every checkpoint pair of the last listing, half-written ones included."""
        pairs: list[CheckpointPair] = self._checkpoints.value or []
        return pairs

    def _discover_checkpoints(self) -> None:
        for pair in self._pairs():
            if pair.state is not None and pair.step not in self._known_checkpoints:
                self.journal.add_checkpoint(self.stage, pair.step, str(pair.weights), str(pair.state))
                self._known_checkpoints.add(pair.step)

    def _check_stall(self, alive: bool) -> None:
        silent = time.time() - self._last_growth
        stalled = alive and silent >= self.stall_s
        if stalled and getattr(self.handle, "waiting", lambda: False)():
            self._last_growth, stalled = time.time(), False  # a job waiting in the queue for its nodes is no stall
        if stalled and not self.stalled and self.warn is not None:
            self.warn(f"Training stage {self.stage} stalled: no new log output for {silent:.0f} s "
                      f"({self.handle.log_path}); the trainer is still alive (pid {self.handle.pid})")
        self.stalled = stalled


def log_summary(log_path: Path | str, lines: int = 400) -> dict[str, Any]:
    """What the tail of a trainer log says now: latest step, losses, steady step time, ETA, W&B URL.

    Read-only and cheap (the last ``lines`` lines); ``status`` uses it with no driver running.
    """
    tail = read_tail(log_path, lines)
    progress = TrainingProgress()
    progress.feed(parse_lines(tail))
    last_line = next((ln.strip() for ln in reversed(tail) if ln.strip()), None)
    stats = progress.stats
    step, source = progress.last_step, "Step lines"  # type: tuple[int | None, str | None]
    if step is None:  # with --disable-progress-bars the trainer logs a Step line only every 20 steps
        marks = [e.step for e in progress.checkpoints] + [e.step for e in progress.validations]
        step, source = (max(marks), "checkpoint and validation lines") if marks else (None, None)
    return {"step": step, "step_source": source, "total": progress.total_steps, "percent": progress.percent,
            "last_losses": progress.last_losses(5), "step_time_s": progress.steady_step_time(),
            "eta_s": progress.eta_seconds(), "wandb_url": progress.wandb_url, "last_line": last_line,
            "finished": stats is not None,
            "peak_gpu_memory_gb": stats.peak_gpu_memory_gb if stats else None,
            "steps_per_second": stats.steps_per_second if stats else None}


def _shown(snapshot: Snapshot) -> tuple[Any, ...]:
    """What a progress display shows of a snapshot (the ETA to the second it is printed with)."""
    eta = None if snapshot.eta_s is None else int(snapshot.eta_s)
    return (snapshot.stage, snapshot.step, snapshot.total, snapshot.loss, snapshot.step_time_s, eta,
            snapshot.latest_checkpoint, snapshot.latest_sample, snapshot.wandb_url, snapshot.alive, snapshot.stalled,
            snapshot.finished)


class _FolderScan(Generic[_Listing]):
    """A folder listing redone only when the folder's mtime changes, when forced, or every ``max_age_s``.

    Creating, renaming or removing an entry changes a directory's mtime, so between a trainer's saves
    every poll costs one ``stat`` instead of a listing and a ``stat`` per file. The periodic listing
    covers what an mtime can miss: two changes within one timestamp tick, a network filesystem's cache.
    """

    def __init__(self, folder: Path, scan: Callable[[Path], _Listing], max_age_s: float = 10.0) -> None:
        self.folder, self.scan, self.max_age_s = folder, scan, max_age_s
        self.scanned = False
        self.value: _Listing | None = None
        self._stamp: int | None = None
        self._scanned_at = -math.inf

    def refresh(self, *, force: bool = False) -> bool:
        """List the folder again if needed; returns whether what it holds changed."""
        try:
            stamp: int | None = self.folder.stat().st_mtime_ns
        except OSError:
            stamp = None
        now = time.monotonic()
        if not (force or not self.scanned or stamp != self._stamp or now - self._scanned_at >= self.max_age_s):
            return False
        value = self.scan(self.folder)
        changed = not self.scanned or value != self.value
        self.value, self._stamp, self.scanned, self._scanned_at = value, stamp, True, now
        return changed


def _mtime(path: Path) -> float | None:
    try:
        return path.stat().st_mtime
    except OSError:
        return None


def _stop_marker(handle: ProcessHandle) -> Path:
    return Path(f"{handle.log_path}.stop")


def request_stop(handle: ProcessHandle, workspace: Path) -> Path:
    """Mark the process as stopped by the user *before* signalling it, so a follower that sees it end
    records a stop rather than a failure (whichever of the two settles first)."""
    marker = _stop_marker(handle)
    atomic_write(marker, json.dumps({"process_id": handle.id, "pid": handle.pid}), root=workspace)
    return marker


def stop_requested(handle: ProcessHandle) -> bool:
    """Whether ``request_stop`` marked this very process (the log is shared by a stage's launches)."""
    try:
        marker = json.loads(_stop_marker(handle).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return isinstance(marker, dict) and marker.get("process_id") == handle.id
