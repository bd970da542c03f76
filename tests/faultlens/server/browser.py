"""Headless Chromium for the UI tests (selenium + Debian's chromium and chromium-driver).

`chrome(tmp_path)` skips the test when the browser is missing, unless
FAULTLENS_REQUIRE_BROWSER is set (CI sets it), in which case it fails.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
CHROMEDRIVER = shutil.which("chromedriver") or ("/usr/bin/chromedriver" if os.path.exists("/usr/bin/chromedriver") else None)
DOCS = Path(__file__).resolve().parents[3] / "docs"


def chrome(tmp_path: Path):
    """A fresh headless Chromium WebDriver with its own profile under tmp_path."""
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
    # An explicit chromedriver path: selenium must not try to download one.
    return webdriver.Chrome(service=Service(executable_path=CHROMEDRIVER), options=options)


def save_for_docs(screenshot: Path, name: str) -> None:
    """Copy a screenshot to docs/ when FAULTLENS_SAVE_SCREENSHOT is set (how the README's image is made)."""
    if os.environ.get("FAULTLENS_SAVE_SCREENSHOT"):
        DOCS.mkdir(exist_ok=True)
        shutil.copy(screenshot, DOCS / name)
