"""What a user sees in the MLflow UI after a `--quick` run: the trials and the comparison charts, no clicks.

A real `mlflow server` (sqlite behind it), the recipe run against it as a user runs it, then the link raylab
prints opened in headless Chromium (selenium): the rendered page must show every trial's run name and the
charts people compare (samples/s, step time, test accuracy per epoch and against wall time) in the section
raylab's view puts first. The screenshot is kept in test-artifacts/mlflow-ui.png (RAYLAB_TEST_ARTIFACTS
to put it elsewhere).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.e2e.test_interrupt import user_env, wait_for
from tests.e2e.test_job_submit import free_port

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
ARTIFACTS = Path(os.environ.get("RAYLAB_TEST_ARTIFACTS", ROOT / "test-artifacts"))
TRIALS = ("torch:none x1", "tf:none x1")
CHARTS = ("samples_per_sec", "step_time_p50_ms", "val_accuracy")


def browser():
    chromium, driver = shutil.which("chromium"), shutil.which("chromedriver")
    if not (chromium and driver):
        pytest.fail("headless Chromium is not installed: run scripts/setup.sh (it installs chromium and "
                    "chromium-driver with apt) or apt-get install chromium chromium-driver")
    from selenium import webdriver
    from selenium.webdriver.chrome.options import Options
    from selenium.webdriver.chrome.service import Service

    options = Options()
    options.binary_location = chromium
    for arg in ("--headless=new", "--no-sandbox", "--window-size=1600,1000", "--disable-dev-shm-usage",
                "--disable-gpu"):
        options.add_argument(arg)
    return webdriver.Chrome(service=Service(driver), options=options)


@pytest.fixture
def server(tmp_path):
    port = free_port()
    log = open(tmp_path / "mlflow-server.log", "w")
    proc = subprocess.Popen([str(BIN / "mlflow"), "server", "--host", "127.0.0.1", "--port", str(port),
                             "--workers", "1", "--backend-store-uri", f"sqlite:///{tmp_path}/ui.db",
                             "--default-artifact-root", str(tmp_path / "artifacts")],
                            stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    uri = f"http://127.0.0.1:{port}"
    try:
        import urllib.request

        def up():
            try:
                return urllib.request.urlopen(f"{uri}/health", timeout=2).status == 200
            except OSError:
                return False

        wait_for(up, 120, "the MLflow server to answer")
        yield uri
    finally:
        os.killpg(proc.pid, 15)
        proc.wait(timeout=60)
        log.close()


def test_ui_link_opens_on_the_trials_and_their_charts(server, tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    done = subprocess.run([sys.executable, str(ROOT / "recipes" / "fashion.py"), "--quick", "--trials",
                           ",".join(t.split()[0] for t in TRIALS), "--tracking-uri", server],
                          cwd=tmp_path, env=user_env(home), capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    link = re.search(r"^MLflow UI \(this invocation's trials and charts\): (\S+)$", done.stdout, re.M)
    assert link and link.group(1).startswith(server), done.stdout[-2000:]

    d = browser()
    try:
        d.get(link.group(1))
        text = lambda: d.execute_script("return document.body ? document.body.innerText : ''") or ""  # noqa: E731
        try:
            wait_for(lambda: all(t in text() for t in (*TRIALS, *CHARTS)), 120, "the trials and charts to render")
        finally:
            time.sleep(3)  # the charts finish drawing
            ARTIFACTS.mkdir(parents=True, exist_ok=True)
            d.save_screenshot(str(ARTIFACTS / "mlflow-ui.png"))
        page = text()
        assert "Model metrics (0)" not in page
        # raylab's section comes first: its charts sit above the alphabetical "Model metrics" ones.
        tops = d.execute_script("""
            const out = {};
            for (const e of document.querySelectorAll('body *')) {
              if (e.children.length) continue;
              const t = (e.textContent || '').trim(), r = e.getBoundingClientRect();
              if (r.width > 0 && r.height > 0 && !(t in out)) out[t] = r.top;
            }
            return out;""")
        section = next(t for t in tops if t.startswith("raylab: the latest invocation"))
        assert all(tops[c] > tops[section] for c in CHARTS), tops
        if any(t.startswith("Model metrics") for t in tops):
            other = next(t for t in tops if t.startswith("Model metrics"))
            assert all(tops[c] < tops[other] for c in CHARTS), tops
    finally:
        d.quit()
