"""The studio in a real browser (headless Chromium): the whole loop of a run, driven from its pages.

On the reference backend (the toy trainer, an assumed H100): a run created from a folder of clips picked
under ``--data-root``, its plan approved, a caption edited in place and the captions approved, its loss
curve growing, then stopped, resumed, continued by 20 steps; a run that fails (its metadata names a clip
that is not there) removed, its file untouched. And the refusals: a POST from another origin, a POST
without its CSRF token, a folder outside ``--data-root``, an Approve whose subject is stale. The
screenshots of the README (new run, captions gate, a training run) are taken on the way: into
``$LTX_DOCS_SCREENSHOTS`` when set (``docs`` to refresh the README's), else the test's artifacts folder.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from tests.ui.browser import MISSING, executables, get_json, page_errors, serve, start_chromium, wait_for

pytestmark = [pytest.mark.browser, pytest.mark.timeout(180), pytest.mark.skipif(executables() is None, reason=MISSING)]

GPU = "NVIDIA H100 80GB HBM3,81559"
STEPS = 60  # long enough to see the curve grow and stop it half-way (the toy does about 6 steps a second)
REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def data_root(tmp_path: Path) -> Path:
    """The folder given as ``--data-root``: six clips without captions, and a metadata file naming a missing clip."""
    from ltx_pipeline.cli.demo import write_demo_dataset

    root = (tmp_path / "data").resolve()  # as the server resolves its roots
    write_demo_dataset(root, clips=6, captions=False)  # root/videos/*.mp4
    (root / "broken").mkdir()
    (root / "broken" / "dataset.json").write_text(json.dumps([{"caption": "a clip that is not here",
                                                               "video": "missing.mp4"}]))
    return root


@pytest.fixture
def browser(tmp_path: Path) -> Any:
    driver = start_chromium(tmp_path / "chromium-profile")
    driver.set_script_timeout(30)
    yield driver
    driver.quit()


@pytest.fixture
def shots(artifacts: Path) -> Path:
    """Where the README's screenshots go: ``$LTX_DOCS_SCREENSHOTS`` (relative to the repository), else artifacts."""
    wanted = os.environ.get("LTX_DOCS_SCREENSHOTS")
    folder = REPO / wanted if wanted else artifacts
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def _shot(driver: Any, path: Path, element_id: str | None = None, height: int = 1000) -> None:
    """The window (1400 x ``height``), scrolled to ``element_id``'s top (else the page's), as a PNG."""
    driver.set_window_size(1400, height)
    if element_id:
        driver.execute_script("document.getElementById(arguments[0]).scrollIntoView({block: 'start'})", element_id)
    else:
        driver.execute_script("window.scrollTo(0, 0)")
    time.sleep(0.4)  # the charts redraw at the new size
    driver.save_screenshot(str(path))
    driver.set_window_size(1400, 1000)


def _fill(driver: Any, values: dict[str, str]) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.select import Select

    for key, value in values.items():
        field = driver.find_element(By.ID, f"field-{key}")
        if field.tag_name == "select":
            Select(field).select_by_value(value)
        elif field.get_attribute("type") == "checkbox":
            if field.is_selected() != (value == "true"):
                field.click()
        else:
            field.clear()
            field.send_keys(value)


def _fetch(driver: Any, path: str, body: Any = None, token: str | None = "page") -> list[Any]:
    """``[status, answer text]`` of a fetch from the page's own script: a POST of JSON when ``body`` is given.

    ``token`` "page" sends the page's CSRF token (its meta tag), None sends none, anything else is sent as is.
    """
    return list(driver.execute_async_script("""
        const [path, body, token, done] = arguments;
        const headers = {'Content-Type': 'application/json'};
        const meta = document.querySelector('meta[name="csrf-token"]');
        if (token === 'page') headers['X-CSRF-Token'] = meta ? meta.content : '';
        else if (token !== null) headers['X-CSRF-Token'] = token;
        const init = body === null ? {cache: 'no-store'} : {method: 'POST', headers, body: JSON.stringify(body)};
        fetch(path, init).then((r) => r.text().then((t) => done([r.status, t])), (e) => done([0, String(e)]));
    """, path, body, token))


