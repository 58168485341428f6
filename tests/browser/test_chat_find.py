"""Finding things in the chat, in a real browser: search from the sidebar finds a message in
an old chat and opens it there, another user's chats never show; replies and code blocks
copy with one click, and code blocks are highlighted."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import Page, expect

pytestmark = pytest.mark.browser


def send(page: Page, text: str) -> None:
    """Send a message and wait for the whole reply."""
    replies = page.locator("#messages .entry-agent .bubble-body")
    before = replies.count()
    composer = page.get_by_role("textbox", name="Message")
    composer.fill(text)
    composer.press("Enter")
    expect(replies).to_have_count(before + 1)
    expect(page.get_by_role("button", name="Stop")).to_be_hidden()


def test_search_finds_a_message_in_an_old_chat_and_opens_it_there(new_page):
    someone_else = new_page()
    send(someone_else, "The Douro is where my secret vineyard is")

    page = new_page()
    send(page, "Good morning")
    send(page, "My favourite river is the Douro, near Porto")
    for number in range(6):
        send(page, f"Filler message number {number}")
    old_chat = page.url
    page.get_by_role("link", name="New chat").click()
    send(page, "A newer chat about tea")
    expect(page).not_to_have_url(old_chat)

    search = page.get_by_role("searchbox", name="Search your chats")
    search.fill("dour")
    results = page.get_by_role("list", name="Search results").get_by_role("link")
    expect(results).to_have_count(1)  # one row for the chat, however many messages match
    expect(results.first).to_contain_text("Douro")
    expect(page.get_by_role("list", name="Search results")).not_to_contain_text("vineyard")
    expect(page.locator("#search-status")).to_have_text("1 result")
    expect(page.get_by_role("list", name="Your chats")).to_be_hidden()

    search.press("ArrowDown")
    expect(results.first).to_be_focused()
    page.keyboard.press("Enter")

    expect(page).to_have_url(re.compile(re.escape(old_chat) + "#event-"))
    anchored = page.locator("#messages .entry-anchored")
    expect(anchored).to_have_count(1)
    expect(anchored).to_contain_text("Douro")
    expect(anchored).to_be_in_viewport()

    search.fill("vineyard")
    expect(page.locator("#search-status")).to_have_text("No chat or message matches.")
    search.press("Escape")
    expect(search).to_have_value("")
    expect(page.get_by_role("list", name="Your chats")).to_be_visible()


@pytest.mark.parametrize(
    "viewport",
    [{"width": 1280, "height": 800}, {"width": 390, "height": 844}, {"width": 320, "height": 640}],
    ids=["1280px", "390px", "320px"],
)
def test_search_gives_one_row_per_chat_with_the_words_highlighted_in_any_form(new_page, viewport):
    page = new_page(viewport)
    send(page, "Plan a trip to the Douro valley")
    send(page, "Which wineries along the Douro open on Sundays?")
    page.goto(page.url.split("/chat/")[0] + "/")
    send(page, "Something else entirely")
    toggle = page.get_by_role("button", name="Chats")
    if toggle.is_visible() and toggle.get_attribute("aria-expanded") == "false":
        toggle.click()
    search = page.get_by_role("searchbox", name="Search your chats")
    results = page.get_by_role("list", name="Search results").get_by_role("link")

    search.fill("douro")

    expect(results).to_have_count(1)
    expect(page.locator("#search-status")).to_have_text("1 result")
    expect(results.first.locator("mark").first).to_have_text(re.compile("^douro$", re.I))

    search.fill("winery")

    expect(results).to_have_count(1)
    expect(results.first.locator(".search-snippet mark")).to_have_text(["wineries"])
    assert page.evaluate(
        "document.scrollingElement.scrollWidth <= document.scrollingElement.clientWidth"
    )


CODE = 'def greet(name):\n    return f"Hello, {name}"\n'


def test_code_blocks_are_highlighted_and_replies_and_code_copy(new_page):
    page = new_page(permissions=["clipboard-read", "clipboard-write"])
    composer = page.get_by_role("textbox", name="Message")
    composer.fill(f"Look at this:\n```python\n{CODE}```\nThanks")
    composer.press("Enter")
    expect(page.get_by_role("button", name="Stop")).to_be_hidden()

    code = page.locator("#messages .entry-agent .code-block pre code")
    expect(code).to_have_count(1)
    expect(code.locator(".hljs-keyword").first).to_have_text("def")
    expect(code.locator(".hljs-string")).to_contain_text('f"Hello, {name}"')

    page.get_by_role("button", name="Copy code").click()
    expect(page.locator(".code-block").get_by_role("button", name="Copied")).to_be_visible()
    assert page.evaluate("navigator.clipboard.readText()") == CODE

    page.get_by_role("button", name="Copy this reply").focus()
    page.keyboard.press("Enter")
    expect(page.locator(".entry-actions").get_by_role("button", name="Copied")).to_be_visible()
    copied = page.evaluate("navigator.clipboard.readText()")
    assert copied.startswith("You said: \u201cLook at this:\n```python\n" + CODE), copied
