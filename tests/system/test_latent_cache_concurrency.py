"""Issue 44, done when: two runs started together on the same new data encode each key once; a SIGKILL
during a cache fill, then ``resume``: nothing that finished is encoded twice, nothing half-written is used.

The engines are real ``ltx-pipeline run`` processes on the reference backend, sharing one toy base model
(``--model-path``) so that their keys agree. A ``sitecustomize`` module on their PYTHONPATH (test code, not
the product) holds an engine at the start of its cache fill until the test lets both go at once, or stops
the toy's ``process_dataset`` half-way through writing its second clip, where the test kills it. What each
process encoded is read back from the toy's own ``Wrote N latents, ...; kept K existing files`` lines.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ltx_pipeline.backends.base import LaunchSpec
from ltx_pipeline.engine.journal import RunJournal
from ltx_pipeline.store import Store, saved_id
from tests.conftest import H100_SMI
from tests.reference_trainer.conftest import write_dataset

REPO = Path(__file__).resolve().parents[2]
ENGINE = [sys.executable, "-c", "from ltx_pipeline.cli import main; main()"]

HOOK = '''
import importlib.abc, importlib.util, os, pathlib, random, sys, time


def _barrier(module):
    """Hold the engine at the start of its fill until the test writes ``go`` (both engines then race)."""
    fill = module.fill_from_cache

    def held(ctx, *args, **kwargs):
        folder = pathlib.Path(os.environ["FILL_BARRIER"])
        (folder / (ctx.paths.root.name + ".ready")).write_text(str(os.getpid()))
        while not (folder / "go").exists():
            time.sleep(0.001)
        return fill(ctx, *args, **kwargs)

    module.fill_from_cache = held


def _slow_claims(module):
    """Each claim a little slower, by a varying amount (as on a busy network file system): two fills released at
    once then claim their keys interleaved, taking turns at random, unless they take their claims one after the
    other."""
    claim = module.EntryStore.claim

    def slow(self, key, **kwargs):
        time.sleep(random.uniform(0.0, 0.05))
        return claim(self, key, **kwargs)

    module.EntryStore.claim = slow


def _pause(module):
    """torch in the toy process_dataset: its 4th file (the second clip's latents) is half-written to its
    temporary name when the test is told, and the process waits to be killed (what a SIGKILL mid-write leaves)."""
    import io
    save, calls = module.save, []

    def half(obj, handle, *args, **kwargs):
        calls.append(1)
        if len(calls) < 4:
            return save(obj, handle, *args, **kwargs)
        data = io.BytesIO()
        save(obj, data, *args, **kwargs)
        handle.write(data.getvalue()[: len(data.getvalue()) // 2])
        handle.flush()
        pathlib.Path(os.environ["PAUSE_MARKER"]).write_text(str(os.getpid()))
        time.sleep(300)

    module.save = half


_TARGETS = {"ltx_pipeline.preprocessing.from_cache": ("FILL_BARRIER", _barrier),
            "ltx_pipeline.cache.entries": ("FILL_BARRIER", _slow_claims),
            "torch": ("PAUSE_MARKER", _pause)}


class _PatchOnImport(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        env, patch = _TARGETS.get(name, (None, None))
        if env is None or not os.environ.get(env):
            return None
        if name == "torch" and not sys.argv[0].endswith("preprocess.py"):
            return None  # only the process_dataset script pauses
        sys.meta_path.remove(self)
        try:
            spec = importlib.util.find_spec(name)
        finally:
            sys.meta_path.insert(0, self)
        load = spec.loader.exec_module

        def exec_module(module):
            load(module)
            patch(module)

        spec.loader.exec_module = exec_module
        return spec


sys.meta_path.insert(0, _PatchOnImport())
'''

WROTE = re.compile(r"Wrote (?P<counts>.*?) to (?P<out>\S+); kept (?P<kept>\d+) existing files")


@pytest.fixture(scope="module")
def kit(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """One toy base model (its file shared by every run: the keys name its content), a fake nvidia-smi and
    the hook folder."""
    from ltx_pipeline.reference_trainer import make_base

    root = tmp_path_factory.mktemp("kit")
    base = root / "base.safetensors"
    assert make_base.main([str(base)]) == 0
    smi = root / "bin" / "nvidia-smi"
    smi.parent.mkdir()
    smi.write_text(f"#!{sys.executable}\nimport sys\nsys.stdout.write({H100_SMI!r})\n")
    smi.chmod(0o755)
    hooks = root / "hooks"
    hooks.mkdir()
    (hooks / "sitecustomize.py").write_text(HOOK)
    return {"base": base, "smi": smi, "hooks": hooks}


def engine_env(kit: dict[str, Path], **extra: str) -> dict[str, str]:
    return {**os.environ, "LTX_REFERENCE_DEVICE": "cpu",
            "PYTHONPATH": os.pathsep.join([str(kit["hooks"]), str(REPO), os.environ.get("PYTHONPATH", "")]),
            **extra}


def run_args(kit: dict[str, Path], workspace: Path, run: str, dataset: Path) -> list[str]:
    return [*ENGINE, "run", "--workspace", str(workspace), "--run", run, "--dataset", str(dataset), "--backend",
            "reference", "--nvidia-smi", str(kit["smi"]), "--buckets", "64x64x17", "--approve", "--skip-eval",
            "--autotune", "off", "--steps", "2", "--rank", "4", "--model-path", str(kit["base"])]


def encoded(log: Path, offset: int = 0) -> list[dict[str, int]]:
    """What each preprocessing process wrote (``latents``, ``conditions``, ``audio latents``) and kept."""
    found: list[dict[str, int]] = []
    for match in WROTE.finditer(log.read_text()[offset:] if log.is_file() else ""):
        counts = {name: int(n) for n, name in re.findall(r"(\d+) (latents|conditions|audio latents)",
                                                          match["counts"])}
        found.append({**counts, "kept": int(match["kept"])})
    return found


def written(entries: list[dict[str, int]]) -> int:
    return sum(n for entry in entries for name, n in entry.items() if name != "kept")


def precomputed_files(folder: Path) -> dict[str, Path]:
    return {str(p.relative_to(folder)): p for p in sorted(folder.rglob("*.pt"))}


def fresh_preprocessing(kit: dict[str, Path], dataset: Path, out: Path) -> dict[str, Path]:
    """The toy's whole ``process_dataset`` over ``dataset``: what the assembled folders must equal."""
    from ltx_pipeline.reference_trainer import preprocess

    assert preprocess.main([str(dataset), "--resolution-buckets", "64x64x17", "--model-path", str(kit["base"]),
                            "--text-encoder-path", str(kit["base"]), "--output-dir", str(out)]) == 0
    return precomputed_files(out)


def entry_inodes(cache: Path) -> dict[int, Path]:
    return {p.stat().st_ino: p for p in (cache / "entries").rglob("data.pt")}


def cache_verify(workspace: Path, cache: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*ENGINE, "cache", "verify", "--workspace", str(workspace), "--cache-dir", str(cache),
                           "--json"], capture_output=True, text=True, timeout=120, check=False)


