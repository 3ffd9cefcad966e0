"""pytest hooks for the desktop end-to-end tests: when a test fails, the app's window is saved
as a screenshot (and the page's text printed) under $CARGO_TARGET_DIR/e2e-failures/, so a failure
in CI shows what the app showed."""

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
OUT = Path(os.environ.get("CARGO_TARGET_DIR", REPO / "target")) / "e2e-failures"


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if report.when != "call" or not report.failed:
        return
    driver = item.funcargs.get("app")
    if driver is None:
        return
    try:
        OUT.mkdir(parents=True, exist_ok=True)
        path = OUT / f"{item.name}.png"
        driver.save_screenshot(str(path))
        body = driver.find_element("tag name", "body").text
        print(f"\n--- the app at the failure (screenshot: {path}) ---\n{body}\n---")
    except Exception as e:  # the app may be gone; the failure itself is what matters
        print(f"\n(no screenshot of the failure: {e})")
