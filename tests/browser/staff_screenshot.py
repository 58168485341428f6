"""Save screenshots of a memory's provenance page in the staff console, in the site's theme:
docs/provenance.png (light) and docs/provenance-dark.png (dark, the same page).

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


def dark_of(output: Path) -> Path:
    """Where the dark picture goes, beside ``output``: provenance.png -> provenance-dark.png."""
    return output.with_name(f"{output.stem}-dark{output.suffix}")


def take(output: Path = OUTPUT) -> None:
    with screenshot_page(width=1280, height=1100) as (page, server):
        ids = staff_scenario(server, owner=server.usernames[0])
        output.parent.mkdir(parents=True, exist_ok=True)
        # A page of its own for each theme: one switched after it loads would be caught in
        # the admin's colour transitions.
        dark = page.context.browser.new_page(viewport=page.viewport_size, color_scheme="dark")
        for shown, path in ((page, output), (dark, dark_of(output))):
            staff_sign_in(shown, server)
            shown.goto(f"{server.base_url}/admin/memory_app/memory/{ids['quarantined']}/change/")
            expect(shown.get_by_role("heading", name="Sources (1)")).to_be_visible()
            shown.screenshot(path=str(path), full_page=True)


if __name__ == "__main__":
    take(Path(sys.argv[1]) if len(sys.argv) > 1 else OUTPUT)
