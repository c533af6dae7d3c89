"""The dashboard in a real browser: Debian's headless Chromium driven by Selenium.

Loads the index, filters and sorts, opens a run, opens a comparison of selected runs, reaches
the controls by keyboard, takes a screenshot of each page, and checks that every number shown
equals the one in report.json and that a failed run shows as failed.

Chromium and ChromeDriver come from Debian (`chromium`, `chromium-driver`), installed by the
Makefile's test set-up. Where they are missing the tests skip with the reason, except when
TRUSTLAB_REQUIRE_BROWSER=1 (CI sets it), where a missing browser fails.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from trustlab.core.dashboard import build_site, fmt, serve_site

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CHROMEDRIVER = shutil.which("chromedriver") or "/usr/bin/chromedriver"


def _browser_missing() -> str | None:
    try:
        import selenium  # noqa: F401
    except ImportError:
        return "selenium is not installed (pip install -e '.[dev]')"
    for path in (CHROMIUM, CHROMEDRIVER):
        if not os.access(path, os.X_OK):
            return f"{path} is missing (apt-get install chromium chromium-driver; `make test` does)"
    return None


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    reason = _browser_missing()
    if reason:
        if os.environ.get("TRUSTLAB_REQUIRE_BROWSER") == "1":
            pytest.fail(f"browser tests required but {reason}")
        pytest.skip(reason)
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-quic",
                 "--no-first-run", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--disable-dev-shm-usage",
                 "--window-size=1400,1000",
                 f"--user-data-dir={tmp_path_factory.mktemp('chromium-profile')}"):
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    driver.set_page_load_timeout(30)
    yield driver
    driver.quit()


@pytest.fixture(scope="module")
def served(dashboard_runs):
    build_site(dashboard_runs)
    server = serve_site(dashboard_runs, port=0, background=True)
    host, port = server.server_address[:2]
    yield f"http://{host}:{port}"
    server.shutdown()
    server.server_close()


def _shot(driver, tmp_path: Path, name: str) -> Path:
    folder = Path(os.environ.get("TRUSTLAB_SCREENSHOT_DIR") or tmp_path)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"dashboard_{name}.png"
    driver.get_screenshot_as_file(str(path))
    assert path.stat().st_size > 5000  # a rendered page, not a blank one
    return path


def _visible_rows(driver):
    from selenium.webdriver.common.by import By

    return [tr for tr in driver.find_elements(By.CSS_SELECTOR, "#runs tbody tr") if tr.is_displayed()]


def _report(dashboard_runs: Path, rel: str) -> dict:
    return json.loads((dashboard_runs / rel / "report.json").read_text())


def test_index_filter_sort_and_numbers(browser, served, dashboard_runs, tmp_path):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    browser.get(f"{served}/index.html")
    assert browser.find_element(By.ID, "controls").is_displayed()  # the script ran
    rows = _visible_rows(browser)
    assert len(rows) == 5
    assert browser.find_element(By.ID, "shown-count").text == "5 of 5 runs shown"
    for tr in rows:  # every headline number shown equals report.json
        rel, status = tr.get_attribute("data-run"), tr.get_attribute("data-status")
        spans = tr.find_elements(By.CSS_SELECTOR, "span[data-metric]")
        if status == "failed":
            assert not spans and "failed" in tr.text
            continue
        headline = _report(dashboard_runs, rel)["headline"]
        assert {s.get_attribute("data-metric") for s in spans} == set(headline)
        for span in spans:
            value = headline[span.get_attribute("data-metric")]
            assert json.loads(span.get_attribute("data-value")) == value
            assert span.text == fmt(value)
    _shot(browser, tmp_path, "index")

    text = browser.find_element(By.ID, "filter-text")
    text.send_keys("chat-s")  # hcc/a's subject
    assert [tr.get_attribute("data-run") for tr in _visible_rows(browser)] == ["hcc/a"]
    text.clear()
    text.send_keys(" ")  # clear() fires no input event; a blank query shows everything
    Select(browser.find_element(By.ID, "filter-status")).select_by_value("failed")
    assert [tr.get_attribute("data-run") for tr in _visible_rows(browser)] == ["ipb/failed"]
    Select(browser.find_element(By.ID, "filter-status")).select_by_value("")
    Select(browser.find_element(By.ID, "filter-method")).select_by_value("ipb")
    assert len(_visible_rows(browser)) == 4
    assert browser.find_element(By.ID, "shown-count").text == "4 of 5 runs shown"
    Select(browser.find_element(By.ID, "filter-method")).select_by_value("")

    header = browser.find_element(By.CSS_SELECTOR, "th[data-sort=run]")
    header.find_element(By.TAG_NAME, "button").click()
    names = [tr.get_attribute("data-run") for tr in _visible_rows(browser)]
    assert names == sorted(names) and header.get_attribute("aria-sort") == "ascending"
    header.find_element(By.TAG_NAME, "button").click()
    names = [tr.get_attribute("data-run") for tr in _visible_rows(browser)]
    assert names == sorted(names, reverse=True) and header.get_attribute("aria-sort") == "descending"


def test_controls_are_reachable_by_keyboard(browser, served):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys

    browser.get(f"{served}/index.html")
    body = browser.find_element(By.TAG_NAME, "body")
    body.click()
    reached = set()
    for _ in range(40):
        browser.switch_to.active_element.send_keys(Keys.TAB)
        active = browser.switch_to.active_element
        reached.add(active.get_attribute("id") or active.tag_name)
    assert {"filter-text", "filter-method", "filter-status", "compare-button"} <= reached


def test_run_pages_show_report_json(browser, served, dashboard_runs, tmp_path):
    from selenium.webdriver.common.by import By

    browser.get(f"{served}/index.html")
    browser.find_element(By.LINK_TEXT, "ipb/seed1").click()
    assert browser.current_url.endswith("/ipb/seed1/report.html")
    report = _report(dashboard_runs, "ipb/seed1")
    assert browser.find_element(By.ID, "status").text == "ok"
    for name, metric in report["metrics"].items():
        cell = browser.find_element(By.CSS_SELECTOR, f"tr[data-metric='{name}'] td[data-value]")
        assert json.loads(cell.get_attribute("data-value")) == metric["value"]
        assert cell.text == fmt(metric["value"])
    image = browser.find_element(By.CSS_SELECTOR, "figure img")
    assert image.get_attribute("alt") == report["figures"]["hist"]["alt"]
    assert browser.execute_script("return arguments[0].naturalWidth", image) > 100  # loaded
    _shot(browser, tmp_path, "run")

    browser.get(f"{served}/ipb/failed/report.html")
    assert browser.find_element(By.ID, "status").text == "failed"
    assert browser.find_element(By.ID, "failed-stage").text == "fit"
    assert "the toy model diverged at step 3" in browser.find_element(By.ID, "error").text
    _shot(browser, tmp_path, "failed")


def test_compare_selected_runs(browser, served, dashboard_runs, tmp_path):
    from selenium.webdriver.common.by import By

    browser.get(f"{served}/index.html")

    def pick(*rels):
        for box in browser.find_elements(By.CSS_SELECTOR, "#runs tbody input[type=checkbox]"):
            if box.is_selected():
                box.click()
        for rel in rels:
            browser.find_element(By.CSS_SELECTOR, f"tr[data-run='{rel}'] input").click()
        browser.find_element(By.ID, "compare-button").click()

    pick("ipb/seed1", "hcc/a")  # two methods: refused with a message, no navigation
    assert "one method" in browser.find_element(By.ID, "compare-message").text
    assert browser.current_url.endswith("/index.html")

    pick("ipb/n80", "ipb/seed2")
    assert "/compare/ipb.html?runs=" in browser.current_url
    shown = {el.get_attribute("data-run-col")
             for el in browser.find_elements(By.CSS_SELECTOR, "#compare-metrics td[data-kind=value]")
             if el.is_displayed()}
    assert shown == {"ipb/n80", "ipb/seed2"}
    base = browser.find_element(By.ID, "baseline-name").text
    started = {rel: _report(dashboard_runs, rel)["provenance"]["started_utc"] for rel in shown}
    assert base == min(shown, key=lambda rel: (started[rel], rel))  # the earliest is the baseline
    other = (shown - {base}).pop()
    a, b = _report(dashboard_runs, base), _report(dashboard_runs, other)
    for name in ("mean", "coverage", "n"):
        row = browser.find_element(By.CSS_SELECTOR, f"tr[data-metric-row='{name}']")
        for rel, rep in ((base, a), (other, b)):
            cell = row.find_element(By.CSS_SELECTOR, f"td[data-run-col='{rel}'][data-kind=value]")
            assert json.loads(cell.get_attribute("data-value")) == rep["metrics"][name]["value"]
            assert cell.text == fmt(rep["metrics"][name]["value"])
        delta = row.find_element(By.CSS_SELECTOR, f"td[data-run-col='{other}'][data-kind=delta]")
        expected = b["metrics"][name]["value"] - a["metrics"][name]["value"]
        assert json.loads(delta.get_attribute("data-delta")) == pytest.approx(expected, rel=1e-12,
                                                                              abs=1e-15)
        assert float(delta.text) == pytest.approx(expected, rel=1e-3, abs=1e-12)  # 4 digits
    figures = [f for f in browser.find_elements(By.CSS_SELECTOR, "figure img") if f.is_displayed()]
    assert len(figures) == 2 and all(
        browser.execute_script("return arguments[0].naturalWidth", f) > 100 for f in figures)
    _shot(browser, tmp_path, "compare")
