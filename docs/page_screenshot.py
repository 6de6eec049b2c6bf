"""The docs' pictures of a web page: optuna-dashboard's (docs/optuna_dashboard.png) and MLflow's
system-metrics tab of a trial run (docs/mlflow_system_metrics.png).

    python -m sweeps +experiment=digits search.num_samples=16 sweep.name=showcase16
    optuna-dashboard outputs/showcase16/optuna.log --port 8098 &
    python docs/page_screenshot.py http://127.0.0.1:8098/dashboard/studies/0 \
        docs/optuna_dashboard.png 1400x1500

    python -m sweeps +experiment=digits search.num_samples=1 scheduler=none scheduler.max_t=400
    mlflow ui --port 5055 &      # then the best trial's run, its "System metrics" tab:
    python docs/page_screenshot.py \
        'http://127.0.0.1:5055/#/experiments/1/runs/<run id>/system-metrics' \
        docs/mlflow_system_metrics.png 1500x1000

Headless Chromium from Debian's packages (apt-get install chromium) driven by Playwright
(pip install playwright optuna-dashboard; its own browser download is not needed).
"""

from __future__ import annotations

import sys

from playwright.sync_api import sync_playwright

url, out, size = sys.argv[1], sys.argv[2], sys.argv[3]
width, height = (int(n) for n in size.split("x"))
with sync_playwright() as p:
    browser = p.chromium.launch(executable_path="/usr/bin/chromium", args=["--no-sandbox"])
    page = browser.new_page(viewport={"width": width, "height": height})
    page.goto(url)
    page.wait_for_timeout(12000)  # the page loads its data, then its charts draw
    close = page.locator("button[aria-label=Close]")  # MLflow's assistant side panel
    if close.count():
        close.first.click()
        page.wait_for_timeout(1000)
    page.screenshot(path=out)
    browser.close()
