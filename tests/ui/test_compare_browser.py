"""The dashboard's compare page in a real browser (headless Chromium): issue #45's "runs compared".

On two finished reference runs that differ only in their learning rate (``tests/compare_workspace.py``): the
runs page links to the picker, ticking both runs opens their comparison, the figures table shows each run's
recorded figures, the differences name the learning-rate patch, the loss chart overlays one curve per run,
and each evaluation prompt's row holds one playable render per run. The page is saved as a screenshot.
"""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.compare_workspace import compare_workspace  # noqa: F401 - fixture
from tests.ui.browser import MISSING, executables, page_errors, screenshot, serve, start_chromium, wait_for

pytestmark = [pytest.mark.browser, pytest.mark.timeout(400), pytest.mark.skipif(executables() is None, reason=MISSING)]


def test_the_compare_page_overlays_both_runs_and_puts_their_renders_of_a_prompt_in_one_row(
        compare_workspace: Path, served: list[subprocess.Popen[str]], artifacts: Path,  # noqa: F811
        tmp_path: Path) -> None:
    from selenium.webdriver.common.by import By

    driver: Any = start_chromium(tmp_path / "profile")
    try:
        url = serve(compare_workspace, served)
        driver.get(url)
        wait_for("the compare link", lambda: driver.find_elements(By.ID, "compare-link"), 10)[0].click()
        boxes = wait_for("the run picker", lambda: driver.find_elements(By.CSS_SELECTOR, "#pick input[name=run]"), 10)
        assert [b.get_attribute("value") for b in boxes] == ["r1", "r2"]
        for box in boxes:
            box.click()
        driver.find_element(By.CSS_SELECTOR, "#pick button[type=submit]").click()
        wait_for("the figures table", lambda: driver.find_elements(By.ID, "figures"), 10)
        assert driver.current_url.endswith("/compare?run=r1&run=r2")

        steps = driver.find_elements(By.CSS_SELECTOR, 'tr[data-figure="steps"] td.num')
        assert [cell.text for cell in steps] == ["4", "4"]
        loss = driver.find_elements(By.CSS_SELECTOR, 'tr[data-figure="final_train_loss"] td.num')
        assert len(loss) == 2 and all("(step 4)" in cell.text for cell in loss) and loss[0].text != loss[1].text
        holdout = driver.find_elements(By.CSS_SELECTOR, 'tr[data-figure="lowest_holdout_loss"] td.num')
        assert [c.text for c in holdout] == ["-", "-"] and "holdout" in (holdout[0].get_attribute("title") or "")

        differs = driver.find_elements(By.CSS_SELECTOR, "#differences tbody tr")
        assert [row.get_attribute("data-path") for row in differs] == ["optimization.learning_rate"]
        assert "0.01" in differs[0].text and "0.005" in differs[0].text and "learning rate" in differs[0].text

        chart = driver.find_element(By.ID, "loss-overlay")
        assert len(chart.find_elements(By.CSS_SELECTOR, "svg polyline")) == 2  # one curve per run
        assert [k.text for k in chart.find_elements(By.CSS_SELECTOR, ".legend span")] == ["r1", "r2"]
        assert "holdout-loss.json" in driver.find_element(By.ID, "holdout-overlay").text  # none measured: says so

        rows = driver.find_elements(By.CSS_SELECTOR, ".compare-row")
        assert rows and any(r.get_attribute("data-prompt") == "a red square on a white background" for r in rows)
        for row in rows:
            runs = [f.get_attribute("data-run") for f in row.find_elements(By.CSS_SELECTOR, "figure.render")]
            assert runs == ["r1", "r2"] and len(row.find_elements(By.CSS_SELECTOR, "video")) == 2
        played = driver.execute_async_script("""
            const done = arguments[arguments.length - 1];
            const video = document.querySelector('.compare-row video');
            video.muted = true;
            video.play().then(() => setTimeout(() => done(video.currentTime), 800), (e) => done('error: ' + e));
        """)
        assert isinstance(played, (int, float)) and played > 0, played
        assert page_errors(driver) == []
        screenshot(driver, artifacts / "ui-compare.png")

        driver.get(f"{url.rstrip('/')}/compare?run=r1&run=nope")
        assert "404" in driver.page_source
    finally:
        driver.quit()
