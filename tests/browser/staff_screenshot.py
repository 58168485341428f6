"""Save a screenshot of a memory's provenance page in the staff console: docs/provenance.png.

Run from the repository root: ``.venv/bin/python -m tests.browser.staff_screenshot``. Like the
chat screenshot, it serves the app with daphne on a throwaway database and needs Chromium.
"""

from __future__ import annotations

import sys
from pathlib import Path

from playwright.sync_api import expect

from tests.browser.server import ROOT, screenshot_page
from tests.browser.staff_data import staff_scenario, staff_sign_in

OUTPUT = ROOT / "docs" / "provenance.png"


def take(output: Path = OUTPUT) -> None:
    with screenshot_page(width=1280, height=1100) as (page, server):
        ids = staff_scenario(server, owner=server.usernames[0])
        staff_sign_in(page, server)
        page.goto(f"{server.base_url}/admin/memory_app/memory/{ids['quarantined']}/change/")
        expect(page.get_by_role("heading", name="Sources (1)")).to_be_visible()
        output.parent.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(output), full_page=True)


if __name__ == "__main__":
    take(Path(sys.argv[1]) if len(sys.argv) > 1 else OUTPUT)
