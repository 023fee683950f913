"""The dashboard in a real browser (headless Chromium), as a person uses it.

On a finished demo workspace: the run list shows the run, a validation sample plays (its ``currentTime``
advances), each eval render's prompt is beside its video, a failed trial shows its reason, a request for
a file outside the workspace gets 404. On a run whose toy trainer is training: the run is listed as
training and its loss curve gains points while the page is open. A non-loopback bind answers 401 until
the token comes. Each page is saved as a screenshot (``$LTX_TEST_ARTIFACTS``, else the test's temp folder).
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.ui.browser import (
    MISSING,
    executables,
    get_json,
    page_errors,
    screenshot,
    serve,
    start_chromium,
    wait_for,
)
from tests.ui.conftest import ENGINE

# Skipped before any fixture runs: without a browser, the demo workspace is not built at all.
pytestmark = [pytest.mark.browser, pytest.mark.timeout(400), pytest.mark.skipif(executables() is None, reason=MISSING)]


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    driver = start_chromium(tmp_path_factory.mktemp("chromium-profile"))
    driver.set_script_timeout(30)
    yield driver
    driver.quit()


@pytest.fixture(scope="module")
def demo_run(demo_workspace: Path) -> tuple[Path, str]:
    """The demo's workspace and its one run's name."""
    # The run's folder is the one with a run.yaml: the demo's clips lie beside it in demo-data/.
    return demo_workspace, next(p.name for p in sorted(demo_workspace.iterdir()) if (p / "run.yaml").is_file())


def test_the_finished_demo_run_is_listed_and_its_page_shows_each_part(
        browser: Any, demo_run: tuple[Path, str], served: list[subprocess.Popen[str]], artifacts: Path) -> None:
    from selenium.webdriver.common.by import By

    workspace, name = demo_run
    url = serve(workspace, served)
    browser.get(url)
    row = wait_for("the run's row", lambda: browser.find_elements(By.CSS_SELECTOR, f'tr[data-run="{name}"]'), 10)[0]
    assert "finished" in row.text and "60/60" in row.text
    assert page_errors(browser) == []
    screenshot(browser, artifacts / "ui-runs.png")

    browser.get(f"{url}runs/{name}")
    chart = wait_for("the loss curve", lambda: browser.find_elements(By.CSS_SELECTOR, "#loss-chart svg polyline"), 10)
    assert chart and int(browser.find_element(By.ID, "loss-chart").get_attribute("data-points")) >= 20
    # What the run generates, in the header, as plan.md says it (#43 point 4).
    planned = re.search(r"^- Generates: (.+)$", (workspace / name / "plan.md").read_text(), re.M)
    header = browser.find_element(By.ID, "header").text.lower()  # labels are upper-cased by the stylesheet
    assert planned and f"generates\n{planned.group(1).lower()}" in header, header
    # A validation sample plays: muted (a page may autoplay only so), then its clock moves.
    played = browser.execute_async_script("""
        const done = arguments[arguments.length - 1];
        const video = document.querySelector('#sample-grid video');
        video.muted = true;
        video.play().then(() => setTimeout(() => done(video.currentTime), 800), (e) => done('error: ' + e));
    """)
    assert isinstance(played, (int, float)) and played > 0, played
    # Each eval render's prompt is beside its video: the figure pairs the file with the prompt the run recorded.
    recorded = json.loads((workspace / name / "outputs" / "eval" / "prompts.json").read_text())["renders"]
    shown = browser.execute_script("""
        return [...document.querySelectorAll('figure.render')].map((f) => [
            f.querySelector('video').getAttribute('src'), f.querySelector('figcaption.prompt').firstChild.textContent]);
    """)
    expected = sorted([f"/files/{Path(r['file']).relative_to(workspace).as_posix()}", r["prompt"]] for r in recorded)
    assert sorted(shown) == expected and len(expected) == 7  # 3 training captions, 3 generic, 1 held out
    # The out-of-memory trial is marked, with its reason, beside the trial that fits and the chart.
    failed = browser.find_elements(By.CSS_SELECTOR, "#trials tr.failed")
    assert failed and all("out of memory" in row.text for row in failed)
    assert int(browser.find_element(By.ID, "trials-chart").get_attribute("data-points")) >= 1
    # A file outside the workspace: 404, however the path is spelt.
    statuses = browser.execute_async_script("""
        const done = arguments[arguments.length - 1];
        Promise.all(['/files/..%2f..%2f..%2fetc%2fpasswd', '/files/%2e%2e/%2e%2e/etc/passwd', '/files/%2Fetc%2Fpasswd']
            .map((p) => fetch(p).then((r) => r.status))).then(done);
    """)
    assert statuses == [404, 404, 404]
    # Nothing else went wrong on the page (the three 404s above are the console's only errors).
    assert [e for e in page_errors(browser) if "404 (Not Found)" not in e] == []
    screenshot(browser, artifacts / "ui-run.png")


def test_a_non_loopback_bind_answers_401_until_the_token_comes(
        browser: Any, demo_run: tuple[Path, str], served: list[subprocess.Popen[str]], artifacts: Path) -> None:
    from selenium.webdriver.common.by import By

    workspace, name = demo_run
    url = serve(workspace, served, "--host", "0.0.0.0")
    assert "?token=" in url
    bare = url.split("?", 1)[0].replace("0.0.0.0", "127.0.0.1")
    browser.delete_all_cookies()
    browser.get(bare)
    assert browser.find_element(By.TAG_NAME, "body").text.startswith("401")
    browser.get(url.replace("0.0.0.0", "127.0.0.1"))
    wait_for("the runs list", lambda: browser.find_elements(By.CSS_SELECTOR, f'tr[data-run="{name}"]'), 10)
    assert "token=" not in browser.current_url  # redirected: the token left the address bar
    browser.get(f"{bare}runs/{name}")  # the cookie carries it from now on
    assert wait_for("the run page", lambda: browser.find_elements(By.CSS_SELECTOR, "#timeline li"), 10)
    screenshot(browser, artifacts / "ui-token.png")


@pytest.fixture
def training_run(tmp_path: Path) -> Iterator[Path]:
    """A run whose toy trainer (the reference backend) is training, stopped when the test ends."""
    from ltx_pipeline.cli.demo import write_demo_dataset

    workspace = tmp_path / "ws"
    workspace.mkdir()  # the dashboard starts on it before the run has written anything
    dataset = write_demo_dataset(tmp_path / "data")
    args = ["run", "--workspace", str(workspace), "--run", "live", "--dataset", str(dataset), "--backend", "reference",
            "--assume-gpu", "NVIDIA H100 80GB HBM3,81559", "--buckets", "96x64x25", "--steps", "600",
            "--checkpoint-interval", "5000", "--validation-interval", "5000", "--autotune", "off", "--skip-eval",
            "--approve"]
    env = {**os.environ, "LTX_REFERENCE_LOG_EVERY": "2", "LTX_PIPELINE_WORKSPACE": str(workspace)}
    driver = subprocess.Popen([*ENGINE, *args], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                              start_new_session=True)
    try:
        yield workspace
    finally:
        subprocess.run([*ENGINE, "stop", "--workspace", str(workspace), "--run", "live", "--interrupt-timeout", "10"],
                       capture_output=True, timeout=60, env=env)
        try:
            driver.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(driver.pid, signal.SIGKILL)  # the group this test started (start_new_session)
            driver.wait(timeout=30)


def test_a_training_run_is_listed_and_its_loss_curve_grows(
        browser: Any, training_run: Path, served: list[subprocess.Popen[str]], artifacts: Path) -> None:
    from selenium.webdriver.common.by import By

    url = serve(training_run, served)

    def training_points() -> int | None:
        live = get_json(f"{url}api/runs/live")
        if not live or (live["run"]["training"] or {}).get("state") != "running" or not live["series"]:
            return None
        return len(live["series"][0]["steps"]) if len(live["series"][0]["steps"]) >= 2 else None

    wait_for("the toy trainer to log its first steps", training_points, 240)
    browser.get(url)
    row = wait_for("the run's row", lambda: browser.find_elements(By.CSS_SELECTOR, 'tr[data-run="live"]'), 10)[0]
    assert "train" in row.text and "/600" in row.text
    # The list re-reads the store every poll: the step shown moves on without a reload.

    def step_shown() -> str:
        return str(browser.find_element(By.CSS_SELECTOR, 'tr[data-run="live"] td.step').text)

    before = step_shown()
    wait_for("the runs list to show a later step", lambda: step_shown() != before, 15)
    # The GPU board (#46): the run holds its one assumed GPU for training, with the trainer pinned on it.
    held = browser.find_element(By.CSS_SELECTOR, '#gpus-held tr[data-gpu="0"]').text
    trainer = next(p for p in get_json(f"{url}api/runs")["gpus"]["holders"] if p["run"] == "live")
    assert "live" in held and "train" in held and "train 1 (pid " in held and trainer["running"]
    assert browser.find_element(By.ID, "gpu-queue-empty").is_displayed()
    screenshot(browser, artifacts / "ui-runs-training.png")
    browser.get(f"{url}runs/live")

    def points() -> int:
        return int(browser.find_element(By.ID, "loss-chart").get_attribute("data-points") or 0)

    first = wait_for("the loss curve", points, 10)
    grown = wait_for("the loss curve to gain points", lambda: points() if points() > first else None, 30)
    assert grown > first
    assert "running" in browser.find_element(By.ID, "training-facts").text
    screenshot(browser, artifacts / "ui-run-training.png")
