"""The web UI in headless Chromium: runs list → failed run → blamed step highlighted.

Skips when Chromium or chromedriver is missing, unless FAULTLENS_REQUIRE_BROWSER
is set (CI sets it), in which case it fails. Set FAULTLENS_SAVE_SCREENSHOT=1 to
also copy the trace-page screenshot to docs/ui-trace.png for the README.
"""

from __future__ import annotations

import base64
import io
import os
import shutil
from pathlib import Path

import pytest

from middleware.server import create_app

from .conftest import HTTP, blame_tool_step, run_team, sdk_provider, wait_for

pytestmark = [pytest.mark.browser, pytest.mark.slow]

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
CHROMEDRIVER = shutil.which("chromedriver") or ("/usr/bin/chromedriver" if os.path.exists("/usr/bin/chromedriver") else None)
DOCS = Path(__file__).resolve().parents[3] / "docs"


def _driver(tmp_path):
    missing = [name for name, path in (("chromium", CHROMIUM), ("chromedriver", CHROMEDRIVER)) if not path]
    try:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service
    except ImportError:
        missing.append("selenium (pip)")
    if missing:
        message = f"headless browser test needs {', '.join(missing)} (apt-get install chromium chromium-driver)"
        if os.environ.get("FAULTLENS_REQUIRE_BROWSER"):
            pytest.fail(message)
        pytest.skip(message)
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in (
        "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--disable-background-networking",
        "--disable-component-update", "--disable-sync", "--no-first-run", "--window-size=1280,1400",
        f"--user-data-dir={tmp_path / 'chromium-profile'}",
    ):
        options.add_argument(flag)
    return webdriver.Chrome(service=Service(executable_path=CHROMEDRIVER), options=options)


def _png() -> str:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(1.6, 1.2), dpi=60)
    ax.text(0.5, 0.5, "17 × 23", ha="center", va="center", fontsize=14)
    ax.set_axis_off()
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png")
    plt.close(fig)
    return base64.b64encode(buffer.getvalue()).decode()


def test_runs_list_to_blamed_step(store, serve, tmp_path):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as EC
    from selenium.webdriver.support.ui import WebDriverWait

    driver = _driver(tmp_path)
    try:
        server = serve(create_app(store, on_failure=blame_tool_step(store)))
        provider = sdk_provider(server.url + "/v1/traces")
        good = run_team(provider, query="What is 12 * 12?")
        HTTP.post(f"{server.url}/api/runs/{good['trace_id']}/outcome", json={"success": True, "score": 1.0})
        bad = run_team(provider, query="What is 17 * 23?", fail=True, root_error=False, image_png=_png())
        HTTP.post(f"{server.url}/api/runs/{bad['trace_id']}/outcome", json={"success": False, "score": 0.0, "detail": "answered 544, expected 391"})
        wait = WebDriverWait(driver, 30)

        driver.get(server.url + "/")
        rows = wait.until(EC.presence_of_all_elements_located((By.CSS_SELECTOR, "table#runs tr.run")))
        assert [r.get_attribute("data-run") for r in rows] == [bad["trace_id"], good["trace_id"]]  # failed first
        assert "failed" in rows[0].get_attribute("class")
        driver.save_screenshot(str(tmp_path / "ui-runs.png"))

        rows[0].find_element(By.CSS_SELECTOR, "a.run-link").click()
        # The page polls while attribution is queued and reloads when it is done.
        blamed = wait.until(EC.presence_of_element_located((By.CSS_SELECTOR, "li.step.blamed")))
        assert blamed.get_attribute("data-step") == "1"
        assert blamed.get_attribute("id") == "step-1"
        note = blamed.find_element(By.ID, "blamed-step").text
        assert "A.2" in note and "17 * 32" in note
        assert driver.find_element(By.ID, "blamed-agent").text == "solver"
        assert "A.2" in driver.find_element(By.ID, "blamed-mode").text
        # Highlighted: the blamed step is drawn differently from the others.
        other = driver.find_element(By.ID, "step-0")
        assert blamed.value_of_css_property("background-color") != other.value_of_css_property("background-color")
        assert driver.find_elements(By.CSS_SELECTOR, ".lanes a.block.blamed")
        assert len(driver.find_elements(By.CSS_SELECTOR, "#candidates tbody tr")) == 2
        thumb = driver.find_element(By.CSS_SELECTOR, "#step-0 img.thumb")
        assert driver.execute_script("return arguments[0].complete && arguments[0].naturalWidth", thumb) > 0

        shot = tmp_path / "ui-trace.png"
        driver.execute_script("window.scrollTo(0, 0)")
        driver.save_screenshot(str(shot))
        assert shot.stat().st_size > 10_000
        if os.environ.get("FAULTLENS_SAVE_SCREENSHOT"):
            DOCS.mkdir(exist_ok=True)
            shutil.copy(shot, DOCS / "ui-trace.png")

        driver.get(server.url + "/lessons")
        assert driver.find_element(By.ID, "lessons")
    finally:
        driver.quit()
