"""A user's memory controls in a real browser against a real daphne: a memory appears after
chatting, its "why" leads back to the turn, it can be deleted, memory can be turned off, a
temporary chat keeps nothing, and the data can be exported."""

from __future__ import annotations

import json
import re

import pytest
from playwright.sync_api import Page, expect

pytestmark = pytest.mark.browser


def replies(page: Page):
    return page.locator("#messages .entry-agent .bubble-body")


def send(page: Page, text: str) -> None:
    """Send a message and wait for the whole reply."""
    expect(page.get_by_role("textbox", name="Message")).to_be_focused()
    before = replies(page).count()
    composer = page.get_by_role("textbox", name="Message")
    composer.fill(text)
    composer.press("Enter")
    expect(replies(page)).to_have_count(before + 1)
    expect(page.get_by_role("button", name="Stop")).to_be_hidden()


def open_memory_page(page: Page) -> None:
    page.get_by_role("navigation", name="Main").get_by_role("link", name="Memory").click()
    expect(page.get_by_role("heading", level=1)).to_have_text("Memory")


def test_remember_see_why_delete_turn_off_and_export(chat_page: Page):
    page = chat_page
    send(page, "remember that my favourite colour is teal")
    expect(replies(page).last).to_contain_text("favourite colour is teal")
    expect(page.locator("#chat-notices")).to_contain_text("Remembered: ")

    open_memory_page(page)
    memory = page.locator(".memory-item", has_text="favourite colour is teal").first
    expect(memory).to_be_visible()
    memory.get_by_text("Why is this remembered?").click()
    expect(memory.locator("blockquote").first).to_contain_text(
        "remember that my favourite colour is teal"
    )
    memory.get_by_role("link", name="Open this turn in the chat").first.click()

    expect(page).to_have_url(re.compile(r"/chat/[^/?]+/(\?app_name=[^#]+)?#event-"))
    anchored = page.locator("#messages .entry-anchored")
    expect(anchored).to_have_count(1)
    expect(anchored).to_contain_text("remember that my favourite colour is teal")
    expect(anchored).to_be_in_viewport()

    open_memory_page(page)
    page.get_by_role("link", name=re.compile(r"^Delete memory: .*teal")).first.click()
    page.get_by_role("dialog").get_by_role("button", name="Delete memory").click()
    expect(page.get_by_text("Memory deleted. It will not be used again.")).to_be_visible()
    expect(page.locator(".memory-item", has_text="teal")).to_have_count(0)

    page.get_by_role("navigation", name="Main").get_by_role("link", name="Settings").click()
    page.get_by_label("Create memories from my chats").uncheck()
    page.get_by_role("button", name="Save memory settings").click()
    expect(page.get_by_text("Memory settings saved")).to_be_visible()
    expect(page.get_by_label("Create memories from my chats")).not_to_be_checked()

    page.get_by_role("navigation", name="Main").get_by_role("link", name="Chat").click()
    send(page, "remember that my dog is called Rex")
    expect(replies(page).last).not_to_contain_text("I'll remember")
    open_memory_page(page)
    expect(page.get_by_text("Nothing remembered yet")).to_be_visible()
    expect(page.get_by_role("note")).to_contain_text("New memories are not being created.")

    page.get_by_role("navigation", name="Main").get_by_role("link", name="Settings").click()
    with page.expect_download() as download_info:
        page.get_by_role("link", name="Export my data").click()
    download = download_info.value
    assert download.suggested_filename.startswith("my-data-")
    data = json.loads(download.path().read_text(encoding="utf-8"))
    said = [
        part.get("text")
        for session in data["sessions"]
        for event in session["events"]
        if event["author"] == "user"
        for part in event["content"]["parts"]
    ]
    assert said == [
        "remember that my favourite colour is teal",
        "remember that my dog is called Rex",
    ]
    assert data["memories"] == []
    assert data["memory_settings"] == {
        "create_enabled": False,
        "use_enabled": True,
        "past_chats_enabled": True,
    }


def test_a_temporary_chat_is_labelled_and_keeps_nothing(chat_page: Page):
    page = chat_page
    toggle = page.get_by_role("button", name="Temporary chat")
    toggle.click()
    expect(toggle).to_have_attribute("aria-pressed", "true")
    expect(page.get_by_text("This chat does not use your memories")).to_be_visible()

    send(page, "remember that I play the cello")

    expect(replies(page).last).not_to_contain_text("I'll remember")
    expect(page.locator("#session-list .session-badge")).to_have_text(["Temporary"])
    page.reload()
    expect(page.get_by_text("This chat does not use your memories")).to_be_visible()
    page.get_by_role("link", name="New chat").click()
    expect(page.get_by_text("This chat does not use your memories")).to_be_hidden()
    open_memory_page(page)
    expect(page.get_by_text("Nothing remembered yet")).to_be_visible()


def test_correcting_a_memory_and_deleting_all_with_confirmation(chat_page: Page):
    page = chat_page
    send(page, "remember that I live in Lisbon")
    send(page, "remember that I work as a nurse")
    open_memory_page(page)
    expect(page.locator(".memory-item")).to_have_count(2)

    lisbon = page.locator(".memory-item", has_text="Lisbon")
    lisbon.get_by_text("Correct", exact=True).click()
    lisbon.get_by_label("What is true instead?").fill("I live in Porto")
    lisbon.get_by_role("button", name="Save correction").click()
    expect(page.get_by_text("Memory corrected.")).to_be_visible()
    porto = page.locator(".memory-item", has_text="live in Porto")
    expect(porto.locator(".memory-text")).to_have_text("You live in Porto.")
    expect(porto).to_contain_text("Explicit user statement")
    porto.get_by_text("Why is this remembered?").click()
    expect(porto).to_contain_text("Was “")

    page.get_by_role("link", name="Delete all memories…").click()
    page.get_by_label("Yes, delete all my memories").check()
    page.get_by_role("button", name="Delete all memories").click()
    expect(page.get_by_text("Deleted 2 memories")).to_be_visible()
    expect(page.get_by_text("Nothing remembered yet")).to_be_visible()


def test_delete_all_my_data_asks_for_the_password_then_empties_the_account(chat_page: Page, server):
    page = chat_page
    send(page, "remember that my cat is called Tom")
    expect(page.locator("#session-list .session-item")).to_have_count(1)

    page.get_by_role("navigation", name="Main").get_by_role("link", name="Settings").click()
    page.get_by_role("link", name="Delete all my data…").click()
    page.get_by_label("Password").fill("not my password")
    page.get_by_role("button", name="Delete all my data").click()
    expect(page.get_by_text("That is not your password.")).to_be_visible()

    page.get_by_label("Password").fill(server.password)
    page.get_by_role("button", name="Delete all my data").click()
    expect(page.get_by_text("All your chats, memories and state were deleted.")).to_be_visible()

    page.get_by_role("navigation", name="Main").get_by_role("link", name="Chat").click()
    expect(page.get_by_text("No chats yet.")).to_be_visible()
    open_memory_page(page)
    expect(page.get_by_text("Nothing remembered yet")).to_be_visible()
