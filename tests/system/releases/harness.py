"""A workspace made by an earlier release: one run in each state a user can leave a run in.

Every run is made by the release's own CLI in a subprocess (``releases.export.release_env``), on the
simulated backend with real mp4 clips, so the store, the run folders, the Optuna study and any trainer
still running are that release's work. ``build`` returns which run holds which state, and the states the
release could not make with the reason (an older release lacks an option, say), so the test checks what
exists and the report says what did not.
"""

from __future__ import annotations

import json
import os
import re
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

import psutil
import yaml

from tests.system.releases.export import release_env

# The release's CLI, whatever its entry points: every release has had ``cli.main(argv) -> int``.
_MAIN = "import sys; from ltx_pipeline.cli import main; sys.exit(main(sys.argv[1:]))"
AWAITING, FINISHED, LIVE, KILLED, CHAINED, FAILED_FIX, CONTINUED, PREPROCESSED = (
    "awaiting", "finished", "live", "killed", "chained", "failedfix", "continued", "preprocessed")
ASSUMED_GPU = "NVIDIA H100 80GB HBM3,81559"
STEP_SECONDS_SCALE = "0.01"  # the surface's 3.37 s step -> ~34 ms: slow enough to catch a trainer mid-run


@dataclass
class Release:
    """An exported release and the commands run with it."""

    tree: Path
    cwd: Path
    log: list[str] = field(default_factory=list)

    @property
    def surface(self) -> Path:
        return self.tree / "benchmarks" / "surfaces" / "h100_80gb.yaml"

    def cli(self, *args: str, scale: str = "0", timeout: float = 240) -> subprocess.CompletedProcess[str]:
        env = release_env(self.tree)
        env["LTX_SIMULATED_TIME_SCALE"] = scale
        done = subprocess.run([sys.executable, "-c", _MAIN, *args], capture_output=True, text=True, env=env,
                              cwd=self.cwd, timeout=timeout, check=False)
        self.log.append(f"$ ltx-pipeline {' '.join(args)}  -> exit {done.returncode}\n{done.stderr[-2000:]}")
        return done

    @cached_property
    def options(self) -> frozenset[str]:
        """The options this release's ``run`` takes, read from its ``--help``."""
        return frozenset(re.findall(r"--[a-z][a-z-]*", self.cli("run", "--help").stdout))


@dataclass
class Made:
    """Run name per state made, and the reason for each state the release could not make."""

    runs: dict[str, str] = field(default_factory=dict)
    missing: dict[str, str] = field(default_factory=dict)


def write_dataset(root: Path, n: int = 3) -> Path:
    """Real mp4 clips (121 frames of 64x64 with sound) and their metadata file."""
    from ltx_pipeline.ltx.sample_clips import write_clip

    (root / "videos").mkdir(parents=True, exist_ok=True)
    clip = write_clip(root / "videos" / "c0.mp4", 121, 64, 64, audio=True)
    for i in range(1, n):
        (root / "videos" / f"c{i}.mp4").write_bytes(clip.read_bytes())
    rows = [{"caption": f"a fox {i}", "video": f"videos/c{i}.mp4"} for i in range(n)]
    (root / "dataset.json").write_text(json.dumps(rows))
    return root / "dataset.json"


def oom_surface(release: Release, folder: Path) -> Path:
    """The release's surface with the planned baseline (bf16, adamw, batch 1, checkpointing) out of memory
    and its 8-bit-optimizer twin fitting, so training fails at step 1 and proposes that fix."""
    surface = yaml.safe_load(release.surface.read_text())
    wanted = {"quantization": None, "optimizer_type": "adamw", "batch_size": 1, "enable_gradient_checkpointing": True}
    baseline = next(p for p in surface["points"] if p["knobs"] == wanted)
    twin = {**wanted, "optimizer_type": "adamw8bit"}
    surface["points"] = [p for p in surface["points"] if p is not baseline and p["knobs"] != twin]
    surface["points"].append({**baseline, "knobs": twin})
    path = folder / "oom-surface.yaml"
    path.write_text(yaml.safe_dump(surface))
    return path


