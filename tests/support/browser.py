"""Headless Debian Chromium driven through selenium for e2e tests; nothing downloads a browser or driver.

The driver path is passed explicitly, so selenium-manager (which would fetch a browser) never runs. Each
session gets a fresh profile directory; on failure the caller saves a screenshot and the page source.
"""

from __future__ import annotations

import contextlib
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path

from selenium import webdriver
from selenium.common.exceptions import WebDriverException
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.support.wait import WebDriverWait

CHROMIUM = Path("/usr/bin/chromium")
CHROMEDRIVER = Path("/usr/bin/chromedriver")
# Quiet, offline and sandbox-free: the test box has no GPU, no user namespaces, and must not phone home.
FLAGS = (
    "--headless=new",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--window-size=1280,900",
)


def missing() -> str | None:
    """Why the browser cannot run here (scripts/browser-setup installs both), or None."""
    absent = [str(p) for p in (CHROMIUM, CHROMEDRIVER) if not p.exists()]
    return f"missing {', '.join(absent)}: run scripts/browser-setup" if absent else None


@contextlib.contextmanager
def chromium(profile: Path) -> Iterator[WebDriver]:
    """A headless Chromium with a fresh profile under `profile`; quit (and its profile removed) on exit."""
    shutil.rmtree(profile, ignore_errors=True)
    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for flag in (*FLAGS, f"--user-data-dir={profile}"):
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service(executable_path=str(CHROMEDRIVER)), options=options)
    try:
        yield driver
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)


def wait_for(driver: WebDriver, cond: Callable[[WebDriver], object], timeout: float, what: str) -> object:
    """Poll `cond` on the page until it returns something truthy; fail naming `what` after `timeout` s."""
    return WebDriverWait(driver, timeout, poll_frequency=0.1, ignored_exceptions=(WebDriverException,)).until(
        cond, f"timed out after {timeout}s waiting for {what}"
    )


def keep_evidence(driver: WebDriver, where: Path, name: str) -> Path:
    """Save a screenshot and the page source as `where/name.png|.html`; returns the PNG path."""
    where.mkdir(parents=True, exist_ok=True)
    png = where / f"{name}.png"
    driver.save_screenshot(str(png))
    (where / f"{name}.html").write_text(driver.page_source)
    return png
