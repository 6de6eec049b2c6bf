"""The docs' picture of a finished sweep in optuna-dashboard (docs/optuna_dashboard.png).

    python -m sweeps +experiment=digits search.num_samples=16 sweep.name=showcase16
    optuna-dashboard outputs/showcase16/optuna.log --port 8098 &
    python docs/optuna_dashboard_screenshot.py http://127.0.0.1:8098/dashboard/studies/0 \
        docs/optuna_dashboard.png

Headless Chromium from Debian's packages (apt-get install chromium) driven by Playwright
(pip install playwright optuna-dashboard; its own browser download is not needed).
"""

from __future__ import annotations

import sys

from playwright.sync_api import sync_playwright

url, out = sys.argv[1], sys.argv[2]
with sync_playwright() as p:
    browser = p.chromium.launch(executable_path="/usr/bin/chromium", args=["--no-sandbox"])
    page = browser.new_page(viewport={"width": 1400, "height": 1500})
    page.goto(url)
    page.wait_for_timeout(9000)  # the study loads, then its plots draw
    page.screenshot(path=out)
    browser.close()