def _live(url: str, run: str) -> Any:
    return get_json(f"{url}api/runs/{run}")


def _state(url: str, run: str) -> tuple[str | None, Any]:
    live = _live(url, run)
    return (live["run"]["state"], live) if live else (None, None)


def _accept_confirm(driver: Any, says: str) -> str:
    from selenium.webdriver.support import expected_conditions
    from selenium.webdriver.support.ui import WebDriverWait

    alert = WebDriverWait(driver, 15).until(expected_conditions.alert_is_present())
    text = str(alert.text)
    assert says in text, text
    alert.accept()
    return text


def _refusals_before_any_run(driver: Any, url: str, workspace: Path, outside: Path) -> None:
    """Cross-origin, no token, a bad token, a folder outside the root: each refused, none leaving a trace."""
    from selenium.webdriver.common.by import By

    # Another origin (the same server as localhost): its page posts a form at 127.0.0.1, as a hostile page would.
    parts = urlsplit(url)
    other = f"{parts.scheme}://localhost:{parts.port}/"
    driver.get(other)
    driver.execute_script("""
        const form = document.createElement('form');
        form.method = 'POST'; form.action = arguments[0]; form.enctype = 'text/plain';
        const field = document.createElement('input');
        field.name = '{"run": "evil", "dataset": "' + arguments[1] + '", "x": "'; field.value = '"}';
        form.appendChild(field); document.body.appendChild(form); form.submit();
    """, f"{url}api/studio/runs", str(outside))
    body = wait_for("the cross-origin POST's answer",
                    lambda: driver.find_element(By.TAG_NAME, "body").text if "api/studio" in driver.current_url
                    else None, 10)
    assert "cross-origin request refused" in body, body
    driver.get(f"{url}new")
    # The same origin without the token, and with a forged one.
    missing = _fetch(driver, "/api/studio/runs", {"run": "sneaky", "dataset": str(outside)}, token=None)
    forged = _fetch(driver, "/api/studio/runs", {"run": "sneaky", "dataset": str(outside)}, token="abc.def")
    assert missing[0] == 403 and "missing or invalid CSRF token" in missing[1], missing
    assert forged[0] == 403 and "missing or invalid CSRF token" in forged[1], forged
    # A folder outside --data-root: the picker does not list it, and the form's submit is refused with one line.
    browsed = _fetch(driver, f"/api/studio/browse?path={outside}")
    assert browsed[0] == 403 and json.loads(browsed[1])["ok"] is False, browsed
    _fill(driver, {"run": "outside", "dataset": str(outside), "backend": "reference", "assume_gpu": GPU})
    driver.find_element(By.ID, "submit-run").click()
    error = wait_for("the form's error line", lambda: driver.find_element(By.ID, "form-error").text, 10)
    assert "data-root" in error and "\n" not in error, error
    assert driver.current_url.endswith("/new")
    runs = get_json(f"{url}api/runs")
    assert runs is None or runs["runs"] == []
    assert sorted(p.name for p in workspace.iterdir() if p.is_dir() and (p / "run.yaml").exists()) == []


