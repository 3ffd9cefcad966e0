"""End-to-end tests of the desktop app: the real `toolwarden-desktop` binary driven through
tauri-driver and WebKitWebDriver under Xvfb, next to the real `toolwarden` CLI on the same data
directory. Run by scripts/test-desktop (which builds everything and installs the drivers).

Each test gets a fresh data directory and workspace; with TOOLWARDEN_TEST_STORE=postgres, also a
fresh database on a throwaway PostgreSQL cluster (tests/pg_cluster.py), named as the team store
in its config, so the same tests show the app working on a team store. Screenshots of the pages are written to
docs/screenshots/ as the tests pass through them. The app's log (what tauri-driver and the app
write) is kept in the test's temporary directory, as app.log.
"""

import itertools
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import pytest
from selenium import webdriver
from selenium.common.exceptions import TimeoutException
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.common.options import ArgOptions
from selenium.webdriver.remote.client_config import ClientConfig
from selenium.webdriver.remote.remote_connection import RemoteConnection
from selenium.webdriver.support import expected_conditions as ec
from selenium.webdriver.support.ui import WebDriverWait

REPO = Path(__file__).resolve().parents[2]
TARGET = Path(os.environ.get("CARGO_TARGET_DIR", REPO / "target"))
APP = Path(os.environ.get("TW_DESKTOP", TARGET / "debug" / "toolwarden-desktop"))
CLI = Path(os.environ.get("TW_CLI", TARGET / "debug" / "toolwarden"))
SHOTS = REPO / "docs" / "screenshots"
WAIT = 20
# The app's own log line saying how long it took to become interactive (src-tauri/src/startup.rs).
APP_LOG = "warn,chromiumoxide::handler=error,tw_desktop::startup=info"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="session")
def team_store():
    """With TOOLWARDEN_TEST_STORE=postgres, a function that makes a fresh database on one
    throwaway cluster for the run; otherwise None (each data directory's SQLite file)."""
    if os.environ.get("TOOLWARDEN_TEST_STORE") != "postgres":
        yield None
        return
    sys.path.insert(0, str(REPO / "tests"))
    from pg_cluster import Cluster

    root = tempfile.mkdtemp(prefix="toolwarden-e2e-pg-")
    if os.geteuid() == 0:
        os.chmod(root, 0o755)
    cluster = Cluster(os.path.join(root, "pg"))
    serial = itertools.count()
    try:
        yield lambda: cluster.create_database(f"e2e_{next(serial)}")
    finally:
        cluster.stop()
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
def places(tmp_path, team_store):
    data = tmp_path / "data"
    ws = tmp_path / "ws"
    ws.mkdir()
    config = tmp_path / "config.toml"
    # The app's HTTP endpoint on a free port, so tests never fight over the default one.
    store = f'[store]\nurl = "{team_store()}"\n' if team_store else ""
    config.write_text(
        f'license_tier = "pro"\nworkspace = ["{ws}"]\n[serve]\nlisten = "127.0.0.1:0"\n{store}'
    )
    return {"data": data, "ws": ws, "config": config, "log": tmp_path / "app.log"}


def cli(places, *args, wait=True):
    cmd = [str(CLI), "--data-dir", str(places["data"]), "--config", str(places["config"]), *args]
    if wait:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


