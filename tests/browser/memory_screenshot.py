"""Save a screenshot of the Memory page after a few chats: docs/memory.png.

Run from the repository root: ``.venv/bin/python -m tests.browser.memory_screenshot``.
It serves the app like the browser tests do (daphne, a throwaway database, the offline model,
background work in that process) and needs Chromium at /usr/bin/chromium-headless-shell.
"""

from __future__ import annotations

import sys
from pathlib import Path

from playwright.sync_api import expect

from tests.browser.server import ROOT, screenshot_page, sign_in

OUTPUT = ROOT / "docs" / "memory.png"
MESSAGES = [
    "remember that I am vegetarian",
    "remember that my sister Mia lives in Porto",
    "remember that I prefer short answers",
]


def take(output: Path = OUTPUT) -> None:
    with screenshot_page(width=1280, height=900) as (page, server):
        sign_in(page, server, server.usernames[0])
        composer = page.get_by_role("textbox", name="Message")
        replies = page.locator("#messages .entry-agent .bubble-body")
        for count, text in enumerate(MESSAGES, start=1):
            composer.fill(text)
            composer.press("Enter")
            expect(replies).to_have_count(count)
            expect(page.get_by_role("button", name="Stop")).to_be_hidden()
        page.goto(f"{server.base_url}/memory/")
        items = page.locator(".memory-item")
        expect(items).to_have_count(len(MESSAGES))
        sister = page.locator(".memory-item", has_text="Mia").first
        sister.get_by_text("Why is this remembered?").click()
        expect(sister.locator("blockquote").first).to_be_visible()
        page.mouse.move(1200, 880)
        output.parent.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(output), full_page=True)


if __name__ == "__main__":
    take(Path(sys.argv[1]) if len(sys.argv) > 1 else OUTPUT)
