"""The README's picture of a finished sweep in MLflow's UI (docs/mlflow_runs.png).

    python docs/mlflow_runs_screenshot.py URL docs/mlflow_runs.png

How the picture was taken is in docs/development.md ("The MLflow picture"). Headless
Chromium from Debian's packages (apt-get install chromium) driven by Playwright (pip install
playwright; its own browser download is not needed): closes the assistant
panel, shows val_acc and the sweeps.status / sweeps.error tags instead of Dataset and Source,
and expands the sweep's parent run to its trials.
"""

from __future__ import annotations

import sys

from playwright.sync_api import sync_playwright

url, out = sys.argv[1], sys.argv[2]
with sync_playwright() as p:
    browser = p.chromium.launch(executable_path="/usr/bin/chromium", args=["--no-sandbox"])
    page = browser.new_page(viewport={"width": 1500, "height": 600})
    page.goto(url)
    page.wait_for_selector("text=matching runs", timeout=60000)
    page.wait_for_timeout(1500)
    close = page.locator("button[aria-label=Close]")  # the assistant's side panel
    if close.count():
        close.first.click()
        page.wait_for_timeout(1000)
    page.get_by_role("button", name="Columns").click()
    page.wait_for_timeout(1000)
    for name in ("Dataset", "Source", "val_acc", "sweeps.status", "sweeps.error"):
        page.locator("input[placeholder='Search columns']:visible").fill(name)
        page.wait_for_timeout(500)
        page.get_by_text(name, exact=True).last.click()
    page.keyboard.press("Escape")
    page.wait_for_timeout(500)
    page.locator("button[data-component-id$='runnamecellrenderer.tsx_46']").first.click()
    page.wait_for_timeout(1500)
    page.mouse.click(5, 590)  # no focus ring on the run name cell
    page.screenshot(path=out)
    browser.close()
