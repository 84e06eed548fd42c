"""Headless Chromium for the console's browser tests: the system's browser and driver.

The browser and its driver come from the distribution (Debian's ``chromium`` and
``chromium-driver``; `.ci/run` installs them), never downloaded by Selenium.
Screenshots go to ``.artifacts/screenshots`` (or ``$KAFKRON_ARTIFACTS_DIR``).
"""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import pytest
from selenium import webdriver
from selenium.common.exceptions import WebDriverException
from selenium.webdriver.chrome.service import Service

from tests.kit.paths import REPO

T = TypeVar("T")


def artifacts_dir() -> Path:
    path = Path(os.environ.get("KAFKRON_ARTIFACTS_DIR", REPO / ".artifacts")) / "screenshots"
    path.mkdir(parents=True, exist_ok=True)
    return path


def _find(*names: str) -> str | None:
    for name in names:
        found = shutil.which(name) or (name if Path(name).is_file() else None)
        if found:
            return found
    return None


def chromium() -> webdriver.Chrome:
    """A headless Chromium session; fails the test with what to install if there is none."""
    browser = _find("chromium", "chromium-browser", "/usr/lib/chromium/chromium")
    driver = _find("chromedriver", "/usr/lib/chromium/chromedriver")
    if browser is None or driver is None:
        pytest.fail(
            "no system Chromium or chromedriver: `apt-get install chromium chromium-driver`"
            " (.ci/run does this)",
            pytrace=False,
        )
    options = webdriver.ChromeOptions()
    options.binary_location = browser
    for arg in (
        "--headless=new",
        "--no-sandbox",  # CI runs as root
        "--disable-dev-shm-usage",
        "--disable-gpu",
        "--window-size=1280,860",
    ):
        options.add_argument(arg)
    try:
        return webdriver.Chrome(service=Service(driver), options=options)
    except WebDriverException as exc:
        pytest.fail(f"Chromium did not start: {exc.msg}", pytrace=False)


def wait_for(
    what: str, check: Callable[[], T | None], timeout_s: float, *, every_s: float = 0.5
) -> T:
    """Poll ``check`` until it returns something truthy; fail saying ``what`` never happened."""
    deadline = time.monotonic() + timeout_s
    while True:
        result = check()
        if result:
            return result
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} did not happen within {timeout_s:.0f} s")
        time.sleep(every_s)
