"""The real trainer's Python environment for the real-trainer suite: built once, cached between runs.

The recipe is ../shared/reference/tiny-ltx2-facts.md's: a venv with the *default* PyPI torch build (the
``+cpu`` build this machine's pip configuration serves breaks the registry's torchvision/torchaudio wheels),
pinned versions (unpinned, pip backtracks for minutes), Debian's FFmpeg 5.1 libraries (torchcodec needs
them; without them the trainer's audio extraction fails silently), and an editable install of a writable
copy of ltx-core + ltx-trainer (../shared is read-only in CI).

The environment lives outside the repository, in ``$LTX_REAL_TRAINER_CACHE`` (default
``~/.cache/ltx-pipeline-tests``), under a key made of the pins and the trainer's source, so a new trainer
commit or a new pin builds a new one. It is built in a ``.partial`` folder and renamed when complete, under
a file lock, so two pytest workers never build it twice and a killed build is never taken for a finished one.

Run as a script to build it ahead of the tests: ``python tests/real_trainer/environment.py``.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

# Pins from the facts file: without them pip backtracks over transformers/peft, and an unpinned
# torchvision pulls a newer torch.
PINS = (
    "torch==2.13.0",
    "torchvision==0.28.0",
    "torchaudio==2.11.1",
    "transformers==5.14.1",
    "peft==0.21.2",
)
# Debian bookworm's FFmpeg 5.1 shared libraries, which torchcodec (torchaudio.load) loads at run time.
FFMPEG_DEBS = ("libavcodec59", "libavformat59", "libavutil57", "libswresample4", "libswscale6",
               "libavdevice59", "libavfilter8")
_RECIPE_VERSION = "1"
# Initialised at import, before any test fixture points HOME at a temp folder.
CACHE_ROOT = Path(os.environ.get("LTX_REAL_TRAINER_CACHE") or Path.home() / ".cache" / "ltx-pipeline-tests")


@dataclass(frozen=True)
class TrainerEnvironment:
    """A built environment: its interpreter and its writable copy of the trainer's source."""

    root: Path
    build_seconds: float  # 0.0 when it was already cached

    @property
    def python(self) -> Path:
        return self.root / "venv" / "bin" / "python"

    @property
    def source(self) -> Path:
        """A repo-root layout (packages/ltx-core, packages/ltx-trainer), usable as --trainer-root."""
        return self.root / "ltx2"


def trainer_source() -> Path | None:
    """The official trainer's source: ``$LTX2_SRC``, else ../shared/ltx2-src beside the checkout."""
    explicit = os.environ.get("LTX2_SRC")
    candidates = [Path(explicit)] if explicit else [REPO.parent / "shared" / "ltx2-src"]
    for candidate in candidates:
        if (candidate / "packages" / "ltx-trainer" / "scripts" / "train.py").is_file():
            return candidate
    return None


def _source_digest(source: Path) -> str:
    digest = hashlib.sha256(_RECIPE_VERSION.encode())
    digest.update("\n".join(PINS).encode())
    for package in ("ltx-core", "ltx-trainer"):
        folder = source / "packages" / package
        for path in sorted(p for p in folder.rglob("*") if p.is_file() and "__pycache__" not in p.parts):
            digest.update(str(path.relative_to(source)).encode())
            digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


def _missing_ffmpeg_libraries() -> list[str]:
    listing = subprocess.run(["ldconfig", "-p"], capture_output=True, text=True, check=False).stdout
    wanted = {"libavcodec59": "libavcodec.so.59", "libavformat59": "libavformat.so.59",
              "libavutil57": "libavutil.so.57", "libswresample4": "libswresample.so.4",
              "libswscale6": "libswscale.so.6", "libavdevice59": "libavdevice.so.59",
              "libavfilter8": "libavfilter.so.8"}
    return [deb for deb, soname in wanted.items() if soname not in listing]


def _install_ffmpeg_libraries(log: list[str]) -> None:
    missing = _missing_ffmpeg_libraries()
    if not missing:
        return
    if os.geteuid() != 0:
        raise RuntimeError(f"FFmpeg 5.1 libraries missing ({', '.join(missing)}) and not root to apt-get them: "
                           f"install them with: apt-get install {' '.join(FFMPEG_DEBS)}")
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    _run(["apt-get", "update", "-qq"], log, env=env)
    _run(["apt-get", "install", "-y", "-qq", "--no-install-recommends", *FFMPEG_DEBS], log, env=env)


