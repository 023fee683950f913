"""Helpers of the browser tests: the dashboard as a real process, and Debian's Chromium driven by Selenium.

Selenium (through Debian's chromedriver) rather than a hand-written DevTools client: it is the
well-kept standard for this, speaks to the chromedriver that ships with the chromium package (no
browser download), and gives waits, scripts and screenshots in a few calls. Chromium starts with the
flags a closed network needs (no background networking, sync or component updates) and a fresh
profile each time.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import pytest

from tests.ui.conftest import ENGINE

T = TypeVar("T")
_FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
          "--disable-background-networking", "--disable-component-update", "--disable-sync",
          "--disable-dev-shm-usage", "--autoplay-policy=no-user-gesture-required", "--window-size=1400,1000")


MISSING = ("Debian's chromium and chromium-driver are not installed (apt-get install chromium chromium-driver; "
           ".ci/run installs them)")


def executables() -> tuple[str, str] | None:
    """The chromium and chromedriver executables, or None when either is missing."""
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    driver = shutil.which("chromedriver")
    return (chromium, driver) if chromium and driver else None


def start_chromium(profile: Path) -> Any:
    """A headless Chromium under Selenium, with a fresh profile in ``profile``."""
    from selenium import webdriver
    from selenium.webdriver.chrome.options import Options
    from selenium.webdriver.chrome.service import Service

    found = executables()
    if found is None:
        pytest.skip(MISSING)
    chromium, driver = found
    options = Options()
    options.binary_location = chromium
    for flag in (*_FLAGS, f"--user-data-dir={profile}"):
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})  # the console, for page_errors
    return webdriver.Chrome(options=options, service=Service(executable_path=driver))


def serve(workspace: Path, started: list[subprocess.Popen[str]], *args: str) -> str:
    """Start ``ltx-pipeline ui`` on a free port and return the URL it printed (token included, if any)."""
    proc = subprocess.Popen([*ENGINE, "ui", "--workspace", str(workspace), "--port", "0", *args],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONUNBUFFERED": "1"})
    started.append(proc)
    assert proc.stdout is not None
    line = proc.stdout.readline()
    found = re.search(r"http://\S+", line)
    if found is None:  # it exited: say why
        assert proc.stderr is not None
        pytest.fail(f"ltx-pipeline ui did not start: {line!r} {proc.stderr.read()[-2000:]}")
    return found.group(0)


def get_json(url: str) -> Any:
    """The JSON at ``url``, or None while it answers 404 (no such run yet) or 503 (its store is being created)."""
    try:
        with urllib.request.urlopen(url, timeout=10) as answer:  # noqa: S310 - a loopback URL the test built
            return json.loads(answer.read())
    except urllib.error.HTTPError as exc:
        if exc.code in (404, 503):
            return None
        raise


def wait_for(what: str, probe: Callable[[], T | None], timeout: float, every: float = 0.5) -> T:
    """Call ``probe`` until it returns something truthy; fail naming ``what`` after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = probe()
        if value:
            return value
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(every)


def screenshot(driver: Any, path: Path) -> Path:
    """The whole page (the window grown to the page's height, up to 16000 px) as a PNG."""
    height = int(driver.execute_script("return document.documentElement.scrollHeight"))
    driver.set_window_size(1400, min(max(height, 800), 16000))
    time.sleep(0.3)  # let the charts redraw at the new size
    driver.save_screenshot(str(path))
    return path


def page_errors(driver: Any) -> list[str]:
    """The console's errors since the last call (a script exception, a blocked resource, a failed request)."""
    return [entry["message"] for entry in driver.get_log("browser") if entry["level"] == "SEVERE"]