def _create_from_the_form(driver: Any, url: str, root: Path, shots: Path) -> None:
    from selenium.webdriver.common.by import By

    driver.get(f"{url}new")
    _fill(driver, {"run": "clips", "backend": "reference", "assume_gpu": GPU, "buckets": "96x64x25",
                   "steps": str(STEPS), "rank": "4", "trigger": "sqr"})
    # The folder picker: the data root, then its videos folder, taken as the dataset.
    driver.find_element(By.ID, "browse").click()
    root_entry = wait_for("the picker's roots", lambda: driver.find_elements(
        By.CSS_SELECTOR, f'#picker-entries button.entry[data-path="{root}"]'), 10)
    root_entry[0].click()
    videos = wait_for("the root's folders", lambda: driver.find_elements(
        By.CSS_SELECTOR, f'#picker-entries button.entry[data-path="{root / "videos"}"]'), 10)
    assert driver.find_elements(By.CSS_SELECTOR, '#picker-entries button.entry[data-kind="dir"]')
    videos[0].click()
    listed = wait_for("the clips", lambda: driver.find_elements(
        By.CSS_SELECTOR, '#picker-entries button.entry[data-kind="video"]'), 10)
    assert len(listed) == 6
    _shot(driver, shots / "studio-new-run.png", height=1100)
    driver.find_element(By.ID, "picker-use").click()
    driver.find_element(By.ID, "advanced").click()
    _fill(driver, {"holdout": "1", "autotune": "off", "skip_eval": "true", "holdout_loss": "off",
                   "validation_media": "none", "checkpoint_interval": "10"})
    assert driver.find_element(By.ID, "field-dataset").get_attribute("value") == str(root / "videos")
    driver.find_element(By.ID, "submit-run").click()
    wait_for("the run's page", lambda: driver.current_url.endswith("/runs/clips"), 60)
    ran = driver.find_element(By.ID, "last-command").text
    assert ran.startswith("Ran: ltx-pipeline run --workspace ") and "--run clips" in ran, ran


def _approve_the_plan(driver: Any, url: str) -> None:
    from selenium.webdriver.common.by import By

    # The page draws the gate as soon as the plan is written (it reloads itself for a gate it did not draw).
    panel = wait_for("the plan gate", lambda: driver.find_elements(By.CSS_SELECTOR, '#gate-panel[data-kind="plan"]'),
                     60)[0]
    assert "Training plan: clips" in panel.text and "## " not in panel.text  # Markdown rendered, not shown raw
    subject = driver.find_element(By.ID, "approve").get_attribute("data-subject")
    assert subject == _live(url, "clips")["gate"]["subject"]
    stale = _fetch(driver, "/api/studio/runs/clips/approve", {"gate": "plan", "subject": "sha256:" + "0" * 64})
    assert stale[0] == 409 and "reload" in stale[1], stale
    driver.find_element(By.ID, "approve").click()
    wait_for("the approval's command", lambda: "approve" in driver.find_element(By.ID, "last-command").text, 15)


def _edit_and_approve_the_captions(driver: Any, url: str, workspace: Path, shots: Path) -> None:
    from selenium.webdriver.common.by import By

    wait_for("the captions gate", lambda: driver.find_elements(By.CSS_SELECTOR, '#gate-panel[data-kind="captions"]'),
             90)
    rows = driver.find_elements(By.CSS_SELECTOR, "#captions figure.caption-row")
    assert len(rows) == 6 and len(driver.find_elements(By.CSS_SELECTOR, "#captions figure.holdout")) == 1
    # Every clip plays beside its caption (the prepared clips are links to the user's files under the root).
    played = driver.execute_async_script("""
        const done = arguments[arguments.length - 1];
        const videos = [...document.querySelectorAll('#captions video')];
        Promise.all(videos.map((v) => { v.muted = true; return v.play().then(() => v); }))
            .then(() => setTimeout(() => done(videos.map((v) => v.currentTime)), 600), (e) => done(String(e)));
    """)
    assert isinstance(played, list) and len(played) == 6 and all(t > 0 for t in played), played
    drawn = driver.find_element(By.ID, "approve").get_attribute("data-subject")
    box = next(b for b in driver.find_elements(By.CSS_SELECTOR, "#captions textarea")
               if "holdout" not in b.find_element(By.XPATH, "ancestor::figure").get_attribute("class"))
    index, clip = box.get_attribute("id").split("-", 1)[1], box.get_attribute("data-clip")
    box.clear()
    box.send_keys("a square of one colour slides across a plain background, drawn by hand")
    driver.find_element(By.ID, f"save-caption-{index}").click()
    wait_for("the caption saved", lambda: driver.find_element(By.ID, f"saved-{index}").text, 10)
    saved = json.loads((workspace / "clips" / "dataset" / "dataset.json").read_text())
    assert [r["caption"] for r in saved if r["video"] == clip] == [
        "a square of one colour slides across a plain background, drawn by hand"]
    resigned = driver.find_element(By.ID, "approve").get_attribute("data-subject")
    assert resigned != drawn  # the captions changed: the page now approves the new ones, and only those
    # The run re-reads the edited captions and asks again, with the subject the page got back from its Save.
    wait_for("the captions gate to ask again", lambda: driver.find_element(By.ID, "approve").is_enabled(), 30)
    assert _live(url, "clips")["gate"]["subject"] == resigned
    stale = _fetch(driver, "/api/studio/runs/clips/approve", {"gate": "captions", "subject": drawn})
    assert stale[0] == 409 and "reload" in stale[1], stale
    _shot(driver, shots / "studio-captions.png", "header", height=1700)
    driver.find_element(By.ID, "approve").click()
    wait_for("the approval's command", lambda: "approve" in driver.find_element(By.ID, "last-command").text, 15)


