"""Headless Chromium (selenium) on a page of the MLflow UI: what a user sees there, read from the rendered page.

The README test (test_readme.py) opens the UI link the README gives, on the `mlflow ui` the README starts, after
its runs; the screenshot is kept in test-artifacts/mlflow-ui.png (RAYLAB_TEST_ARTIFACTS to put it elsewhere).
"""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

import pytest

from tests.e2e.test_interrupt import wait_for

ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = Path(os.environ.get("RAYLAB_TEST_ARTIFACTS", ROOT / "test-artifacts"))
CHARTS = ("samples_per_sec", "step_time_p50_ms", "val_accuracy")


def browser():
    chromium, driver = shutil.which("chromium"), shutil.which("chromedriver")
    if not (chromium and driver):
        pytest.fail(
            "headless Chromium is not installed: run the tests with scripts/test.sh (it installs chromium and "
            "chromium-driver with apt) or apt-get install chromium chromium-driver"
        )
    from selenium import webdriver
    from selenium.webdriver.chrome.options import Options
    from selenium.webdriver.chrome.service import Service

    options = Options()
    options.binary_location = chromium
    for arg in (
        "--headless=new",
        "--no-sandbox",
        "--window-size=1600,1000",
        "--disable-dev-shm-usage",
        "--disable-gpu",
    ):
        options.add_argument(arg)
    return webdriver.Chrome(service=Service(driver), options=options)


# The top of every leaf element that shows text, by its text: where each chart and section sits on the page.
TOPS = """
    const out = {};
    for (const e of document.querySelectorAll('body *')) {
      if (e.children.length) continue;
      const t = (e.textContent || '').trim(), r = e.getBoundingClientRect();
      if (r.width > 0 && r.height > 0 && !(t in out)) out[t] = r.top;
    }
    return out;"""


def look(link: str, expect: tuple[str, ...]) -> dict:
    """Opens `link`, waits up to 120 s for every text in `expect` and raylab's charts; {"page": its text, "tops":
    leaf text -> top, "waited": None or the timeout's message}, with a screenshot kept."""
    d = browser()
    try:
        d.get(link)
        text = lambda: d.execute_script("return document.body ? document.body.innerText : ''") or ""  # noqa: E731
        waited = None
        try:
            wait_for(lambda: all(t in text() for t in (*expect, *CHARTS)), 120, "the trials and charts to render")
        except TimeoutError as e:
            waited = str(e)
        finally:
            time.sleep(3)  # the charts finish drawing
            ARTIFACTS.mkdir(parents=True, exist_ok=True)
            d.save_screenshot(str(ARTIFACTS / "mlflow-ui.png"))
        return {"page": text(), "tops": d.execute_script(TOPS), "waited": waited}
    finally:
        d.quit()
