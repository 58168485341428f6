"""Save a screenshot of the chat page after a short conversation: docs/chat.png.

Run from the repository root: ``.venv/bin/python -m tests.browser.screenshot``.
It serves the app like the browser tests do (daphne, a throwaway database,
the offline model) and needs Chromium at /usr/bin/chromium-headless-shell.
"""

from __future__ import annotations

import sys
from pathlib import Path

from playwright.sync_api import expect

from tests.browser.server import ROOT, screenshot_page, sign_in

OUTPUT = ROOT / "docs" / "chat.png"
TITLE = "Lisbon trip"
CONVERSATIONS = [
    ["Hello!", "Remind me what we planned for the weekend."],
    [
        "my name is Ada",
        "set trip to Lisbon in May",
        "What should I pack for **Lisbon** in May?",
    ],
]


def take(output: Path = OUTPUT) -> None:
    with screenshot_page(width=1280, height=800) as (page, server):
        sign_in(page, server, server.usernames[0])
        composer = page.get_by_role("textbox", name="Message")
        for number, messages in enumerate(CONVERSATIONS):
            if number:
                page.get_by_role("link", name="New chat").click()
            for count, text in enumerate(messages, start=1):
                composer.fill(text)
                composer.press("Enter")
                expect(page.locator("#messages .entry-user")).to_have_count(count)
                expect(page.get_by_role("button", name="Stop")).to_be_hidden()
        expect(page.locator("#state-view [data-scope=session] .state-row")).to_have_count(1)
        expect(page.get_by_role("heading", level=1)).to_have_text(CONVERSATIONS[-1][0])
        page.get_by_role("button", name=f"Rename \u201c{CONVERSATIONS[-1][0]}\u201d").click()
        page.get_by_role("textbox", name="Chat title").fill(TITLE)
        page.get_by_role("textbox", name="Chat title").press("Enter")
        expect(page.get_by_role("heading", level=1)).to_have_text(TITLE)
        page.evaluate("document.activeElement.blur()")
        page.mouse.move(640, 400)
        output.parent.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(output))


if __name__ == "__main__":
    take(Path(sys.argv[1]) if len(sys.argv) > 1 else OUTPUT)