def wait_for(path: Path, procs: list[subprocess.Popen[bytes]], what: str, timeout: float = 180) -> None:
    deadline = time.monotonic() + timeout
    while not path.exists():
        for proc in procs:
            if proc.poll() is not None:
                out = proc.stdout or proc.stderr
                pytest.fail(f"an engine ended before {what}: {out.read().decode()[-3000:] if out else ''}")
        assert time.monotonic() < deadline, f"never reached: {what}"
        time.sleep(0.02)


# -- the journal re-attaches to the very process, never another of its kind ---------------------------------

def _script(text: str) -> tuple[str, ...]:
    return (sys.executable, "-c", text)


def test_a_resumed_engine_re_attaches_to_its_own_script_never_to_another_of_the_stage(tmp_path: Path) -> None:
    """An engine died while the captions script ran; its resume starts with the videos script. It must wait
    for the captions script (one process at a time), then run the videos script, not take one for the other;
    the same command, still running, is re-attached (not started twice)."""
    store = Store.open(tmp_path / "ltx-pipeline.db")
    journal = RunJournal(store, saved_id(store.create_run("r1", {})), "train")
    log, marks = tmp_path / "logs" / "preprocess.log", tmp_path / "marks"
    marks.mkdir()
    captions = LaunchSpec(_script(f"import pathlib, time; time.sleep(1.0); "
                                  f"pathlib.Path({str(marks / 'captions')!r}).write_text('done')"), tmp_path)
    videos = LaunchSpec(_script(f"import pathlib; p = pathlib.Path({str(marks)!r}); "
                                f"(p / 'videos').write_text(str((p / 'captions').exists()))"), tmp_path)
    left = journal.launch("preprocess", 1, captions, log)  # what the dead engine left running

    ended = journal.run_to_end("preprocess", 1, videos, log)

    assert (marks / "videos").read_text() == "True"  # it ran, after the captions script had ended
    assert ended.id != left.id and ended.argv == videos.argv and (ended.exit() or {}).get("exit_code") == 0
    assert [(h.argv, h.status) for h in journal.processes("preprocess", 1)] == \
        [(captions.argv, "exited"), (videos.argv, "exited")]

    again = journal.launch("preprocess", 1, captions, log)
    assert journal.run_to_end("preprocess", 1, captions, log).id == again.id  # re-attached, not launched twice
    assert len(journal.processes("preprocess", 1)) == 3