def _watch_the_curve_grow(driver: Any, url: str, shots: Path) -> None:
    from selenium.webdriver.common.by import By

    def points() -> int:
        found = driver.find_elements(By.ID, "loss-chart")
        return int(found[0].get_attribute("data-points") or 0) if found else 0

    first = wait_for("the loss curve", lambda: points() if points() >= 2 else None, 90)
    wait_for("the loss curve to gain points", lambda: points() > first, 30)
    assert "running" in driver.find_element(By.ID, "training-facts").text
    assert not driver.find_element(By.ID, "gate-panel").is_displayed()  # approved: the page shows the run
    _shot(driver, shots / "studio-training.png", "header", height=1750)


def _finish(driver: Any, url: str, steps: int) -> None:
    """Wait for the trainer to reach ``steps``; then, if the run was left detached, Resume collects it."""
    from selenium.webdriver.common.by import By

    def trained() -> bool:
        state, live = _state(url, "clips")
        training = (live or {}).get("run", {}).get("training") or {}
        return state == "finished" or (training.get("state") == "finished" and training.get("stage") ==
                                       training.get("stages") and training.get("step") == training.get("total"))

    wait_for(f"the trainer to reach step {steps}", trained, 90)
    if _state(url, "clips")[0] != "finished":  # detached, as --detach leaves it: the page says Resume collects it
        wait_for("the page to offer Resume", lambda: driver.find_element(By.ID, "studio-hint").is_displayed(), 30)
        assert "Resume collects" in driver.find_element(By.ID, "studio-hint").text
        driver.find_element(By.ID, "action-resume").click()
    wait_for("the run to finish", lambda: _state(url, "clips")[0] == "finished", 60)
    assert _live(url, "clips")["trained_steps"] == steps


def _stop_resume_continue(driver: Any, url: str) -> None:
    from selenium.webdriver.common.by import By

    wait_for("Stop to be offered", lambda: driver.find_element(By.ID, "action-stop").is_enabled(), 10)
    driver.find_element(By.ID, "action-stop").click()
    said = _accept_confirm(driver, "Stopping loses")
    assert "step(s)" in said, said
    wait_for("the stop's command", lambda: "stop" in driver.find_element(By.ID, "last-command").text, 30)

    def stopped() -> bool:
        state, live = _state(url, "clips")
        return bool(live) and (live["run"]["training"] or {}).get("state") != "running" and "resume" in live["actions"]

    wait_for("the run to stop", stopped, 60)
    assert _state(url, "clips")[0] != "finished"
    wait_for("Resume to be offered", lambda: driver.find_element(By.ID, "action-resume").is_enabled(), 10)
    driver.find_element(By.ID, "action-resume").click()
    wait_for("the resume's command", lambda: "resume" in driver.find_element(By.ID, "last-command").text, 15)
    _finish(driver, url, STEPS)
    wait_for("Continue to be offered", lambda: driver.find_element(By.ID, "action-continue").is_enabled(), 10)
    steps = driver.find_element(By.ID, "continue-steps")
    steps.clear()
    steps.send_keys("20")
    driver.find_element(By.ID, "action-continue").click()
    wait_for("the continue's command",
             lambda: f"--steps {STEPS + 20}" in driver.find_element(By.ID, "last-command").text, 15)
    wait_for("the run to train again", lambda: _state(url, "clips")[0] != "finished", 30)
    _finish(driver, url, STEPS + 20)