@pytest.fixture
def app(places):
    """The desktop app on the test's data directory, through a tauri-driver of its own."""
    port = free_port()
    # The app inherits tauri-driver's environment and output (through WebKitWebDriver).
    with open(places["log"], "wb") as log:
        driver_proc = subprocess.Popen(
            ["tauri-driver", "--port", str(port), "--native-port", str(free_port())],
            stdout=log,
            stderr=subprocess.STDOUT,
            env={**os.environ, "RUST_LOG": APP_LOG},
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
                connection = RemoteConnection(
                    client_config=ClientConfig(remote_server_addr=f"http://127.0.0.1:{port}")
                )
                driver = webdriver.Remote(command_executor=connection, options=options)
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


def interactive_ms(places, timeout=WAIT):
    """The app's own time from its process's start to its first view drawn with its data, from
    its log line (the UI reports it once the tools list is drawn)."""
    deadline = time.time() + timeout
    while True:
        m = re.search(r"interactive after (\d+) ms", places["log"].read_text(errors="replace"))
        if m:
            return int(m.group(1))
        if time.time() > deadline:
            raise AssertionError(f"the app logged no time to interactive in {places['log']}")
        time.sleep(0.1)


def shot(driver, name):
    SHOTS.mkdir(parents=True, exist_ok=True)
    driver.save_screenshot(str(SHOTS / f"{name}.png"))


def test_the_app_logs_how_long_it_took_to_become_interactive(app, places):
    # A figure to read, not a goal checked: this is the build the tests drive (debug unless
    # TW_DESKTOP says otherwise); scripts/bench desktop times the release build.
    ms = interactive_ms(places)
    build = APP.parent.name if APP.parent.name in ("debug", "release") else str(APP)
    print(f"\ndesktop e2e: interactive after {ms} ms ({build} build)")
    assert ms > 0
    # Reported only once the tools list was drawn: its rows are there already.
    assert app.find_elements(By.CSS_SELECTOR, "#tools-table tbody tr")


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
    app.find_element(By.ID, "audit-usage").click()
    wait_for(app, "#usage svg.usage-chart")
    shot(app, "usage")
    for page in ["settings"]:
        app.find_element(By.ID, f"nav-{page}").click()
        wait_for(app, f"#page-{page}")
        shot(app, page)
    # The app hosts the HTTP endpoint: the URL it shows answers the admin API with the token.
    url = wait_for(app, "#settings-mcp-url").text
    assert url.startswith("http://127.0.0.1:") and url.endswith("/mcp"), url
    token = (places["data"] / "serve-token").read_text().strip()
    request = urllib.request.Request(
        url.removesuffix("/mcp") + "/api/v1/confirmations?state=all",
        headers={"Authorization": f"Bearer {token}"},
    )
    with urllib.request.urlopen(request, timeout=10) as response:
        answered = json.load(response)
    assert [c["tool"] for c in answered] == ["delete_file"], answered


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


def test_the_live_view_shows_a_running_cli_call_and_cancel_stops_it(app, places):
    # Policy is read by each CLI process; this one may run commands.
    places["config"].write_text(
        places["config"].read_text()
        + '[policy]\nallow = ["group:exec"]\n[policy.exec]\nsecurity = "full"\n'
    )
    call = cli(
        places, "call", "exec", "--args", json.dumps({"argv": ["sleep", "30"]}), wait=False
    )
    started = time.time()
    app.find_element(By.ID, "nav-live").click()
    running = wait_for(app, '.live-exec[data-state="running"]')
    execution_id = running.get_attribute("data-execution-id")
    assert running.find_element(By.CSS_SELECTOR, ".live-tool").text == "exec"
    # The elapsed time counts up while it runs.
    first = running.find_element(By.CSS_SELECTOR, ".live-elapsed").text
    WebDriverWait(app, WAIT).until(
        lambda d: d.find_element(
            By.CSS_SELECTOR, f'.live-exec[data-execution-id="{execution_id}"] .live-elapsed'
        ).text
        != first
    )
    shot(app, "live")
    running.find_element(By.CSS_SELECTOR, ".live-cancel").click()
    out, err = call.communicate(timeout=WAIT)
    assert time.time() - started < 25, "the call ran to its end instead of being cancelled"
    assert call.returncode == 4, (out, err)
    result = json.loads(out)
    assert result["status"] == "cancelled", result
    assert result["execution_id"] == execution_id
    done = wait_for(app, f'.live-exec[data-execution-id="{execution_id}"][data-state="done"]')
    assert "cancelled" in done.find_element(By.CSS_SELECTOR, ".badge").text


def test_the_live_view_shows_the_page_an_agents_browser_session_left(app, places):
    """An agent's browser call in another process (the CLI) ends with a picture of the page it
    left, which the live view shows with the session and the address."""
    import http.server
    import threading

    class Site(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            body = (
                b"<!doctype html><title>Watched</title>"
                b"<h1 style='font-size:64px;color:#b00'>Hello from the watched page</h1>"
            )
            self.send_response(200)
            self.send_header("content-type", "text/html")
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    site = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Site)
    threading.Thread(target=site.serve_forever, daemon=True).start()
    url = f"http://site.test:{site.server_address[1]}/watched"
    places["config"].write_text(
        places["config"].read_text()
        + '[policy]\ndefault = "allow"\n[policy.exec]\nsecurity = "full"\n'
        + '[[policy.rules]]\ntools = ["browser_*"]\nallow_domains = ["site.test"]\n'
        + '[network.resolve]\n"site.test" = ["127.0.0.1"]\n'
    )
    # The sleep first, so the app is watching the CLI's feed before the browser call ends.
    calls = places["ws"].parent / "calls.jsonl"
    calls.write_text(
        json.dumps({"tool": "exec", "arguments": {"argv": ["sleep", "3"]}})
        + "\n"
        + json.dumps({"tool": "browser_navigate", "arguments": {"url": url}})
        + "\n"
    )
    run = cli(places, "batch", str(calls), wait=False)
    try:
        app.find_element(By.ID, "nav-live").click()
        wait_for(app, '.live-exec[data-state="running"]')
        frame = wait_for(app, "#live-browsers .browser-frame", timeout=90)
        assert frame.find_element(By.CSS_SELECTOR, ".frame-url").get_attribute("textContent") == url
        assert frame.find_element(By.CSS_SELECTOR, ".frame-session").get_attribute("textContent") != ""
        img = frame.find_element(By.CSS_SELECTOR, "img")
        assert img.get_attribute("src").startswith("data:image/jpeg;base64,/9j/")
        # The picture was decoded and laid out: it has the page's shape.
        WebDriverWait(app, WAIT).until(
            lambda d: d.execute_script(
                "const i = arguments[0]; return i.complete && i.naturalWidth > 100", img
            )
        )
        shot(app, "live-browser")
        out, err = run.communicate(timeout=90)
        assert run.returncode == 0, (out, err)
        frame.find_element(By.CSS_SELECTOR, ".frame-dismiss").click()
        WebDriverWait(app, WAIT).until(
            lambda d: not d.find_elements(By.CSS_SELECTOR, "#live-browsers .browser-frame")
        )
    finally:
        if run.poll() is None:
            run.kill()
        site.shutdown()


def close_like_a_window_manager(title):
    """Asks the X window titled `title` to close, as a window manager's close button does (a
    WM_DELETE_WINDOW client message): Xvfb runs no window manager to click."""
    from Xlib import X, display, protocol

    d = display.Display()
    wm_protocols = d.intern_atom("WM_PROTOCOLS")
    wm_delete = d.intern_atom("WM_DELETE_WINDOW")
    deadline = time.time() + WAIT
    seen = set()
    try:
        while time.time() < deadline:
            windows = [d.screen().root]
            while windows:
                w = windows.pop()
                try:
                    name = w.get_wm_name()
                    children = w.query_tree().children
                except Exception:
                    continue
                if name:
                    seen.add(name)
                if name == title:
                    event = protocol.event.ClientMessage(
                        window=w,
                        client_type=wm_protocols,
                        data=(32, [wm_delete, X.CurrentTime, 0, 0, 0]),
                    )
                    w.send_event(event, event_mask=X.NoEventMask)
                    d.flush()
                    return
                windows.extend(children)
            time.sleep(0.2)
    finally:
        d.close()
    raise AssertionError(f"no window titled {title!r}; windows: {sorted(seen)}")


def type_into(driver, element_id, text):
    """Replaces an input's text the way a person does (select all, type), so input events fire."""
    el = driver.find_element(By.ID, element_id)
    el.click()
    el.send_keys(Keys.CONTROL, "a")
    el.send_keys(Keys.DELETE)
    # WebKitWebDriver drops a "\n" inside typed text; Enter is a key of its own.
    for i, line in enumerate(text.split("\n")):
        if i:
            el.send_keys(Keys.ENTER)
        el.send_keys(line)
    return el


def test_the_custom_tool_form_rejects_an_invalid_schema_at_its_field_then_saves_and_runs(
    app, places
):
    (places["ws"] / "words.txt").write_text("one two three\n")
    app.find_element(By.ID, "tools-add").click()
    wait_for(app, "#tool-form")
    type_into(app, "ct-name", "word_count")
    type_into(app, "ct-description", "Counts the words of a file")
    app.find_element(By.CSS_SELECTOR, '#ct-category option[value="file_system"]').click()
    app.find_element(By.CSS_SELECTOR, '#ct-risk option[value="low"]').click()
    bad = '{"type": "object", "required": ["path"], "properties": {"path": {"type": "strng"}}}'
    type_into(app, "ct-parameters", bad)
    type_into(app, "ct-argv", "wc\n-w\n{path}")
    app.find_element(By.ID, "ct-save").click()
    error = wait_for(app, '.field-error[data-field="parameters"]')
    assert "invalid JSON Schema" in error.text, error.text
    assert "/properties/path/type" in error.text, error.text
    # Nothing was saved: the form is still open and no other field is blamed.
    assert app.find_elements(By.CSS_SELECTOR, '.field-error[data-field="name"]') == []
    shot(app, "custom-tool")
    listed = cli(places, "tools", "list", "--json")
    assert "word_count" not in [t["name"] for t in json.loads(listed.stdout)]

    # Not JSON at all is caught by the form itself, at the same field.
    type_into(app, "ct-parameters", '{"type": ')
    app.find_element(By.ID, "ct-save").click()
    WebDriverWait(app, WAIT).until(
        lambda d: "not JSON"
        in d.find_element(By.CSS_SELECTOR, '.field-error[data-field="parameters"]').text
    )

    good = bad.replace("strng", "string")
    type_into(app, "ct-parameters", good)
    app.find_element(By.ID, "ct-save").click()
    heading = wait_for(app, "#tool-detail h1")
    WebDriverWait(app, WAIT).until(lambda d: d.find_element(By.ID, "tool-edit"))
    assert heading.text == "word_count"
    listed = cli(places, "tools", "list", "--json")
    assert "word_count" in [t["name"] for t in json.loads(listed.stdout)]

    # Try it: the generated form runs the call through the pipeline.
    type_into(app, "try-path", "words.txt")
    app.find_element(By.ID, "try-run").click()
    result = wait_for(app, "#try-result")
    assert result.get_attribute("data-status") == "success", result.text
    assert "3 words.txt" in result.text, result.text
    shot(app, "try-it")
    audit = cli(places, "audit", "list", "--json")
    rows = json.loads(audit.stdout)["rows"]
    assert [(r["tool"], r["agent_id"], r["status"]) for r in rows] == [
        ("word_count", "desktop", "success")
    ], rows

    # Remove it (after a confirm step); the CLI no longer sees it.
    app.find_element(By.ID, "tool-remove").click()
    app.find_element(By.ID, "tool-remove-confirm").click()
    wait_for(app, "#tools-table")
    listed = cli(places, "tools", "list", "--json")
    assert "word_count" not in [t["name"] for t in json.loads(listed.stdout)]


def test_an_approval_remembered_in_the_dialog_is_listed_as_a_grant_and_revoked(app, places):
    for name in ["a.txt", "b.txt"]:
        (places["ws"] / name).write_text("x")
    first = cli(places, "call", "delete_file", "--args", json.dumps({"path": "a.txt"}), wait=False)
    wait_for(app, "#confirm-dialog")
    app.find_element(By.CSS_SELECTOR, '#confirm-remember-scope option[value="tool"]').click()
    app.find_element(By.CSS_SELECTOR, '#confirm-remember-for option[value="3600"]').click()
    app.find_element(By.ID, "confirm-remember").click()
    out, err = first.communicate(timeout=WAIT)
    assert first.returncode == 0, (out, err)
    # The grant covers the tool for this caller: the next call runs without asking.
    second = cli(places, "call", "delete_file", "--args", json.dumps({"path": "b.txt"}))
    assert second.returncode == 0, (second.stdout, second.stderr)
    assert not (places["ws"] / "b.txt").exists()
    app.find_element(By.ID, "nav-confirmations").click()
    row = wait_for(app, "#grants-table tr[data-grant-id]")
    grant_id = row.get_attribute("data-grant-id")
    assert row.find_element(By.CSS_SELECTOR, "strong").text == "delete_file"
    assert "tool" in row.text and "cli" in row.text, row.text
    shot(app, "confirmations")
    listed = json.loads(cli(places, "grants", "list", "--json").stdout)
    assert [g["id"] for g in listed] == [grant_id], listed
    row.find_element(By.CSS_SELECTOR, ".grant-revoke").click()
    WebDriverWait(app, WAIT).until(
        lambda d: d.find_elements(By.CSS_SELECTOR, f'tr[data-grant-id="{grant_id}"]') == []
    )
    assert json.loads(cli(places, "grants", "list", "--json").stdout) == []
    changes = json.loads(cli(places, "audit", "changes", "--json").stdout)
    assert [c["kind"] for c in changes][:2] == ["grant_revoked", "grant_created"], changes


def test_a_call_from_the_app_waiting_for_approval_is_released_by_the_cli(app, places):
    target = places["ws"] / "c.txt"
    target.write_text("x")
    wait_for(app, 'tr[data-tool="delete_file"] .tool-name').click()
    wait_for(app, "#try-path")
    type_into(app, "try-path", "c.txt")
    app.find_element(By.ID, "try-run").click()
    wait_for(app, "#confirm-dialog")
    deadline = time.time() + WAIT
    while True:
        pending = json.loads(cli(places, "confirm", "list", "--json").stdout)
        if pending or time.time() > deadline:
            break
        time.sleep(0.1)
    assert [(p["tool"], p["agent_id"]) for p in pending] == [("delete_file", "desktop")], pending
    approved = cli(places, "confirm", "approve", pending[0]["id"])
    assert approved.returncode == 0, approved.stderr
    result = wait_for(app, '#try-result[data-status="success"]')
    assert result.is_displayed()
    assert not target.exists()
    WebDriverWait(app, WAIT).until(lambda d: d.find_elements(By.ID, "confirm-dialog") == [])


def test_closing_the_window_while_a_call_waits_asks_first(app, places):
    (places["ws"] / "d.txt").write_text("x")
    call = cli(places, "call", "delete_file", "--args", json.dumps({"path": "d.txt"}), wait=False)
    wait_for(app, "#confirm-dialog")
    # The window's title is the badge: it counts the waiting call (after the shell's next poll).
    # Like a person clicking close again when nothing seems to happen: under load the first
    # request can land before the shell is listening for it.
    for attempt in range(3):
        close_like_a_window_manager("Toolwarden (1 call waiting for approval)")
        try:
            dialog = wait_for(app, "#close-dialog", timeout=WAIT if attempt == 2 else 5)
            break
        except TimeoutException:
            if attempt == 2:
                raise
    assert "1 call is waiting for approval" in dialog.text, dialog.text
    shot(app, "close")
    app.find_element(By.ID, "close-stay").click()
    WebDriverWait(app, WAIT).until(lambda d: d.find_elements(By.ID, "close-dialog") == [])
    app.find_element(By.ID, "confirm-deny").click()
    out, _ = call.communicate(timeout=WAIT)
    assert call.returncode == 7, out


READER_SKILL = """---
name: reader
description: Reads files in the workspace to answer questions about them.
tools:
  - read_file
permissions: [filesystem_read]
---
# Reader

Read what the question is about, then answer.
"""


@pytest.fixture
def reader_skill(places):
    """`skills/reader/SKILL.md` in the workspace, written before the app starts (the runtime
    watches the skills directory only if it exists when it starts)."""
    path = places["ws"] / "skills" / "reader" / "SKILL.md"
    path.parent.mkdir(parents=True)
    path.write_text(READER_SKILL)
    return path


def set_text(driver, element_id, text):
    """Replaces a textarea's whole text as one edit (WebKitWebDriver drops "\\n" in typed text),
    firing the input event the page listens to."""
    driver.execute_script(
        "const el = document.getElementById(arguments[0]);"
        "el.focus(); el.value = arguments[1];"
        "el.dispatchEvent(new Event('input', {bubbles: true}));",
        element_id,
        text,
    )


def test_a_skills_tool_removed_in_the_app_is_refused_to_the_cli_and_an_invalid_skill_md_is_not_saved(
    reader_skill, app, places
):
    skill_md = reader_skill
    (places["ws"] / "notes.txt").write_text("x")
    app.find_element(By.ID, "nav-skills").click()
    wait_for(app, "#page-skills")
    wait_for(app, '#skills-list tr[data-skill="reader"] .skill-open').click()
    row = wait_for(app, '#skill-tools tr[data-tool="list_directory"]')
    assert row.get_attribute("data-provenance") == "capability"
    provenance = row.find_element(By.CSS_SELECTOR, ".skill-provenance").text
    assert provenance.startswith("capability filesystem_read"), provenance
    manifest_row = app.find_element(By.CSS_SELECTOR, '#skill-tools tr[data-tool="read_file"]')
    assert manifest_row.get_attribute("data-provenance") == "manifest"
    allowed = cli(
        places, "--skill", "reader", "call", "list_directory", "--args", json.dumps({"path": "."})
    )
    assert allowed.returncode == 0, (allowed.stdout, allowed.stderr)

    # Remove it, with a reason: the next CLI call under the skill is refused by the skill layer.
    row.find_element(By.CSS_SELECTOR, ".skill-remove").click()
    type_into(app, "skill-remove-reason", "listing is not reading")
    app.find_element(By.ID, "skill-remove-confirm").click()
    WebDriverWait(app, WAIT).until(
        lambda d: d.find_elements(By.CSS_SELECTOR, '#skill-tools tr[data-tool="list_directory"]')
        == []
    )
    removed = wait_for(app, '#skill-overrides tr[data-tool="list_directory"]')
    assert removed.get_attribute("data-action") == "remove"
    assert "listing is not reading" in removed.text, removed.text
    denied = cli(
        places, "--skill", "reader", "call", "list_directory", "--args", json.dumps({"path": "."})
    )
    assert denied.returncode == 7, (denied.stdout, denied.stderr)
    assert json.loads(denied.stdout)["error"]["code"] == "skill_denied", denied.stdout
    overrides = json.loads(cli(places, "skills", "overrides", "--json").stdout)
    assert [(o["skill"], o["tool"], o["action"], o["reason"]) for o in overrides] == [
        ("reader", "list_directory", "remove", "listing is not reading")
    ], overrides
    assert overrides[0]["created_by"].startswith("desktop"), overrides
    app.find_element(By.ID, "skills-reload").click()
    WebDriverWait(app, WAIT).until(
        lambda d: d.find_element(
            By.CSS_SELECTOR, '#skills-list tr[data-skill="reader"] td:last-child'
        ).text
        == "1"
    )
    shot(app, "skills")

    # Clear the override: the capability reaches the tool again.
    removed.find_element(By.CSS_SELECTOR, ".override-clear").click()
    wait_for(app, '#skill-tools tr[data-tool="list_directory"][data-provenance="capability"]')
    wait_for(app, "#skill-no-overrides")
    assert json.loads(cli(places, "skills", "overrides", "--json").stdout) == []

    # An invalid SKILL.md is shown with its line, before and on Save, and not written.
    broken = READER_SKILL.replace("  - read_file\n", "  - name: read_file\n    access_level: root\n")
    set_text(app, "skill-text", broken)
    wait_for(app, "#skill-dirty")
    # Checked without saving once typing stops.
    WebDriverWait(app, WAIT).until(
        lambda d: any(
            li.text.startswith("line 6: error: tools[0].access_level:")
            for li in d.find_elements(By.CSS_SELECTOR, "#skill-diagnostics li")
        )
    )
    app.find_element(By.ID, "skill-save").click()
    error = wait_for(app, "#skill-save-error")
    assert "was not saved" in error.text, error.text
    assert "line 6: error: tools[0].access_level:" in error.text, error.text
    assert skill_md.read_text() == READER_SKILL

    fixed = broken.replace("access_level: root", "access_level: elevated")
    set_text(app, "skill-text", fixed)
    app.find_element(By.ID, "skill-save").click()
    WebDriverWait(app, WAIT).until(lambda d: d.find_elements(By.ID, "skill-dirty") == [])
    assert app.find_elements(By.ID, "skill-save-error") == []
    assert skill_md.read_text() == fixed
    WebDriverWait(app, WAIT).until(
        lambda d: d.find_element(
            By.CSS_SELECTOR, '#skill-tools tr[data-tool="read_file"] .skill-level'
        ).text
        == "elevated"
    )
    changes = json.loads(cli(places, "audit", "changes", "--json").stdout)
    assert "skill_saved" in [c["kind"] for c in changes], changes

    # A tool added by an override shows as such, and its row's "Clear override" takes it away.
    type_into(app, "skill-add-tool", "write_file")
    app.find_element(By.CSS_SELECTOR, '#skill-add-level option[value="elevated"]').click()
    type_into(app, "skill-add-reason", "answers are written down")
    app.find_element(By.ID, "skill-add-submit").click()
    added = wait_for(app, '#skill-tools tr[data-tool="write_file"][data-provenance="override"]')
    assert added.find_element(By.CSS_SELECTOR, ".skill-level").text == "elevated"
    added.find_element(By.CSS_SELECTOR, ".skill-clear").click()
    WebDriverWait(app, WAIT).until(
        lambda d: d.find_elements(By.CSS_SELECTOR, '#skill-tools tr[data-tool="write_file"]') == []
    )

    # A new skill starts from a template and is created when saved.
    app.find_element(By.ID, "skill-new").click()
    type_into(app, "skill-new-name", "notes")
    app.find_element(By.ID, "skill-new-create").click()
    wait_for(app, "#skill-dirty")
    template = app.find_element(By.ID, "skill-text").get_attribute("value")
    assert template.startswith("---\nname: notes\n"), template
    app.find_element(By.ID, "skill-save").click()
    wait_for(app, '#skills-list tr[data-skill="notes"]')
    wait_for(app, '#skill-tools tr[data-tool="read_file"]')
    assert (places["ws"] / "skills" / "notes" / "SKILL.md").read_text() == template


def test_the_audit_detail_shows_a_fetch_refused_by_the_gatekeeper(app, places):
    # A CLI on the same data directory, under a policy that lets http_fetch run without asking:
    # what refuses the metadata address is the egress gatekeeper.
    open_policy = places["config"].parent / "open.toml"
    open_policy.write_text(
        places["config"].read_text() + '[policy]\ndefault = "allow"\n'
    )
    cmd = [str(CLI), "--data-dir", str(places["data"]), "--config", str(open_policy),
           "call", "http_fetch", "--args", json.dumps({"url": "http://169.254.169.254/latest/"})]
    ran = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    result = json.loads(ran.stdout)
    assert result["status"] == "permission_denied", result
    app.find_element(By.ID, "nav-audit").click()
    wait_for(app, "#page-audit")
    app.find_element(By.ID, "audit-refresh").click()
    row = wait_for(app, f'tr[data-execution-id="{result["execution_id"]}"]')
    row.find_element(By.CSS_SELECTOR, ".audit-tool").click()
    network = wait_for(app, "#audit-network")
    facts = dict(zip(
        [e.text for e in network.find_elements(By.CSS_SELECTOR, "dt")],
        [e.text for e in network.find_elements(By.CSS_SELECTOR, "dd")],
    ))
    assert facts["Requests"] == "0", facts
    assert facts["Refused by"] == "address class (address 169.254.169.254)", facts
    shot(app, "audit-network")


PEEK_CHAIN = """name: peek
description: Read a note, then say what it holds.
input:
  - {name: path, type: string, required: true}
steps:
  - id: read
    tool: read_file
    arguments: {path: $input.path}
  - id: say
    tool: echo
    arguments: {message: $read.content}
"""

BAD_CHAIN = """name: bad
description: Calls a tool that does not exist.
steps:
  - id: x
    tool: no_such_tool
"""


SLOW_CHAIN = """name: slow
description: Read a note, then wait a long time.
steps:
  - id: read
    tool: read_file
    arguments: {path: notes.txt}
  - id: wait
    tool: exec
    arguments: {argv: [sleep, "30"]}
    depends_on: [read]
"""


@pytest.fixture
def chains_ws(places):
    """A chains folder in the workspace (one chain that loads, one that does not), and a policy
    that lets the app's caller run chains, written before the app starts."""
    folder = places["ws"] / "chains"
    folder.mkdir()
    (folder / "peek.yaml").write_text(PEEK_CHAIN)
    (folder / "bad.yaml").write_text(BAD_CHAIN)
    (folder / "slow.yaml").write_text(SLOW_CHAIN)
    (places["ws"] / "notes.txt").write_text("hello from the note\n")
    places["config"].write_text(
        places["config"].read_text()
        + '[policy]\ndefault = "allow"\n[policy.exec]\nsecurity = "full"\n'
    )
    return folder


def test_chains_are_drawn_checked_as_typed_saved_and_run_with_a_step_timeline(
    chains_ws, app, places
):
    app.find_element(By.ID, "nav-chains").click()
    wait_for(app, "#page-chains")
    # The list: the chain that loaded, the one that did not with its error at FILE:LINE.
    peek = wait_for(app, '#chains-list tr[data-chain="peek"][data-loaded="true"]')
    assert peek.find_element(By.CSS_SELECTOR, ".chain-steps").text == "2"
    bad = app.find_element(By.CSS_SELECTOR, '#chains-list tr[data-chain="bad"]')
    assert bad.get_attribute("data-loaded") == "false"
    problems = [li.text for li in app.find_elements(By.CSS_SELECTOR, "#chains-problems li")]
    assert any(
        p.endswith('bad.yaml:5: error: steps[0].tool: no tool "no_such_tool" is registered')
        for p in problems
    ), problems

    # Its graph: a box per step with its tool, `say` a layer after the `read` it reads.
    peek.find_element(By.CSS_SELECTOR, ".chain-open").click()
    read = wait_for(app, '#chain-graph g.chain-node[data-step="read"]')
    say = app.find_element(By.CSS_SELECTOR, '#chain-graph g.chain-node[data-step="say"]')
    assert (read.get_attribute("data-layer"), say.get_attribute("data-layer")) == ("0", "1")
    assert read.find_element(By.CSS_SELECTOR, ".chain-node-tool").text == "read_file"
    assert say.find_element(By.CSS_SELECTOR, ".chain-node-tool").text == "echo"
    edges = [
        (e.get_attribute("data-from"), e.get_attribute("data-to"), e.get_attribute("class"))
        for e in app.find_elements(By.CSS_SELECTOR, "#chain-graph path.chain-edge")
    ]
    assert edges == [("read", "say", "chain-edge reference")], edges
    assert "tool: read_file" in app.find_element(By.ID, "chain-yaml").get_attribute("textContent")
    shot(app, "chains")

    # A new chain with an unknown tool: the problem shows at its line while typing, and Save
    # writes nothing.
    app.find_element(By.ID, "chain-new").click()
    wait_for(app, "#chain-text")
    broken = PEEK_CHAIN.replace("name: peek", "name: shout").replace(
        "tool: echo", "tool: no_such_tool"
    )
    set_text(app, "chain-text", broken)
    WebDriverWait(app, WAIT).until(
        lambda d: any(
            li.text == 'line 10: error: steps[1].tool: no tool "no_such_tool" is registered'
            for li in d.find_elements(By.CSS_SELECTOR, "#chain-diagnostics li")
        )
    )
    app.find_element(By.ID, "chain-save").click()
    error = wait_for(app, "#chain-save-error")
    assert "no_such_tool" in error.text, error.text
    assert not (chains_ws / "shout.yaml").exists()

    # Fixed and saved: the file is written, the chain is in force and opens.
    set_text(app, "chain-text", broken.replace("tool: no_such_tool", "tool: echo"))
    WebDriverWait(app, WAIT).until(
        lambda d: d.find_element(By.ID, "chain-check-state").text == "no problems: shout"
    )
    app.find_element(By.ID, "chain-save").click()
    wait_for(app, '#chains-list tr[data-chain="shout"][data-loaded="true"]')
    wait_for(app, '#chain-overview[data-chain="shout"]')
    assert "tool: echo" in (chains_ws / "shout.yaml").read_text()
    listed = json.loads(cli(places, "chains", "list", "--json").stdout)
    assert sorted(c["name"] for c in listed["chains"]) == ["peek", "shout", "slow"], listed

    # Run it: the form starts from the input schema; both steps complete on the timeline.
    start = wait_for(app, "#chain-input")
    assert json.loads(start.get_attribute("value")) == {"path": ""}
    set_text(app, "chain-input", json.dumps({"path": "notes.txt"}))
    app.find_element(By.ID, "chain-run-start").click()
    timeline = wait_for(app, '#chain-timeline[data-state="done"]')
    run_id = timeline.get_attribute("data-run-id")
    steps = [
        (r.get_attribute("data-step"), r.get_attribute("data-status"))
        for r in timeline.find_elements(By.CSS_SELECTOR, ".chain-step-row")
    ]
    assert steps == [("read", "completed"), ("say", "completed")], steps
    bars = timeline.find_elements(By.CSS_SELECTOR, ".chain-step-bar.tone-good")
    assert len(bars) == 2
    assert "hello from the note" in app.find_element(By.ID, "chain-run-output").text
    wait_for(app, f'#chain-runs tr[data-run-id="{run_id}"][data-status="completed"]')
    shot(app, "chains-run")
    runs = json.loads(cli(places, "chains", "runs", "--json").stdout)
    assert [(r["id"], r["chain"], r["status"]) for r in runs] == [
        (run_id, "shout", "completed")
    ], runs

    # Edited in place: Edit opens its YAML, and saved under its own name it replaces the file.
    app.find_element(By.ID, "chain-edit").click()
    text = wait_for(app, "#chain-text").get_attribute("value")
    assert "name: shout" in text, text
    set_text(app, "chain-text", text.replace("then say what it holds", "then say it twice"))
    WebDriverWait(app, WAIT).until(
        lambda d: d.find_element(By.ID, "chain-check-state").text == "no problems: shout"
    )
    app.find_element(By.ID, "chain-save").click()
    WebDriverWait(app, WAIT).until(
        lambda d: "then say it twice" in (chains_ws / "shout.yaml").read_text()
    )
    wait_for(app, '#chains-list tr[data-chain="shout"][data-loaded="true"]')
    shown = json.loads(cli(places, "chains", "show", "shout", "--json").stdout)
    assert shown["description"] == "Read a note, then say it twice.", shown


def test_a_running_chains_timeline_moves_with_its_steps_and_cancel_stops_it(
    chains_ws, app, places
):
    app.find_element(By.ID, "nav-chains").click()
    wait_for(app, '#chains-list tr[data-chain="slow"] .chain-open').click()
    wait_for(app, '#chain-graph g.chain-node[data-step="wait"]')
    started = time.time()
    app.find_element(By.ID, "chain-run-start").click()
    # While the run goes, only its live events can say the first step is done and the second
    # running: the record is read when the run ends.
    timeline = wait_for(app, '#chain-timeline[data-state="running"]')
    wait_for(app, '#chain-timeline .chain-step-row[data-step="read"][data-status="completed"]')
    wait_for(app, '#chain-timeline .chain-step-row[data-step="wait"][data-status="running"]')
    run_id = timeline.get_attribute("data-run-id")
    shot(app, "chains-running")
    app.find_element(By.ID, "chain-run-cancel").click()
    done = wait_for(app, f'#chain-timeline[data-run-id="{run_id}"][data-state="done"]')
    assert time.time() - started < 25, "the run went to its end instead of being cancelled"
    steps = [
        (r.get_attribute("data-step"), r.get_attribute("data-status"))
        for r in done.find_elements(By.CSS_SELECTOR, ".chain-step-row")
    ]
    assert steps == [("read", "completed"), ("wait", "cancelled")], steps
    runs = json.loads(cli(places, "chains", "runs", "--json").stdout)
    assert [(r["id"], r["status"]) for r in runs] == [(run_id, "cancelled")], runs


def test_a_mode_the_resource_watcher_switched_to_shows_as_a_banner_until_a_person_changes_it(
    app, places
):
    from selenium.webdriver.support.ui import Select

    # Another process on the data directory whose watcher finds the disk below a floor no disk
    # clears: it degrades at its first look, and the app shows it from the admin log.
    watched = places["config"].parent / "watched.toml"
    watched.write_text(
        places["config"].read_text()
        + "[watchdog]\ninterval_ms = 200\ndisk_free_min_mb = 1000000000\n"
        + "memory_available_min_mb = 0\nmemory_pressure_max = 0\n"
    )
    cmd = [str(CLI), "--data-dir", str(places["data"]), "--config", str(watched), "mcp"]
    mcp = subprocess.Popen(
        cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        banner = wait_for(app, '#mode-banner[data-mode="degraded"]')
        text = banner.text
        assert "switched to DEGRADED automatically" in text, text
        assert "from normal" in text, text
        assert "below 1000000000 MiB" in text, text
        assert "degraded mode" in app.find_element(By.CSS_SELECTOR, ".nav-facts").text
        shot(app, "mode-banner")
    finally:
        # The watcher goes with its process; otherwise it would take a milder mode straight
        # back to degraded while the disk stays "full".
        mcp.stdin.close()
        mcp.wait(timeout=WAIT)
    # The banner's button leads to the person's control; switching there ends the banner.
    app.find_element(By.ID, "mode-banner-settings").click()
    Select(wait_for(app, "#settings-mode")).select_by_value("recovery")
    app.find_element(By.ID, "settings-mode-apply").click()
    wait_for(app, "#settings-mode-confirm").click()
    WebDriverWait(app, WAIT).until(
        lambda d: not d.find_elements(By.ID, "mode-banner")
        and "recovery mode" in d.find_element(By.CSS_SELECTOR, ".nav-facts").text
    )
    mode = cli(places, "mode")
    assert "recovery" in mode.stdout, (mode.stdout, mode.stderr)