# -- two runs at once ---------------------------------------------------------------------------------------

@pytest.mark.long  # 14-40 s on 2 shared cores (2026-12-06): two engines, each preprocessing, training the toy
@pytest.mark.slow
@pytest.mark.timeout(400)
def test_two_runs_started_together_on_new_data_encode_each_key_once(kit: dict[str, Path], tmp_path: Path) -> None:
    dataset = write_dataset(tmp_path / "data", [(f"clip{i}.mp4", 17, True) for i in range(6)])
    cache, barrier = tmp_path / "team-cache", tmp_path / "barrier"
    barrier.mkdir()
    env = engine_env(kit, FILL_BARRIER=str(barrier), LTX_PIPELINE_LATENT_CACHE=str(cache))
    runs = {name: tmp_path / f"ws-{name}" for name in ("r1", "r2")}  # two workspaces, one team cache
    procs = {name: subprocess.Popen(run_args(kit, ws, name, dataset), env=env, stdout=subprocess.PIPE,
                                    stderr=subprocess.STDOUT, start_new_session=True) for name, ws in runs.items()}
    try:
        for name in runs:  # both engines reach their fill before either starts it: the fills overlap
            wait_for(barrier / f"{name}.ready", list(procs.values()), f"{name}'s cache fill")
        (barrier / "go").write_text("")
        said = {name: proc.communicate(timeout=300)[0].decode() for name, proc in procs.items()}
    finally:
        for proc in procs.values():
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
    assert [procs[name].returncode for name in runs] == [0, 0], said

    for name in runs:  # both found every file missing: neither came after the other had filled the cache
        assert "Stage 1: 0 of 18 file(s) came from the latent cache" in said[name], said[name][-3000:]
    made = {name: encoded(ws / name / "logs" / "preprocess.log") for name, ws in runs.items()}
    # 6 clips x (latents, conditions, audio): all made by the run that claimed first; the other waited for them
    assert sorted(written(entries) for entries in made.values()) == [0, 18], made
    assert all(entry["kept"] == 0 for entries in made.values() for entry in entries), made
    assert len(list((cache / "entries").rglob("data.pt"))) == 18

    folders = {name: ws / name / "dataset" / ".precomputed" for name, ws in runs.items()}
    files = {name: precomputed_files(folder) for name, folder in folders.items()}
    fresh = fresh_preprocessing(kit, dataset, tmp_path / "fresh")
    assert set(files["r1"]) == set(files["r2"]) == set(fresh) and len(fresh) == 18
    inodes = entry_inodes(cache)
    for rel, path in fresh.items():  # both runs link the same entry, whose bytes a whole preprocessing writes
        one, two = files["r1"][rel].stat().st_ino, files["r2"][rel].stat().st_ino
        assert one == two and one in inodes, rel
        assert files["r1"][rel].read_bytes() == path.read_bytes(), rel
    assert not any((cache / "tmp").iterdir())  # no staging folder left
    assert cache_verify(runs["r1"], cache).returncode == 0


# -- SIGKILL during a fill, then resume ----------------------------------------------------------------------

def _rows(dataset: Path) -> list[dict[str, str]]:
    return [json.loads(line) for line in dataset.read_text().splitlines() if line.strip()]


def _write_rows(path: Path, rows: list[dict[str, str]]) -> Path:
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


def _processes(workspace: Path) -> list[tuple[int, str, int, str, str]]:
    db = sqlite3.connect(workspace / "ltx-pipeline.db")
    try:
        rows = db.execute("SELECT id, kind, pid, status, argv FROM processes ORDER BY id").fetchall()
    finally:
        db.close()
    return [(i, kind, pid, status, json.loads(argv)[2]) for i, kind, pid, status, argv in rows]


