"""Headless Chromium driven through Selenium and Debian's chromium-driver, for browser tests.

``browser`` is a module-scoped pytest fixture: a Chrome WebDriver at 1280 x 900, offline (the
background services that would reach the network are switched off). Tests that use it are
skipped, with instructions, where Chromium or its driver is missing; under CI a skip fails the
run.
"""

from __future__ import annotations

import shutil

import pytest

from scripts.headless_chromium import CHROMIUM, OFFLINE_FLAGS

CHROMEDRIVER = shutil.which("chromedriver")
FLAGS = [*OFFLINE_FLAGS, "--window-size=1280,900"]
needs_browser = pytest.mark.skipif(
    CHROMIUM is None or CHROMEDRIVER is None,
    reason="browser tests need Debian's chromium and chromium-driver: "
    "apt-get install -y chromium chromium-driver",
)


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in FLAGS:
        options.add_argument(flag)
    options.add_argument(f"--user-data-dir={tmp_path_factory.mktemp('chromium-profile')}")
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    driver.set_page_load_timeout(120)
    yield driver
    driver.quit()