def _train_pid(workspace: Path, run: str) -> int:
    db = sqlite3.connect(f"file:{workspace / 'ltx-pipeline.db'}?mode=ro", uri=True)
    try:
        row = db.execute("SELECT p.pid FROM processes p JOIN runs r ON r.id = p.run_id WHERE r.name = ? AND "
                         "p.kind = 'train' ORDER BY p.id DESC LIMIT 1", (run,)).fetchone()
    finally:
        db.close()
    if row is None:
        raise LookupError(f"run {run} recorded no train process")
    return int(row[0])


def _alive(pid: int) -> bool:
    try:
        status: str = psutil.Process(pid).status()
    except psutil.NoSuchProcess:
        return False
    return status != "zombie"  # psutil.STATUS_ZOMBIE (psutil ships no types)


def _wait(condition: str, check: Callable[[], bool], timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out waiting for {condition}")
        time.sleep(0.05)


def _checkpoints(run_folder: Path) -> list[Path]:
    """Training checkpoints (the trials' own, under overfit/, are not the run's)."""
    return sorted(run_folder.glob("outputs/**/checkpoints/*.safetensors"))


class Builder:
    """Makes each state with the release's CLI; a state the release cannot make is recorded, not raised."""

    def __init__(self, release: Release, workspace: Path, dataset: Path, scratch: Path) -> None:
        self.release, self.workspace, self.dataset, self.scratch = release, workspace, dataset, scratch
        self.made = Made()

    def _run(self, name: str, *extra: str, steps: int = 40, scale: str = "0", surface: Path | None = None,
             approve: bool = True) -> subprocess.CompletedProcess[str]:
        # Releases before the simulated backend (b2920f4) plan for an assumed GPU and stop at the plan.
        where = (["--backend", "simulated", "--surface", str(surface or self.release.surface)]
                 if "--surface" in self.release.options else ["--assume-gpu", ASSUMED_GPU])
        args = ["run", "--workspace", str(self.workspace), "--run", name, "--dataset", str(self.dataset), *where,
                "--steps", str(steps), *(["--approve"] if approve else []), *extra]
        return self.release.cli(*args, scale=scale)

    def _can(self, state: str, *options: str) -> bool:
        lacking = [o for o in options if o not in self.release.options]
        if lacking:
            self.made.missing[state] = f"`run` has no {', '.join(lacking)} in this release"
        return not lacking

    def _interval(self, steps: int) -> tuple[list[str], int]:
        """Checkpoints every 50 steps where the option exists; else the template's 250, with more steps."""
        if "--checkpoint-interval" in self.release.options:
            return ["--checkpoint-interval", "50"], steps
        return [], steps + 250

    def _expect(self, state: str, name: str, done: subprocess.CompletedProcess[str], *codes: int) -> bool:
        if done.returncode in codes:
            self.made.runs[state] = name
            return True
        self.made.missing[state] = (f"exit {done.returncode} (wanted {codes}): "
                                    f"{(done.stderr.strip().splitlines() or ['no stderr'])[-1]}")
        return False

    def _unmake(self, state: str, why: str) -> None:
        self.made.runs.pop(state, None)
        self.made.missing[state] = why

    def _trainer(self, state: str, name: str) -> int | None:
        try:
            return _train_pid(self.workspace, name)
        except LookupError as missing:
            self._unmake(state, f"{missing}: this release has no training phase")
            return None

    def finished(self) -> None:
        self._expect(FINISHED, FINISHED, self._run(FINISHED), 0)

    def preprocessed(self) -> None:
        """A finished run on the reference backend, whose toy trainer really preprocesses (the simulated one never
        does): the one that shows whether an upgrade preprocesses again."""
        if not self._can(PREPROCESSED, "--backend", "--buckets"):
            return
        quick = [*(["--autotune", "off"] if "--autotune" in self.release.options else []),
                 *(["--skip-eval"] if "--skip-eval" in self.release.options else [])]
        args = ["run", "--workspace", str(self.workspace), "--run", PREPROCESSED, "--dataset", str(self.dataset),
                "--backend", "reference", "--assume-gpu", ASSUMED_GPU, "--buckets", "64x64x17", "--steps", "4",
                "--rank", "4", "--approve", *quick]
        done = self.release.cli(*args, timeout=400)
        if self._expect(PREPROCESSED, PREPROCESSED, done, 0) and not any(
                (self.workspace / PREPROCESSED).glob("**/.precomputed*")):
            self._unmake(PREPROCESSED, "the reference run finished without a .precomputed folder")

    def awaiting(self) -> None:
        self._expect(AWAITING, AWAITING, self._run(AWAITING, approve=False), 3)

    def failed_with_fix(self) -> None:
        """Training out of memory at step 1, its proposed fix in failure.json (autotune off: a sweep would
        route around the OOM by itself)."""
        if not self._can(FAILED_FIX, "--surface", "--autotune"):
            return
        done = self._run(FAILED_FIX, "--autotune", "off", surface=oom_surface(self.release, self.scratch))
        proposal = self.workspace / FAILED_FIX / "failure.json"
        if self._expect(FAILED_FIX, FAILED_FIX, done, 1) and not proposal.is_file():
            self._unmake(FAILED_FIX, "training failed but no failure.json (no proposed fix) was written")

    def continued(self) -> None:
        """A finished run continued by ``run --steps`` (more steps from its final weights)."""
        if not self._can(CONTINUED, "--surface") or not self._expect(CONTINUED, CONTINUED, self._run(CONTINUED), 0):
            return
        more = self.release.cli("run", "--workspace", str(self.workspace), "--run", CONTINUED, "--steps", "80",
                                "--approve")
        if self._expect(CONTINUED, CONTINUED, more, 0) and not re.search(
                r"^continued_from:\n- ", (self.workspace / CONTINUED / "run.yaml").read_text(), re.MULTILINE):
            self._unmake(CONTINUED, "`run --steps 80` on a finished run retrains from the start in this release "
                                    "(no continuation: run.yaml has no continued_from)")

    def chained(self) -> None:
        """A chained run whose first stage finished detached: the second is not launched yet."""
        if not self._can(CHAINED, "--surface", "--detach", "--strategy"):
            return
        done = self._run(CHAINED, "--strategy", "chain", "--buckets", "512x288x49;960x544x49", "--detach")
        if self._expect(CHAINED, CHAINED, done, 0) and (pid := self._trainer(CHAINED, CHAINED)) is not None:
            _wait("the chained run's first stage to end", lambda: not _alive(pid))

    def killed(self) -> None:
        """A detached trainer SIGKILLed (its whole process group) after its first checkpoint."""
        if not self._can(KILLED, "--surface", "--detach"):
            return
        interval, steps = self._interval(400)
        done = self._run(KILLED, *interval, "--detach", steps=steps, scale=STEP_SECONDS_SCALE)
        if self._expect(KILLED, KILLED, done, 0) and (pid := self._trainer(KILLED, KILLED)) is not None:
            _wait("the first checkpoint", lambda: len(_checkpoints(self.workspace / KILLED)) >= 1)
            time.sleep(0.3)
            os.killpg(pid, signal.SIGKILL)
            _wait("the killed trainer to go", lambda: not _alive(pid), timeout=10)

    def live(self) -> None:
        """A detached trainer still training when the upgrade happens (made last: it lasts ~20 s)."""
        if not self._can(LIVE, "--surface", "--detach"):
            return
        interval, steps = self._interval(900)
        done = self._run(LIVE, *interval, "--detach", steps=steps, scale=STEP_SECONDS_SCALE)
        if self._expect(LIVE, LIVE, done, 0) and self._trainer(LIVE, LIVE) is not None:
            _wait("the live run's first checkpoint", lambda: len(_checkpoints(self.workspace / LIVE)) >= 1)

    def build(self) -> Made:
        for make in (self.finished, self.preprocessed, self.awaiting, self.failed_with_fix, self.continued,
                     self.chained, self.killed, self.live):
            make()
        return self.made
