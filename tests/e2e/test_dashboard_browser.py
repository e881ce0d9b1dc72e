"""The dashboard in a real browser: headless Chromium (Debian's package, driven by Selenium
through chromedriver) against a real `workqueue run` of real worker processes.

It checks the counts against the ledger, watches an item move from running to succeeded
without a reload, reads a failed item's reason, and finds an item named like an HTML tag shown
as text (and no alert, no image made of it). `make test` installs Chromium and chromedriver
when they are missing; this test never skips itself. A screenshot is kept under
test-artifacts/ (the docs.s picture is one of these).
"""

from __future__ import annotations

import json
import shutil
import signal
import sys

import pytest
from selenium import webdriver
from selenium.common.exceptions import NoAlertPresentException
from selenium.webdriver.chrome.service import Service

from tests.support.servers import free_port, wait_until

from .conftest import REPO, spawn_workqueue, workqueue

EVIL = "<img src=x onerror=alert(1)>.mp4"
ARTIFACTS = REPO / "test-artifacts"

WORKER = """#!{python}
import json, os, sys, time
name = json.load(open(os.environ["WORK_ITEM_FILE"]))["name"]
if name.startswith("gate-"):
    gate = os.path.join({gates!r}, name + ".open")
    while not os.path.exists(gate):
        time.sleep(0.05)
if name.startswith("bad"):
    print("bad.mp4: moov atom not found", file=sys.stderr)
    sys.exit(3)
"""


def chromium() -> webdriver.Chrome:
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    driver = shutil.which("chromedriver")
    assert browser and driver, "Chromium and chromedriver are missing: run `make test`"
    options = webdriver.ChromeOptions()
    options.binary_location = browser
    for flag in (
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--window-size=1280,1400",
    ):
        options.add_argument(flag)
    return webdriver.Chrome(service=Service(executable_path=driver), options=options)


@pytest.fixture
def browser():
    driver = chromium()
    yield driver
    driver.quit()


# Read in one go inside the page: the board is swapped every second, so elements found in one
# call may be gone in the next.
READ_COUNTS = """
const out = {};
for (const c of document.querySelectorAll('#counts .count')) {
  out[c.dataset.state] = parseInt(c.querySelector('.n').textContent, 10);
}
return out;
"""
READ_ROWS = """
const out = {};
for (const row of document.querySelectorAll('#' + arguments[0] + ' tbody tr')) {
  out[row.querySelector('.name').textContent] = row.innerText;
}
return out;
"""


def counts(driver) -> dict[str, int]:
    return driver.execute_script(READ_COUNTS)


def rows_of(driver, section: str) -> dict[str, str]:
    """item name (as the page shows it: text) -> the row's text."""
    return driver.execute_script(READ_ROWS, section)


def test_the_dashboard_of_a_real_run_in_chromium(tmp_path, browser):
    videos, gates, state = tmp_path / "videos", tmp_path / "gates", tmp_path / "state"
    videos.mkdir()
    gates.mkdir()
    for name in ("gate-a.mp4", "gate-b.mp4", "bad.mp4", EVIL, "a-ok.mp4"):
        (videos / name).write_bytes(b"x")
    worker = tmp_path / "worker.py"
    worker.write_text(WORKER.format(python=sys.executable, gates=str(gates)))
    worker.chmod(0o755)
    port = free_port()
    run = spawn_workqueue(
        "run", videos, "--suffix", ".mp4", "--state-dir", state, "--parallelism", "2",
        "--max-attempts", "1", "--settle", "0", "--metrics-port", port, "--", worker,
    )  # fmt: skip
    try:
        url = f"http://127.0.0.1:{port}/"
        wait_until(lambda: _reachable(url), timeout=30)
        browser.get(url)
        browser.execute_script("window.__sameDocument = true;")
        # both gated items running, the others done: a still moment to compare with the ledger
        steady = {"pending": 0, "running": 2, "succeeded": 2, "failed": 1, "cancelled": 0}
        wait_until(lambda: counts(browser) == steady, timeout=30, interval=0.2)
        ledger = json.loads(workqueue("status", "--state-dir", state, "--json").stdout)
        assert ledger["counts"] == counts(browser) == steady
        assert set(rows_of(browser, "running")) == {"gate-a.mp4", "gate-b.mp4"}
        failed = rows_of(browser, "failed")
        assert "failed with exit code 3 after 1 attempt" in failed["bad.mp4"]
        assert "moov atom not found" in failed["bad.mp4"]  # the log tail
        # the tag-like name is text: shown as typed, no element made of it, no alert
        assert EVIL in rows_of(browser, "recent")
        assert browser.execute_script("return document.querySelectorAll('main img').length") == 0
        with pytest.raises(NoAlertPresentException):
            browser.switch_to.alert.text  # noqa: B018
        # one item finishes: the page shows it move, without a reload
        (gates / "gate-a.mp4.open").touch()
        wait_until(lambda: "gate-a.mp4" in rows_of(browser, "recent"), timeout=30, interval=0.2)
        assert "gate-a.mp4" not in rows_of(browser, "running")
        assert counts(browser)["succeeded"] == 3
        assert browser.execute_script("return window.__sameDocument === true;")
        assert (
            browser.execute_script("return document.getElementById('live').textContent")[:4]
            == "live"
        )
        ARTIFACTS.mkdir(exist_ok=True)
        browser.save_screenshot(str(ARTIFACTS / "dashboard.png"))
        (gates / "gate-b.mp4.open").touch()
        assert run.wait(timeout=60) == 1  # bad.mp4 failed
    finally:
        if run.poll() is None:
            run.send_signal(signal.SIGTERM)
            run.wait(timeout=30)
        for gate in ("gate-a.mp4", "gate-b.mp4"):
            (gates / f"{gate}.open").touch()


def _reachable(url: str) -> bool:
    import requests

    try:
        return requests.get(url, timeout=2).status_code == 200
    except requests.RequestException:
        return False