def _remove_a_failed_run(driver: Any, url: str, root: Path, workspace: Path) -> None:
    from selenium.webdriver.common.by import By

    broken = root / "broken" / "dataset.json"
    before = broken.read_bytes()
    driver.get(f"{url}new")
    _fill(driver, {"run": "broken", "dataset": str(broken), "backend": "reference", "assume_gpu": GPU,
                   "buckets": "96x64x25"})
    driver.find_element(By.ID, "submit-run").click()
    wait_for("the run's page", lambda: driver.current_url.endswith("/runs/broken"), 60)
    wait_for("the run to fail", lambda: _state(url, "broken")[0] == "failed", 60)
    wait_for("Remove to be offered", lambda: driver.find_element(By.ID, "action-remove").is_enabled(), 10)
    driver.find_element(By.ID, "action-remove").click()
    _accept_confirm(driver, "broken")
    wait_for("the runs list", lambda: urlsplit(driver.current_url).path == "/", 30)
    assert [r["name"] for r in get_json(f"{url}api/runs")["runs"]] == ["clips"]
    assert not (workspace / "broken").exists() and broken.read_bytes() == before


def _read_only(driver: Any, workspace: Path, served: list[subprocess.Popen[str]]) -> None:
    """``--read-only`` on the same workspace: today's dashboard, no write control drawn, no write route."""
    from selenium.webdriver.common.by import By

    url = serve(workspace, served, "--read-only")
    driver.get(f"{url}runs/clips")
    wait_for("the run page", lambda: driver.find_elements(By.CSS_SELECTOR, "#timeline li"), 10)
    for drawn in ("#studio", "#controls button", "#approve", "#new-run-link", "button.save-caption"):
        assert driver.find_elements(By.CSS_SELECTOR, drawn) == [], drawn
    assert driver.find_element(By.ID, "audit").text  # what was done stays readable
    refused = _fetch(driver, "/api/studio/runs/clips/stop", {"confirm": True})
    assert refused[0] in (404, 405), refused  # no write route is registered at all
    assert _state(url, "clips")[0] == "finished"


def test_the_whole_loop_from_the_browser_and_the_refusals(
        browser: Any, data_root: Path, tmp_path: Path, served: list[subprocess.Popen[str]], shots: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    from selenium.webdriver.common.by import By

    started = time.monotonic()
    workspace = tmp_path / "ws"
    workspace.mkdir()
    outside = tmp_path / "outside"
    outside.mkdir()
    monkeypatch.setenv("LTX_REFERENCE_LOG_EVERY", "2")  # the toy logs every other step: the curve grows in view
    url = serve(workspace, served, "--data-root", str(data_root))
    browser.get(url)
    cookie = browser.get_cookie("ltx_pipeline_csrf")
    assert cookie and cookie["sameSite"] == "Strict" and not cookie["httpOnly"]
    browser.find_element(By.ID, "new-run-link").click()
    wait_for("the new-run form", lambda: browser.find_elements(By.ID, "new-run-form"), 10)

    _refusals_before_any_run(browser, url, workspace, outside)
    _create_from_the_form(browser, url, data_root, shots)
    _approve_the_plan(browser, url)
    _edit_and_approve_the_captions(browser, url, workspace, shots)
    _watch_the_curve_grow(browser, url, shots)
    _stop_resume_continue(browser, url)
    audit = browser.find_element(By.ID, "audit").text
    for action in ("create", "approve", "captions", "stop", "resume", "continue"):
        assert action in audit, audit
    _remove_a_failed_run(browser, url, data_root, workspace)
    # The console's only errors are the refusals this test asked for.
    # (and the favicon a browser asks for when it shows the JSON answer of the cross-origin form).
    errors = [e for e in page_errors(browser) if "/favicon.ico " not in e]
    assert [e for e in errors if "/api/studio/" not in e or not re.search(r"status of (400|403|405|409)", e)] == []
    _read_only(browser, workspace, served)
    print(f"studio loop: {time.monotonic() - started:.0f} s")  # noqa: T201 - the suite's figure
