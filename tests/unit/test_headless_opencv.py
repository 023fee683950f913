"""Scene detection runs on a GPU image: PySceneDetect on the headless OpenCV build, no GUI build pulled in.

``scenedetect`` (the PyPI distribution) requires ``opencv-python``, whose ``cv2`` loads ``libGL.so.1``: absent
from slim and most CUDA runtime images, where ``import scenedetect`` then fails. The project depends on
``scenedetect-headless`` (the same library, on ``opencv-python-headless``) instead.
"""

from __future__ import annotations

import importlib.metadata
import subprocess
import sys


def test_cv2_comes_from_the_headless_build_only() -> None:
    owners = importlib.metadata.packages_distributions()
    assert set(owners.get("cv2", [])) == {"opencv-python-headless"}, owners.get("cv2")
    assert set(owners.get("scenedetect", [])) == {"scenedetect-headless"}, owners.get("scenedetect")
    requirements = importlib.metadata.requires("ltx-pipeline") or []
    assert any(r.startswith("scenedetect-headless") for r in requirements), requirements
    assert not any(r.split(";")[0].strip().startswith(("scenedetect>", "scenedetect=", "opencv-python>"))
                   or r.split(";")[0].strip() in ("scenedetect", "opencv-python") for r in requirements), requirements


def test_scenedetect_imports_with_that_build() -> None:
    done = subprocess.run([sys.executable, "-c", "import scenedetect, cv2; from scenedetect import ContentDetector; "
                           "print(cv2.__file__)"], capture_output=True, text=True, check=False, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
