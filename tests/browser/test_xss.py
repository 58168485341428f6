"""Hostile text in a real browser: a chat message and a memory made of script, event
handlers and ``javascript:`` links are shown as text, while the reply streams, after a
reload (history from the API's html) and on the memory page; nothing of it runs.

Every payload sets ``window.pwned``; the page must end without it, with no dialog opened
and no ``javascript:`` link to click.
"""

from __future__ import annotations

import time

import pytest
from playwright.sync_api import Page, expect

from tests.browser.conftest import GENERATION_TIMEOUT_SECONDS

pytestmark = pytest.mark.browser

HOSTILE = [
    "<script>window.pwned = 'script'</script>",
    "<img src=x onerror=\"window.pwned = 'img'\">",
    "<svg onload=\"window.pwned = 'svg'\"></svg>",
    "[a markdown link](javascript:window.pwned='markdown-link')",
    "![an image](javascript:window.pwned='markdown-image')",
    "<a href=\"javascript:window.pwned='html-link'\">an html link</a>",
    "<b onmouseover=\"window.pwned = 'hover'\">hover me</b>",
]
FLAG = "() => window.pwned === undefined ? null : String(window.pwned)"


def replies(page: Page):
    return page.locator("#messages .entry-agent .bubble-body")


def send(page: Page, text: str) -> None:
    """Send a message and wait for the whole reply."""
    before = replies(page).count()
    composer = page.get_by_role("textbox", name="Message")
    composer.fill(text)
    composer.press("Enter")
    expect(replies(page)).to_have_count(before + 1)
    expect(page.get_by_role("button", name="Stop")).to_be_hidden()


def assert_nothing_ran(page: Page, dialogs: list[str]) -> None:
    """Hover and click everything the hostile text could have become, then check the flag."""
    for element in page.locator("#messages .bubble-body b, #messages .bubble-body a").all():
        element.hover()
    for link in page.locator("#messages .bubble-body a:not([href^='http'])").all():
        link.click()
    assert page.locator("a[href^='javascript:' i]").count() == 0
    assert page.locator("#messages img, #messages svg, #messages script").count() == 0
    assert page.evaluate(FLAG) is None
    assert dialogs == []


def test_hostile_chat_and_memory_text_never_runs(chat_page: Page):
    page = chat_page
    dialogs: list[str] = []
    page.on("dialog", lambda dialog: (dialogs.append(dialog.message), dialog.dismiss()))

    send(page, "\n\n".join(HOSTILE))
    expect(page.locator("#messages .entry-user .bubble-body")).to_contain_text(
        "<script>window.pwned = 'script'</script>"
    )
    assert_nothing_ran(page, dialogs)

    page.reload()
    expect(replies(page)).to_have_count(1)
    expect(replies(page)).to_contain_text("<img src=x onerror=")
    assert_nothing_ran(page, dialogs)

    # Markup in a fact is held for review by the safety check: it must still be shown, inert.
    send(page, "remember that my favourite tag is <img src=x onerror=\"window.pwned='memory'\">")
    page.get_by_role("navigation", name="Main").get_by_role("link", name="Memory").click()
    memory = page.locator(".memory-item", has_text="favourite tag").first
    deadline = time.monotonic() + GENERATION_TIMEOUT_SECONDS
    while not memory.count() and time.monotonic() < deadline:
        page.wait_for_timeout(500)
        page.reload()
    expect(memory).to_contain_text("<img src=x onerror=")
    expect(memory).to_contain_text("Held for review")
    memory.get_by_text("Why is this remembered?").click()
    assert page.locator("main img").count() == 0
    assert page.evaluate(FLAG) is None
    assert dialogs == []