@pytest.mark.long  # 29-70 s on 2 shared cores (2026-12-06): a first run, a run killed mid-fill, its resume
@pytest.mark.slow
@pytest.mark.timeout(500)
def test_sigkill_during_a_cache_fill_then_resume_encodes_nothing_twice_and_links_no_half_file(
        kit: dict[str, Path], tmp_path: Path) -> None:
    every = _rows(write_dataset(tmp_path / "data", [(f"clip{i}.mp4", 17, True) for i in range(4)]))
    first = _write_rows(tmp_path / "data" / "first.jsonl", every[:2])
    edited = [{**every[0], "caption": every[0]["caption"] + ", seen from above"}, *every[1:]]
    second = _write_rows(tmp_path / "data" / "second.jsonl", edited)
    workspace = tmp_path / "ws"
    cache = workspace / "cache" / "latents"
    done = subprocess.run(run_args(kit, workspace, "r0", first), env=engine_env(kit), capture_output=True,
                          text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    before = set(entry_inodes(cache).values())
    assert len(before) == 6

    # r1: clip0's caption edited (the captions script, first), clips 2 and 3 new (process_dataset, second),
    # clip1 from the cache. Killed once process_dataset wrote clip2's files and half of clip3's latents to a
    # temporary name, with clip0's new conditions put.
    marker = tmp_path / "paused"
    proc = subprocess.Popen(run_args(kit, workspace, "r1", second), env=engine_env(kit, PAUSE_MARKER=str(marker)),
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True)
    try:
        wait_for(marker, [proc], "process_dataset half-way through clip3")
    finally:
        os.killpg(proc.pid, signal.SIGKILL)  # the engine
        proc.wait(timeout=30)
        script = [p for p in _processes(workspace) if p[1] == "preprocess" and p[3] == "running"]
        for _, _, pid, _, _ in script:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pid, signal.SIGKILL)  # its supervisor leads the script's own session
    assert [p[4] for p in script] == ["ltx_pipeline.reference_trainer.preprocess"], _processes(workspace)
    log = workspace / "r1" / "logs" / "preprocess.log"
    killed = encoded(log)
    assert [entry["conditions"] for entry in killed] == [1]  # the captions script ended; the other never did
    after_kill = set(entry_inodes(cache).values())
    assert len(after_kill) == 7 and before < after_kill  # clip0's new conditions were put, nothing of 2 or 3
    staged = sorted(p.name for p in (cache / "tmp").rglob("*") if p.is_file() and "precomputed" in p.parts)
    assert staged[:3] == ["clip2.pt"] * 3 and len(staged) == 4, staged  # and clip3's latents, half-written
    assert staged[3].startswith("clip3.pt.tmp."), staged
    last = _processes(workspace)[-1][0]
    offset = log.stat().st_size

    done = subprocess.run([*ENGINE, "resume", "--workspace", str(workspace), "--run", "r1", "--approve"],
                          env=engine_env(kit), capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    resumed = [p for p in _processes(workspace) if p[0] > last and p[1] == "preprocess"]
    assert [p[4] for p in resumed] == ["ltx_pipeline.reference_trainer.preprocess"]  # no captions script again
    # clip2's three files, finished before the kill, are kept; only clip3 is encoded
    assert encoded(log, offset) == [{"latents": 1, "conditions": 1, "audio latents": 1, "kept": 3}], \
        done.stdout[-4000:] + done.stderr[-4000:]

    folder = workspace / "r1" / "dataset" / ".precomputed"
    files = precomputed_files(folder)
    fresh = fresh_preprocessing(kit, second, tmp_path / "fresh")
    assert set(files) == set(fresh) and len(fresh) == 12
    inodes = entry_inodes(cache)
    for rel, path in files.items():  # every file is an entry's, byte for byte a whole preprocessing's
        assert path.stat().st_ino in inodes, rel
        assert path.read_bytes() == fresh[rel].read_bytes(), rel
    assert not [p for p in folder.rglob("*") if ".tmp." in p.name or ".cache-" in p.name]
    assert not any((cache / "tmp").iterdir())  # the staging folder (and the killed writer's temp file) is gone
    verified = cache_verify(workspace, cache)
    assert verified.returncode == 0, verified.stdout + verified.stderr
