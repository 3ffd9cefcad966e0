"""End-to-end tests of the desktop app: the real `toolwarden-desktop` binary driven through
tauri-driver and WebKitWebDriver under Xvfb, next to the real `toolwarden` CLI on the same data
directory. Run by scripts/test-desktop (which builds everything and installs the drivers).

Each test gets a fresh data directory and workspace. Screenshots of the pages are written to
docs/screenshots/ as the tests pass through them.
"""

import json
import os
import signal
import socket
import subprocess
import time
from pathlib import Path

import pytest
from selenium import webdriver
from selenium.common.exceptions import TimeoutException
from selenium.webdriver.common.by import By
from selenium.webdriver.common.options import ArgOptions
from selenium.webdriver.support import expected_conditions as ec
from selenium.webdriver.support.ui import WebDriverWait

REPO = Path(__file__).resolve().parents[2]
TARGET = Path(os.environ.get("CARGO_TARGET_DIR", REPO / "target"))
APP = Path(os.environ.get("TW_DESKTOP", TARGET / "debug" / "toolwarden-desktop"))
CLI = Path(os.environ.get("TW_CLI", TARGET / "debug" / "toolwarden"))
SHOTS = REPO / "docs" / "screenshots"
WAIT = 20


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def places(tmp_path):
    data = tmp_path / "data"
    ws = tmp_path / "ws"
    ws.mkdir()
    config = tmp_path / "config.toml"
    config.write_text(f'license_tier = "pro"\nworkspace = ["{ws}"]\n')
    return {"data": data, "ws": ws, "config": config}


def cli(places, *args, wait=True):
    cmd = [str(CLI), "--data-dir", str(places["data"]), "--config", str(places["config"]), *args]
    if wait:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


@pytest.fixture
def app(places):
    """The desktop app on the test's data directory, through a tauri-driver of its own."""
    port = free_port()
    driver_proc = subprocess.Popen(
        ["tauri-driver", "--port", str(port), "--native-port", str(free_port())],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.time() + WAIT
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if time.time() > deadline:
                    raise
                time.sleep(0.1)
        options = ArgOptions()
        options.set_capability("browserName", "wry")
        options.set_capability(
            "tauri:options",
            {
                "application": str(APP),
                "args": ["--data-dir", str(places["data"]), "--config", str(places["config"])],
            },
        )
        started = time.time()
        # tauri-driver accepts connections before WebKitWebDriver behind it is up; the first
        # session of a run can be refused while it starts.
        for attempt in range(5):
            try:
                driver = webdriver.Remote(
                    command_executor=f"http://127.0.0.1:{port}", options=options
                )
                break
            except Exception:
                if attempt == 4:
                    raise
                time.sleep(1)
        WebDriverWait(driver, WAIT).until(ec.presence_of_element_located((By.ID, "page-tools")))
        driver.cold_start_s = time.time() - started
        try:
            yield driver
        finally:
            driver.quit()
    finally:
        # SIGTERM, not SIGKILL: tauri-driver then stops the WebKitWebDriver it started.
        driver_proc.send_signal(signal.SIGTERM)
        try:
            driver_proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            driver_proc.kill()


def wait_for(driver, css, timeout=WAIT):
    return WebDriverWait(driver, timeout).until(
        ec.presence_of_element_located((By.CSS_SELECTOR, css))
    )


def shot(driver, name):
    SHOTS.mkdir(parents=True, exist_ok=True)
    driver.save_screenshot(str(SHOTS / f"{name}.png"))


def test_a_cli_call_waiting_for_approval_is_approved_in_the_app_and_audited(app, places):
    print(f"cold start to the first interactive frame: {app.cold_start_s:.2f} s")
    shot(app, "tools")
    victim = places["ws"] / "victim.txt"
    victim.write_text("bye")
    # delete_file asks a person before every call; the CLI waits for the answer.
    call = cli(places, "call", "delete_file", "--args", json.dumps({"path": "victim.txt"}), wait=False)
    dialog = wait_for(app, "#confirm-dialog")
    assert dialog.find_element(By.CSS_SELECTOR, ".confirm-tool").text == "delete_file"
    assert dialog.find_element(By.CSS_SELECTOR, ".confirm-caller").text == "cli"
    shot(app, "confirmation")
    app.find_element(By.ID, "confirm-approve").click()
    out, err = call.communicate(timeout=WAIT)
    assert call.returncode == 0, err
    result = json.loads(out)
    assert result["status"] == "success", result
    assert not victim.exists()
    # The audit viewer shows the row with its decision trace.
    app.find_element(By.ID, "nav-audit").click()
    wait_for(app, "#page-audit")
    app.find_element(By.ID, "audit-refresh").click()
    row = wait_for(app, f'tr[data-execution-id="{result["execution_id"]}"]')
    assert row.find_element(By.CSS_SELECTOR, ".audit-tool").text == "delete_file"
    assert row.find_element(By.CSS_SELECTOR, ".audit-status").text == "success"
    row.find_element(By.CSS_SELECTOR, ".audit-tool").click()
    detail = wait_for(app, "#audit-detail")
    lines = [e.text for e in detail.find_elements(By.CSS_SELECTOR, ".trace-line")]
    assert any(line.startswith("confirmation:") for line in lines), lines
    shot(app, "audit")
    for page in ["confirmations", "live", "settings"]:
        app.find_element(By.ID, f"nav-{page}").click()
        wait_for(app, f"#page-{page}")
        shot(app, page)


def test_a_tool_switched_off_for_the_tier_is_denied_to_the_next_call(app, places):
    ok = cli(places, "call", "echo", "--args", json.dumps({"message": "hi"}))
    assert ok.returncode == 0, ok.stderr
    row = wait_for(app, 'tr[data-tool="echo"]')
    toggle = row.find_element(By.CSS_SELECTOR, "input.tool-enabled")
    assert toggle.is_selected()
    toggle.click()
    WebDriverWait(app, WAIT).until(
        lambda d: not d.find_element(
            By.CSS_SELECTOR, 'tr[data-tool="echo"] input.tool-enabled'
        ).is_selected()
    )
    denied = cli(places, "call", "echo", "--args", json.dumps({"message": "hi"}))
    assert denied.returncode == 7, (denied.stdout, denied.stderr)
    assert json.loads(denied.stdout)["error"]["code"] == "tool_disabled"
