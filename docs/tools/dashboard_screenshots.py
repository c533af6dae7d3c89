"""Screenshots of the dashboard for the README: the index and one comparison page.

    trustlab run hcc --quick --seed 1 --out runs/hcc/seed1
    trustlab run hcc --quick --seed 2 --out runs/hcc/seed2
    trustlab run ipb --quick --out runs/ipb/quick
    python docs/tools/dashboard_screenshots.py runs hcc docs/figures

Needs Debian's chromium + chromium-driver and selenium (the dev extra), like the browser tests.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By

from trustlab.core.dashboard import build_site, serve_site


def main(runs: str, method: str, out: str) -> None:
    build_site(runs)
    server = serve_site(runs, port=0, background=True)
    host, port = server.server_address[:2]
    options = webdriver.ChromeOptions()
    options.binary_location = "/usr/bin/chromium"
    with tempfile.TemporaryDirectory() as profile:
        for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--no-first-run",
                     "--disable-background-networking", "--disable-component-update",
                     "--disable-sync", "--window-size=1280,900", f"--user-data-dir={profile}"):
            options.add_argument(flag)
        driver = webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=options)
        try:
            driver.get(f"http://{host}:{port}/index.html")
            Path(out).mkdir(parents=True, exist_ok=True)
            driver.get_screenshot_as_file(str(Path(out) / "dashboard_index.png"))
            for row in driver.find_elements(By.CSS_SELECTOR, f"tr[data-method='{method}']")[:2]:
                row.find_element(By.TAG_NAME, "input").click()
            driver.find_element(By.ID, "compare-button").click()
            driver.get_screenshot_as_file(str(Path(out) / "dashboard_compare.png"))
        finally:
            driver.quit()
            server.shutdown()


if __name__ == "__main__":
    main(*sys.argv[1:4])
