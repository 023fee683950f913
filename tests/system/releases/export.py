"""An earlier release of ltx-pipeline, exported from the repository's own history and cached by commit.

``git archive <sha>`` of the checkout is unpacked once into ``<cache>/release-<full sha>`` (the cache is
the real-trainer suite's, ``$LTX_REAL_TRAINER_CACHE`` or ``~/.cache/ltx-pipeline-tests``), in a
``.partial`` folder renamed when complete, under a file lock, so two pytest workers never export it twice
and a killed export is never taken for a finished one. A release runs with the current venv's interpreter
and ``PYTHONPATH=<export>``: its ``ltx_pipeline`` and ``phases`` packages shadow the editable install
(its migrations are found beside the package, as in any source checkout), and every subprocess it
launches (trainers, trials) inherits the same path, so the whole workspace is the old release's work.
"""

from __future__ import annotations

import fcntl
import io
import os
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

from tests.real_trainer.environment import CACHE_ROOT

REPO = Path(__file__).resolve().parents[3]  # the checkout (git archive run in a subfolder exports only it)
_RECIPE_VERSION = "2"  # bump when the export's layout changes, so stale copies are not reused (1: tests/ only)


def full_sha(revision: str) -> str:
    """The commit ``revision`` names in this checkout.

    Raises:
        LookupError: git is missing, this is not a checkout, or the commit is not in its history
            (a shallow or history-less copy); the test skips with this reason.
    """
    if shutil.which("git") is None:
        raise LookupError("git is not installed: the earlier release is exported from the repository's history")
    done = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--verify", "--quiet", f"{revision}^{{commit}}"],
                          capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise LookupError(f"commit {revision} is not in this checkout's history ({REPO}): a shallow or "
                          "history-less copy; fetch the full history (git fetch --unshallow) to run this test")
    return done.stdout.strip()


def release_tree(revision: str) -> Path:
    """The source tree of ``revision``, exported once and cached by its full commit id."""
    sha = full_sha(revision)
    CACHE_ROOT.mkdir(parents=True, exist_ok=True)
    final = CACHE_ROOT / f"release-{sha}-{_RECIPE_VERSION}"
    with open(CACHE_ROOT / "release.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if (final / ".complete").is_file():
            return final
        partial = final.with_name(final.name + ".partial")
        shutil.rmtree(partial, ignore_errors=True)
        shutil.rmtree(final, ignore_errors=True)
        partial.mkdir()
        archive = subprocess.run(["git", "-C", str(REPO), "archive", "--format=tar", sha],
                                 capture_output=True, check=True).stdout
        with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
            tar.extractall(partial, filter="data")
        (partial / ".complete").write_text(sha + "\n")
        partial.rename(final)
        return final


def release_env(tree: Path, base: dict[str, str] | None = None) -> dict[str, str]:
    """An environment in which ``python`` imports the release at ``tree`` instead of the installed code."""
    env = dict(os.environ if base is None else base)
    env["PYTHONPATH"] = str(tree)
    return env


def imported_from(tree: Path) -> Path:
    """Where ``ltx_pipeline`` is imported from under ``release_env(tree)`` (the shadowing is checked, not
    assumed: an editable install's finder could win over PYTHONPATH)."""
    done = subprocess.run([sys.executable, "-c", "import ltx_pipeline, phases; print(ltx_pipeline.__file__); "
                           "print(phases.__file__)"], capture_output=True, text=True, env=release_env(tree),
                          cwd=tree.parent, check=True)
    package, phases = (Path(line) for line in done.stdout.split())
    if not (package.is_relative_to(tree) and phases.is_relative_to(tree)):
        raise AssertionError(f"the release at {tree} is shadowed by the installed code: ltx_pipeline from "
                             f"{package}, phases from {phases}")
    return package
