"""Save every picture of the product in README.md and docs/ from the product as it is: the
chat's features (files attached to a message, docs/chat-attachments.png; a message being
edited, docs/chat-edit.png; search from the sidebar, docs/chat-search.png; the chat at a
phone's 390 px, docs/chat-phone.png), and, through their own scripts, the chat
(docs/chat.png), the Memory page (docs/memory.png) and the staff console's provenance page
(docs/provenance.png, and docs/provenance-dark.png in the dark theme). docs/bench-scale.png
is the benchmarks' chart (bench/), not a picture.

Run from the repository root: ``.venv/bin/python -m tests.browser.feature_screenshots``
(optionally with the folder to save them in). It serves the app like the browser tests do
(daphne, a throwaway database, the offline model) and needs Chromium's headless shell at
/usr/bin/chromium-headless-shell.
"""

from __future__ import annotations

import io
import sys
from pathlib import Path

from PIL import Image, ImageDraw
from playwright.sync_api import Page, expect

from tests.browser import memory_screenshot, screenshot, staff_screenshot
from tests.browser.server import ROOT, screenshot_page, sign_in
from tests.sample_files import pdf_bytes

OUTPUT = ROOT / "docs"
WIDE = {"width": 1100, "height": 720}
PHONE = {"width": 390, "height": 844}


def logo_bytes() -> bytes:
    """A small made-up logo: a teal disc with a white ring, on white."""
    image = Image.new("RGB", (240, 160), "white")
    draw = ImageDraw.Draw(image)
    draw.ellipse((70, 10, 210, 150), fill=(0, 128, 128))
    draw.ellipse((105, 45, 175, 115), outline="white", width=12)
    draw.rectangle((20, 60, 60, 100), fill=(230, 120, 20))
    buffer = io.BytesIO()
    image.save(buffer, "PNG", optimize=True)
    return buffer.getvalue()


def send(page: Page, text: str) -> None:
    """Send a message and wait for the whole reply."""
    replies = page.locator("#messages .entry-agent")
    before = replies.count()
    composer = page.get_by_role("textbox", name="Message")
    composer.fill(text)
    composer.press("Enter")
    expect(replies).to_have_count(before + 1)
    expect(page.get_by_role("button", name="Stop")).to_be_hidden()


def settle(page: Page) -> None:
    """No focus ring or hover left from the steps before a screenshot."""
    page.evaluate("document.activeElement.blur()")
    page.mouse.move(WIDE["width"] - 2, WIDE["height"] - 2)


def take(output: Path = OUTPUT) -> None:
    output.mkdir(parents=True, exist_ok=True)
    with screenshot_page(**WIDE) as (page, server):
        sign_in(page, server, server.usernames[0])
        send(page, "Good morning")
        send(page, "My favourite river is the Douro, near Porto")
        page.get_by_role("link", name="New chat").click()

        page.locator("#attach-input").set_input_files(
            [
                {"name": "logo.png", "mimeType": "image/png", "buffer": logo_bytes()},
                {"name": "brief.pdf", "mimeType": "application/pdf", "buffer": pdf_bytes(2)},
            ]
        )
        tray = page.get_by_role("list", name="Files to send")
        expect(tray.get_by_role("listitem")).to_have_count(2)
        send(page, "What are these?")
        sent = page.locator("#messages .entry-user").last
        expect(sent.get_by_role("img", name="logo.png")).to_be_visible()
        assert sent.get_by_role("img", name="logo.png").evaluate("image => image.complete")
        settle(page)
        page.screenshot(path=str(output / "chat-attachments.png"))

        page.get_by_role("button", name="Edit this message").click()
        editor = page.get_by_role("textbox", name="Edit your message")
        editor.fill("Which colours does the logo use?")
        expect(
            page.get_by_role("list", name="Files sent again with the edited message")
        ).to_be_visible()
        page.mouse.move(WIDE["width"] - 2, WIDE["height"] - 2)
        page.screenshot(path=str(output / "chat-edit.png"))
        editor.press("Enter")
        expect(page.locator("#messages .entry-user .bubble-body")).to_have_text(
            ["Which colours does the logo use?"]
        )
        expect(page.get_by_role("button", name="Stop")).to_be_hidden()

        search = page.get_by_role("searchbox", name="Search your chats")
        search.fill("douro")
        results = page.get_by_role("list", name="Search results").get_by_role("link")
        expect(results.first).to_contain_text("Douro")
        page.mouse.move(WIDE["width"] - 2, WIDE["height"] - 2)
        page.screenshot(path=str(output / "chat-search.png"))
        search.fill("")
        expect(page.get_by_role("list", name="Your chats")).to_be_visible()

        chat = page.url
        phone = page.context.browser.new_page(viewport=PHONE)
        sign_in(phone, server, server.usernames[0])
        phone.goto(chat)
        expect(phone.locator("#messages .entry-agent .bubble-body")).to_contain_text(["logo.png"])
        expect(phone.locator("#messages .entry-user").get_by_role("img")).to_be_visible()
        assert phone.get_by_role("img", name="logo.png").evaluate("image => image.complete")
        phone.evaluate("document.activeElement.blur()")
        phone.screenshot(path=str(output / "chat-phone.png"))


def every_picture_take(output: Path = OUTPUT) -> None:
    """Take the feature screenshots and those of the chat, the Memory page and the console."""
    take(output)
    screenshot.take(output / screenshot.OUTPUT.name)
    memory_screenshot.take(output / memory_screenshot.OUTPUT.name)
    staff_screenshot.take(output / staff_screenshot.OUTPUT.name)


if __name__ == "__main__":
    every_picture_take(Path(sys.argv[1]) if len(sys.argv) > 1 else OUTPUT)
