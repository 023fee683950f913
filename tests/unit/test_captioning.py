"""Captioning: the offline captioner measures real clips; the trainer-script captioner runs the real CLI's contract.

Clips are real H.264 mp4s (PyAV) of a coloured square moving a known way. The trainer's script is played by
``tests/fixtures/fake_checkout/scripts/caption_videos.py`` under a fake ``uv``; its options are checked against the
real script's source (``ast``, never imported) when ``/work/shared`` holds it.
"""

from __future__ import annotations

import ast
import http.server
import json
import os
import shutil
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import psutil
import pytest

pytest.importorskip("av")

from ltx_pipeline import captioning  # noqa: E402
from ltx_pipeline.captioning import (  # noqa: E402
    DEFAULT_VLLM_URL,
    OfflineCaptioner,
    TrainerScriptCaptioner,
    captioner_availability,
    describe_clip,
    make_captioner,
)
from ltx_pipeline.captioning import offline as offline_module  # noqa: E402
from ltx_pipeline.captioning._captions_file import strip_trigger  # noqa: E402
from ltx_pipeline.captioning.offline import OFFLINE_VERSION  # noqa: E402
from ltx_pipeline.errors import BadInput, RunFailed  # noqa: E402
from ltx_pipeline.ltx.media import write_video  # noqa: E402
from ltx_pipeline.ltx.sample_clips import moving_square  # noqa: E402
from tests.conftest import FAKE_UV, REPO, SHARED, make_tree  # noqa: E402

FAKE_SCRIPT = Path(__file__).resolve().parents[1] / "fixtures" / "fake_checkout" / "scripts" / "caption_videos.py"
REAL_TRAINER = SHARED / "ltx2-configs" / "packages" / "ltx-trainer"
REAL_SCRIPT = REAL_TRAINER / "scripts" / "caption_videos.py"
KEY = "AIzaSyFAKE-test-key-0123456789abcdefXYZ"


def _clip(path: Path, colour: str = "red", background: str = "black", direction: str = "right",
          audio: bool = False, frames: int = 24) -> Path:
    """A 64x64, 24 fps clip of a square sliding ``direction`` (right, left, down, up)."""
    video = moving_square(frames + 1, 64, 64, colour, background)[:-1]  # its last frame wraps back to the start
    if direction in ("down", "up"):
        video = video.transpose(0, 2, 1, 3)
    if direction in ("left", "up"):
        video = video[::-1]
    tone = (0.2 * np.sin(np.arange(16000, dtype=np.float32) * 0.17)).astype(np.float32) if audio else None
    path.parent.mkdir(parents=True, exist_ok=True)
    write_video(path, np.ascontiguousarray(video), 24, tone)
    return path


@pytest.fixture
def clips(workspace: Path) -> list[Path]:
    folder = workspace / "dataset" / "clips"
    return [_clip(folder / f"{name}.mp4", colour) for name, colour in
            (("a", "red"), ("b", "green"), ("c", "blue"), ("d", "yellow"))]


@pytest.fixture
def captions_file(workspace: Path) -> Path:
    return workspace / "dataset" / "dataset.json"


