"""The web UI in headless Chromium: runs list → failed run → blamed step highlighted.

Skips when Chromium or chromedriver is missing, unless FAULTLENS_REQUIRE_BROWSER
is set (CI sets it), in which case it fails (see `browser.chrome`).
"""

from __future__ import annotations

import base64
import io

import pytest

from faultlens.server import create_app

from .browser import chrome
from .conftest import HTTP, blame_tool_step, run_team, sdk_provider

pytestmark = [pytest.mark.browser, pytest.mark.slow]


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

    driver = chrome(tmp_path)
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

        driver.get(server.url + "/lessons")
        assert driver.find_element(By.ID, "lessons")
    finally:
        driver.quit()