def _run(argv: list[str], log: list[str], env: dict[str, str] | None = None) -> None:
    log.append("$ " + " ".join(argv))
    done = subprocess.run(argv, capture_output=True, text=True, env=env, check=False)
    if done.returncode != 0:
        tail = (done.stdout + done.stderr)[-4000:]
        raise RuntimeError(f"{' '.join(argv[:4])} ... failed (exit {done.returncode}):\n{tail}")


def _pip_env() -> dict[str, str]:
    """The public registry without this machine's local wheel folder and its torch cap (the +cpu build)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")}
    env["PIP_CONFIG_FILE"] = os.devnull
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    env["PIP_DEFAULT_TIMEOUT"] = "180"
    if os.path.exists("/etc/ssl/certs/ca-certificates.crt"):
        env["PIP_CERT"] = "/etc/ssl/certs/ca-certificates.crt"
    return env


def _build(source: Path, target: Path, log: list[str]) -> None:
    _install_ffmpeg_libraries(log)
    shutil.copytree(source / "packages" / "ltx-core", target / "ltx2" / "packages" / "ltx-core")
    shutil.copytree(source / "packages" / "ltx-trainer", target / "ltx2" / "packages" / "ltx-trainer")
    for path in target.joinpath("ltx2").rglob("*"):  # ../shared is read-only: the copy must not be
        path.chmod(path.stat().st_mode | 0o200)
    target.joinpath("ltx2").chmod(0o755)
    _run([sys.executable, "-m", "venv", str(target / "venv")], log)
    pip = [str(target / "venv" / "bin" / "python"), "-m", "pip", "install", "-q"]
    env = _pip_env()
    constraints = target / "constraints.txt"
    constraints.write_text("\n".join(PINS) + "\n")
    log.append("pip install torch (the default build, not +cpu)")
    _run_env([*pip, PINS[0]], log, env)
    _run_env([*pip, "-c", str(constraints), "-e", str(target / "ltx2" / "packages" / "ltx-core"),
              "-e", str(target / "ltx2" / "packages" / "ltx-trainer")], log, env)
    # The import the trainer itself needs first: fail here, not in the first test.
    _run_env([str(target / "venv" / "bin" / "python"), "-c",
              "import torch, torchaudio, torchvision, ltx_core, ltx_trainer.trainer"], log, env)


def _run_env(argv: list[str], log: list[str], env: dict[str, str]) -> None:
    _run(argv, log, env=env)


def ensure_environment() -> TrainerEnvironment:
    """Return the cached environment, building it first when it does not exist.

    Raises:
        LookupError: the trainer's source is not there (the suite then skips, with this reason).
        RuntimeError: the build failed; the message carries the failing command's output.
    """
    source = trainer_source()
    if source is None:
        raise LookupError("the official trainer's source is absent: set LTX2_SRC or put ../shared/ltx2-src "
                          "beside the checkout")
    CACHE_ROOT.mkdir(parents=True, exist_ok=True)
    final = CACHE_ROOT / f"trainer-env-{_source_digest(source)}"
    with open(CACHE_ROOT / "build.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if (final / "complete").is_file():
            return TrainerEnvironment(final, 0.0)
        started = time.monotonic()
        partial = final.with_name(final.name + ".partial")
        shutil.rmtree(partial, ignore_errors=True)
        partial.mkdir()
        log: list[str] = []
        _build(source, partial, log)
        # An editable install records absolute paths: build in place under the final name.
        partial.rename(final)
        _repoint_editable_install(partial, final)
        (final / "complete").write_text("\n".join(log) + "\n")
        return TrainerEnvironment(final, time.monotonic() - started)


def _repoint_editable_install(old: Path, new: Path) -> None:
    """The venv's scripts and editable .pth files name the build folder; rewrite them to the final one."""
    for path in [*new.joinpath("venv").rglob("*.pth"), *new.joinpath("venv", "bin").iterdir(),
                 *new.joinpath("venv").rglob("direct_url.json"), new / "venv" / "pyvenv.cfg"]:
        if not path.is_file() or path.is_symlink():
            continue
        try:
            text = path.read_text()
        except UnicodeDecodeError:
            continue
        if str(old) in text:
            path.write_text(text.replace(str(old), str(new)))
    for finder in new.joinpath("venv").rglob("__editable__*finder.py"):
        finder.write_text(finder.read_text().replace(str(old), str(new)))


if __name__ == "__main__":
    built = ensure_environment()
    print(f"trainer environment: {built.root} (built in {built.build_seconds:.0f} s)"
          if built.build_seconds else f"trainer environment: {built.root} (cached)")