@pytest.fixture
def counted(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The names of the clips the offline captioner describes."""
    calls: list[str] = []

    def counting(path: Path, *, sound: bool = True) -> str:
        calls.append(path.name)
        return describe_clip(path, sound=sound)

    monkeypatch.setattr(offline_module, "describe_clip", counting)
    return calls


# --- the offline captioner ---------------------------------------------------------------------------------


@pytest.mark.parametrize(("colour", "background", "direction", "motion"), [
    ("red", "black", "right", "moving left to right"),
    ("green", "white", "left", "moving right to left"),
    ("blue", "yellow", "down", "moving downwards"),
    ("orange", "purple", "up", "moving upwards"),
])
def test_offline_names_the_colours_and_the_direction(tmp_path: Path, colour: str, background: str, direction: str,
                                                     motion: str) -> None:
    text = describe_clip(_clip(tmp_path / "c.mp4", colour, background, direction))
    article = "an" if background[0] in "aeiou" else "a"
    assert f"shape on {article} {background} background {motion}" in text
    assert f" {colour} shape" in text
    assert text.startswith("A 1.0-second clip, 64x64: ") and text.endswith("; silent.")


def test_offline_hears_sound_and_is_deterministic(tmp_path: Path) -> None:
    clip = _clip(tmp_path / "loud.mp4", audio=True)
    text = describe_clip(clip)
    assert text == "A 1.0-second clip, 64x64: a red shape on a black background moving left to right; with sound."
    twin = shutil.copy(clip, tmp_path / "twin.mp4")
    assert describe_clip(Path(twin)) == text == describe_clip(clip)


def test_for_a_video_only_run_the_offline_captions_say_nothing_of_sound(workspace: Path, captions_file: Path) -> None:
    """A video-only LoRA never hears the clips: "with sound" in its captions (and so in its eval prompts) would
    describe what it does not learn."""
    loud = _clip(workspace / "dataset" / "loud.mp4", audio=True)
    assert describe_clip(loud, sound=False) == "A 1.0-second clip, 64x64: a red shape on a black background " \
                                               "moving left to right."
    captioner = OfflineCaptioner(sound=False)
    got = captioner.caption([loud], captions_file, workspace=workspace)
    assert list(got.values()) == [describe_clip(loud, sound=False)]
    # The setting is part of what identifies the captions; a run that hears its clips keeps its old identity.
    assert captioner.settings()["sound"] is False and "sound" not in OfflineCaptioner().settings()


def test_offline_captions_only_clips_without_one_and_keeps_old_rows_verbatim(
        workspace: Path, clips: list[Path], captions_file: Path, counted: list[str]) -> None:
    old = [{"caption": "Hand written: a RED square. Keep me.", "media_path": "clips/a.mp4"},
           {"video": "elsewhere.mp4", "caption": "a foreign row, kept as it is"}]
    make_tree(captions_file.parent, {"dataset.json": json.dumps(old)})
    got = OfflineCaptioner().caption(clips[:3], captions_file, workspace=workspace)
    assert counted == ["b.mp4", "c.mp4"]
    assert list(got) == ["clips/a.mp4", "clips/b.mp4", "clips/c.mp4"]
    assert got["clips/a.mp4"] == old[0]["caption"]
    assert "a green shape" in got["clips/b.mp4"] and "a blue shape" in got["clips/c.mp4"]
    rows = json.loads(captions_file.read_text())
    assert rows[:2] == old and [row["media_path"] for row in rows[2:]] == ["clips/b.mp4", "clips/c.mp4"]
    assert OfflineCaptioner().caption(clips[:3], captions_file, workspace=workspace) == got
    assert counted == ["b.mp4", "c.mp4"]


def test_a_crash_mid_way_keeps_progress_and_the_next_call_captions_only_the_rest(
        workspace: Path, clips: list[Path], captions_file: Path, counted: list[str]) -> None:
    seen: list[tuple[int, int]] = []

    def crash_after_two(done: int, total: int) -> None:
        seen.append((done, total))
        if done == 2:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        OfflineCaptioner().caption(clips, captions_file, workspace=workspace, on_progress=crash_after_two)
    assert seen == [(1, 4), (2, 4)]
    assert [row["media_path"] for row in json.loads(captions_file.read_text())] == ["clips/a.mp4", "clips/b.mp4"]
    got = OfflineCaptioner().caption(clips, captions_file, workspace=workspace)
    assert counted == ["a.mp4", "b.mp4", "c.mp4", "d.mp4"]
    assert len(got) == 4 and all(got.values())


def test_the_trigger_word_never_appears(workspace: Path, clips: list[Path], captions_file: Path) -> None:
    got = OfflineCaptioner(trigger="RED").caption(clips[:1], captions_file, workspace=workspace)
    assert got["clips/a.mp4"].startswith("A 1.0-second clip, 64x64: a shape on a black background")
    assert "red" not in captions_file.read_text().lower()
    assert strip_trigger("fxclp, a dog in FXCLP style; fxclpx stays.", "fxclp") == "a dog in style; fxclpx stays."
    assert strip_trigger('A cat (fxclp) walks, "FxClp".', "fxclp") == "A cat walks."
    assert strip_trigger("nothing to strip", None) == "nothing to strip"


def test_a_clip_outside_the_captions_folder_is_refused(workspace: Path, tmp_path: Path, captions_file: Path) -> None:
    outside = _clip(tmp_path / "outside" / "x.mp4")
    with pytest.raises(BadInput, match="not inside") as caught:
        OfflineCaptioner().caption([outside], captions_file, workspace=workspace)
    assert caught.value.fix and "symlink" in caught.value.fix


# --- the trainer's script, through a fake checkout and a fake uv -------------------------------------------


@pytest.fixture
def checkout(tmp_path: Path) -> Path:
    root = tmp_path / "LTX-2"
    make_tree(root, {"uv.lock": "", ".venv/": None,
                     "packages/ltx-trainer/scripts/caption_videos.py": FAKE_SCRIPT.read_text()})
    return root


@pytest.fixture
def fake_uv(tmp_path: Path) -> str:
    uv = tmp_path / "bin" / "uv"
    make_tree(uv.parent, {"uv": FAKE_UV})
    uv.chmod(0o755)
    return str(uv)


@pytest.fixture
def argv_log(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    log = tmp_path / "argv.jsonl"
    monkeypatch.setenv("FAKE_CAPTION_ARGV_LOG", str(log))
    for var in ("GEMINI_API_KEY", "GOOGLE_API_KEY", "FAKE_CAPTION_TEMPLATE", "FAKE_CAPTION_EXIT",
                "FAKE_CAPTION_FAIL_ON", "FAKE_CAPTION_HANG_AFTER"):
        monkeypatch.delenv(var, raising=False)
    return log


def _calls(log: Path) -> list[list[str]]:
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


def _script(name: str, checkout: Path, uv: str, trigger: str | None = None) -> TrainerScriptCaptioner:
    return TrainerScriptCaptioner(name, trainer_root=checkout, trigger=trigger, uv=uv, poll_s=0.02)


def test_the_trainer_script_captions_a_folder_keeping_existing_captions(
        workspace: Path, clips: list[Path], captions_file: Path, checkout: Path, fake_uv: str,
        argv_log: Path) -> None:
    make_tree(captions_file.parent, {"dataset.json": json.dumps([{"caption": "kept", "media_path": "clips/a.mp4"}])})
    progress: list[tuple[int, int]] = []
    got = _script("qwen_omni", checkout, fake_uv).caption(
        clips, captions_file, workspace=workspace, on_progress=lambda done, total: progress.append((done, total)))
    assert got == {"clips/a.mp4": "kept", **{f"clips/{n}.mp4": f"fake caption of {n}.mp4" for n in "bcd"}}
    assert progress[-1] == (3, 3)
    [argv] = _calls(argv_log)  # one run for the folder: a.mp4 is skipped by the script itself
    assert argv[0] == str(clips[0].parent.resolve())
    assert argv[1:] == ["--output", argv[2], "--captioner-type", "qwen_omni", "--extensions", "mp4",
                        "--vllm-url", DEFAULT_VLLM_URL]
    assert Path(argv[2]).parent == captions_file.parent.resolve() and not Path(argv[2]).exists()
    assert "--override" not in argv
    assert json.loads(captions_file.read_text())[0] == {"caption": "kept", "media_path": "clips/a.mp4"}
    assert _script("qwen_omni", checkout, fake_uv).caption(clips, captions_file, workspace=workspace) == got
    assert len(_calls(argv_log)) == 1  # nothing left to caption: the script is not run again


def test_other_media_in_the_folder_are_never_captioned(workspace: Path, clips: list[Path], captions_file: Path,
                                                       checkout: Path, fake_uv: str, argv_log: Path) -> None:
    got = _script("gemini_flash", checkout, fake_uv).caption(clips[:2], captions_file, workspace=workspace)
    assert list(got) == ["clips/a.mp4", "clips/b.mp4"]
    assert [call[0] for call in _calls(argv_log)] == [str(clip.resolve()) for clip in clips[:2]]
    assert [row["media_path"] for row in json.loads(captions_file.read_text())] == ["clips/a.mp4", "clips/b.mp4"]


def test_the_gemini_key_goes_only_through_the_environment_and_is_never_shown(
        workspace: Path, clips: list[Path], captions_file: Path, checkout: Path, fake_uv: str, argv_log: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GEMINI_API_KEY", KEY)
    monkeypatch.setenv("FAKE_CAPTION_EXIT", "1")
    captioner = make_captioner("gemini_flash", trigger="fxclp", trainer_root=checkout, vllm_url=DEFAULT_VLLM_URL,
                               uv=fake_uv)
    assert KEY not in json.dumps(captioner.settings()) and captioner.settings()["captioner"] == "gemini_flash"
    with pytest.raises(RunFailed) as caught:
        captioner.caption(clips[:2], captions_file, workspace=workspace)
    message = str(caught.value) + str(caught.value.fix)
    assert KEY not in message and "***" in message and "exited with status 1" in message  # the fake quoted it
    assert KEY not in argv_log.read_text() and "--api-key" not in argv_log.read_text()


def test_a_clip_the_script_could_not_caption_fails_the_call_but_keeps_the_rest(
        workspace: Path, clips: list[Path], captions_file: Path, checkout: Path, fake_uv: str, argv_log: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAKE_CAPTION_FAIL_ON", "c.mp4")
    monkeypatch.setenv("FAKE_CAPTION_TEMPLATE", "Fxclp: a clip called {name}, in fxclp style")
    with pytest.raises(RunFailed, match=r"left 1 of 4 clips without a caption, first clips/c\.mp4") as caught:
        _script("qwen_omni", checkout, fake_uv, trigger="fxclp").caption(clips, captions_file, workspace=workspace)
    assert "Error captioning c.mp4" in str(caught.value) and "serve_captioner.py" in str(caught.value.fix)
    rows = json.loads(captions_file.read_text())
    assert [row["media_path"] for row in rows] == ["clips/a.mp4", "clips/b.mp4", "clips/d.mp4"]
    assert rows[0]["caption"] == "a clip called a.mp4, in style" and "fxclp" not in captions_file.read_text().lower()


def test_an_interrupt_stops_the_script_and_the_next_call_captions_only_the_rest(
        workspace: Path, captions_file: Path, checkout: Path, fake_uv: str, argv_log: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    clip = _clip(workspace / "dataset" / "clips" / "a.mp4")
    many = [clip] + [Path(shutil.copy(clip, clip.with_name(f"{n}.mp4"))) for n in "bcdef"]
    monkeypatch.setenv("FAKE_CAPTION_HANG_AFTER", "5")  # it saves after 5 (SAVE_INTERVAL), then hangs

    def stop(done: int, total: int) -> None:
        assert (done, total) == (5, 6)
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        _script("qwen_omni", checkout, fake_uv).caption(many, captions_file, workspace=workspace, on_progress=stop)
    assert len(json.loads(captions_file.read_text())) == 5
    monkeypatch.delenv("FAKE_CAPTION_HANG_AFTER")
    got = _script("qwen_omni", checkout, fake_uv).caption(many, captions_file, workspace=workspace)
    assert len(got) == 6 and [call[0] for call in _calls(argv_log)][-1] == str(many[-1].resolve())


_DRIVER = """
import sys
from pathlib import Path
from ltx_pipeline.captioning import TrainerScriptCaptioner
captioner = TrainerScriptCaptioner("qwen_omni", trainer_root=Path(sys.argv[1]), uv=sys.argv[2], poll_s=0.02)
captioner.caption([Path(p) for p in sys.argv[5:]], Path(sys.argv[3]), workspace=Path(sys.argv[4]))
"""


def _fake_scripts(marker: str) -> list[psutil.Process]:
    found = []
    for process in psutil.process_iter(["cmdline"]):
        if any(marker in part for part in process.info["cmdline"] or ()):
            found.append(process)
    return found


def test_a_sigkill_mid_way_leaves_no_orphan_and_the_next_call_captions_only_the_rest(
        workspace: Path, captions_file: Path, checkout: Path, fake_uv: str, argv_log: Path) -> None:
    clip = _clip(workspace / "dataset" / "clips" / "a.mp4")
    many = [clip] + [Path(shutil.copy(clip, clip.with_name(f"{n}.mp4"))) for n in "bcdef"]
    env = {**os.environ, "FAKE_CAPTION_HANG_AFTER": "5", "PYTHONPATH": str(REPO)}
    driver = subprocess.Popen([sys.executable, "-c", _DRIVER, str(checkout), fake_uv, str(captions_file),
                               str(workspace), *map(str, many)], env=env, cwd=REPO)
    marker = str(captions_file.with_name(".dataset.caption-videos.json").resolve())
    try:
        deadline = time.monotonic() + 20
        while not (captions_file.exists() and len(json.loads(captions_file.read_text())) == 5):
            assert time.monotonic() < deadline and driver.poll() is None, "the first 5 captions never arrived"
            time.sleep(0.02)
        driver.kill()
        driver.wait()
        deadline = time.monotonic() + 5
        while _fake_scripts(marker) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert _fake_scripts(marker) == [], "the script outlived the captioner killed with SIGKILL"
    finally:
        driver.kill()
        for orphan in _fake_scripts(marker):
            orphan.kill()
    got = _script("qwen_omni", checkout, fake_uv).caption(many, captions_file, workspace=workspace)
    assert len(got) == 6 and [call[0] for call in _calls(argv_log)][-1] == str(many[-1].resolve())
    assert len(_calls(argv_log)) == 2


def _real_options(source: str) -> set[str]:
    """Every option string the real typer command declares (``--a/--b`` split), read from its source."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call) and getattr(node.func, "attr", None) == "Option":
            for arg in node.args:
                if isinstance(arg, ast.Constant) and isinstance(arg.value, str) and arg.value.startswith("-"):
                    found.update(arg.value.split("/"))
    return found


def _fake_options() -> set[str]:
    found: set[str] = set()
    for node in ast.walk(ast.parse(FAKE_SCRIPT.read_text())):
        if isinstance(node, ast.Call) and getattr(node.func, "attr", None) == "add_argument":
            found.update(a.value for a in node.args
                         if isinstance(a, ast.Constant) and isinstance(a.value, str) and a.value.startswith("-"))
    return found


@pytest.mark.skipif(not REAL_SCRIPT.is_file(), reason="the real LTX-2 trainer sources are not in ../shared")
def test_the_argv_and_the_fake_use_only_options_the_real_script_declares(checkout: Path) -> None:
    source = REAL_SCRIPT.read_text()
    real = _real_options(source)
    assert {"--output", "-o", "--captioner-type", "-c", "--vllm-url", "--extensions", "--override"} <= real
    assert _fake_options() == real
    for name in ("qwen_omni", "gemini_flash"):
        argv = _script(name, checkout, "uv").command(Path("/d/clips"), Path("/d/dataset.json"), ["mp4", "mov"])
        script_args = argv[argv.index("scripts/caption_videos.py") + 1:]
        assert {arg for arg in script_args if arg.startswith("-")} <= real
    assert '{"caption": caption, "media_path": media_path}' in source  # the JSON rows read and written
    assert DEFAULT_VLLM_URL in (REAL_TRAINER / "docs" / "dataset-preparation.md").read_text()


# --- availability and the factory --------------------------------------------------------------------------


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture
def vllm_server() -> Iterator[str]:
    class Models(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - the stdlib's name
            body = json.dumps({"data": [{"id": "qwen3-omni"}]}).encode()
            self.send_response(200 if self.path == "/v1/models" else 404)
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.HTTPServer(("127.0.0.1", 0), Models)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    server.shutdown()
    server.server_close()


def test_availability_says_what_to_run(checkout: Path, vllm_server: str) -> None:
    assert captioner_availability("offline", trainer_root=None, vllm_url=DEFAULT_VLLM_URL, env={}).ok
    none = captioner_availability("qwen_omni", trainer_root=None, vllm_url=DEFAULT_VLLM_URL, env={})
    assert not none.ok and none.fix and "--trainer-root" in none.fix
    down = f"http://127.0.0.1:{_free_port()}/v1"
    nobody = captioner_availability("qwen_omni", trainer_root=checkout, vllm_url=down, env={})
    assert not nobody.ok and nobody.fix and "uv run python scripts/serve_captioner.py" in nobody.fix
    assert str(checkout / "packages" / "ltx-trainer") in nobody.fix and down in nobody.detail
    served = captioner_availability("qwen_omni", trainer_root=checkout, vllm_url=vllm_server, env={})
    assert served.ok and "qwen3-omni" in served.detail
    no_key = captioner_availability("gemini_flash", trainer_root=checkout, vllm_url=DEFAULT_VLLM_URL, env={})
    assert not no_key.ok and no_key.fix and no_key.fix.startswith("export GEMINI_API_KEY=")
    keyed = captioner_availability("gemini_flash", trainer_root=checkout, vllm_url=DEFAULT_VLLM_URL,
                                   env={"GOOGLE_API_KEY": KEY})
    assert keyed.ok and KEY not in keyed.detail and "GOOGLE_API_KEY" in keyed.detail
    shutil.rmtree(checkout / ".venv")
    unsynced = captioner_availability("gemini_flash", trainer_root=checkout, vllm_url=DEFAULT_VLLM_URL,
                                      env={"GEMINI_API_KEY": KEY})
    assert not unsynced.ok and unsynced.fix == f"`cd {checkout} && uv sync`"


def test_the_factory_knows_three_captioners(checkout: Path) -> None:
    assert captioning.CAPTIONERS == ("offline", "qwen_omni", "gemini_flash")
    offline = make_captioner("offline", trigger="fxclp", trainer_root=None, vllm_url=DEFAULT_VLLM_URL, uv=None)
    assert offline.name == "offline" and offline.settings() == {"captioner": "offline", "version": OFFLINE_VERSION,
                                                                "trigger": "fxclp"}
    qwen = make_captioner("qwen_omni", trigger=None, trainer_root=checkout, vllm_url="http://u:p@127.0.0.1:9/v1",
                          uv="uv")
    assert qwen.name == "qwen_omni" and qwen.settings()["vllm_url"] == "http://127.0.0.1:9/v1"
    with pytest.raises(RunFailed, match="could not be run"):
        make_captioner("qwen_omni", trigger=None, trainer_root=checkout, uv=str(checkout / "no-uv")).caption(
            [_clip(checkout / "x.mp4")], checkout / "dataset.json", workspace=checkout)
    with pytest.raises(BadInput, match="Unknown captioner"):
        make_captioner("whisper", trigger=None, trainer_root=None, vllm_url=DEFAULT_VLLM_URL, uv=None)
    with pytest.raises(BadInput, match="No LTX-2 trainer checkout"):
        make_captioner("gemini_flash", trigger=None, trainer_root=None, vllm_url=DEFAULT_VLLM_URL, uv=None)


def test_with_trainer_python_the_trainer_captioners_need_no_uv_nor_a_synced_checkout(
        workspace: Path, clips: list[Path], captions_file: Path, tmp_path: Path, argv_log: Path) -> None:
    # --trainer-python: caption_videos.py starts with that interpreter, as train.py does; uv is never asked for.
    root = tmp_path / "plain-LTX-2"
    make_tree(root, {"packages/ltx-trainer/scripts/caption_videos.py": FAKE_SCRIPT.read_text()})
    captioner = make_captioner("qwen_omni", trigger=None, trainer_root=root, vllm_url=DEFAULT_VLLM_URL,
                               uv=str(tmp_path / "no-uv-here"), python=sys.executable)
    got = captioner.caption(clips[:1], captions_file, workspace=workspace)
    assert got == {"clips/a.mp4": "fake caption of a.mp4"}
    unsynced = captioner_availability("gemini_flash", trainer_root=root, vllm_url=DEFAULT_VLLM_URL,
                                      env={"GEMINI_API_KEY": KEY})
    assert not unsynced.ok and "not synced" in unsynced.detail
    assert captioner_availability("gemini_flash", trainer_root=root, vllm_url=DEFAULT_VLLM_URL,
                                  env={"GEMINI_API_KEY": KEY}, trainer_python=sys.executable).ok
