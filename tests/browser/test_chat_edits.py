"""Editing a sent message and regenerating a reply in a real browser, by keyboard: the history
and the memories are right afterwards, and after a reload."""

from __future__ import annotations

import time

import pytest
from playwright.sync_api import Page, expect

from tests.browser.conftest import GENERATION_TIMEOUT_SECONDS, PHONE, WIDE
from tests.sample_files import image_bytes

pytestmark = pytest.mark.browser

PNG = image_bytes("PNG", (120, 80))


def user_messages(page: Page):
    return page.locator("#messages .entry-user .bubble-body")


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


def memory_texts(page: Page, *, without: str) -> list[str]:
    """The Memory page's memories, once ``without`` is no longer among them (the rewound
    turn's memory is revised in the background, after the rewind committed)."""
    page.get_by_role("navigation", name="Main").get_by_role("link", name="Memory").click()
    items = page.locator(".memory-item .memory-text")
    deadline = time.monotonic() + GENERATION_TIMEOUT_SECONDS
    while True:
        expect(page.get_by_role("heading", level=1)).to_have_text("Memory")
        gone = not page.locator(".memory-item", has_text=without).count()
        if gone or time.monotonic() > deadline:
            break
        page.wait_for_timeout(250)
        page.reload()
    return [text.strip() for text in items.all_text_contents()]


def test_edit_a_message_and_regenerate_a_reply(chat_page: Page):
    page = chat_page
    send(page, "remember that my favourite colour is teal")
    expect(page.locator("#chat-notices")).to_contain_text("Remembered: ")
    send(page, "Hello there")

    # Edit the first message with the keyboard only: the Edit button, the text, Enter.
    edit = page.get_by_role("button", name="Edit this message").first
    edit.focus()
    page.keyboard.press("Enter")
    editor = page.get_by_role("textbox", name="Edit your message")
    expect(editor).to_be_focused()
    expect(editor).to_have_value("remember that my favourite colour is teal")
    page.keyboard.press("Escape")
    expect(editor).to_have_count(0)
    expect(edit).to_be_focused()
    page.keyboard.press("Enter")
    editor.fill("remember that my favourite colour is green")
    editor.press("Enter")

    expect(user_messages(page)).to_have_text(["remember that my favourite colour is green"])
    expect(replies(page)).to_have_count(1)
    expect(replies(page)).to_contain_text(["green"])
    expect(page.get_by_role("button", name="Stop")).to_be_hidden()
    expect(page.locator("#messages")).not_to_contain_text("rewound")

    send(page, "How are you?")
    first_reply = replies(page).last.text_content()
    regenerate = page.get_by_role("button", name="Regenerate this reply")
    expect(regenerate).to_have_count(1)
    regenerate.focus()
    page.keyboard.press("Enter")
    expect(page.get_by_role("button", name="Stop")).to_be_hidden()
    expect(user_messages(page)).to_have_text(
        ["remember that my favourite colour is green", "How are you?"]
    )
    expect(replies(page)).to_have_count(2)
    expect(replies(page).last).to_have_text(first_reply)
    expect(page.get_by_role("button", name="Regenerate this reply")).to_have_count(1)

    page.reload()
    expect(user_messages(page)).to_have_text(
        ["remember that my favourite colour is green", "How are you?"]
    )
    expect(replies(page)).to_have_count(2)
    expect(page.locator("#messages .entry-system")).to_have_count(0)

    memories = memory_texts(page, without="teal")
    assert not [text for text in memories if "teal" in text], memories
    assert [text for text in memories if "green" in text], memories
    green = page.locator(".memory-item", has_text="green").first
    green.get_by_text("Why is this remembered?").click()
    expect(green.locator("blockquote").first).to_contain_text(
        "remember that my favourite colour is green"
    )


def test_edit_and_regenerate_send_the_messages_files_again(chat_page: Page):
    page = chat_page
    page.locator("#attach-input").set_input_files(
        [{"name": "logo.png", "mimeType": "image/png", "buffer": PNG}]
    )
    composer = page.get_by_role("textbox", name="Message")
    composer.fill("What is this?")
    composer.press("Enter")
    acknowledged = f"I received logo.png (a PNG image, {len(PNG)} bytes)."
    expect(replies(page).last).to_contain_text(acknowledged)
    expect(page.get_by_role("button", name="Stop")).to_be_hidden()

    page.get_by_role("button", name="Edit this message").click()
    editor = page.get_by_role("textbox", name="Edit your message")
    expect(editor).to_have_accessible_description(
        "Sent again with the edited message: The reply after it will be replaced."
    )
    kept = page.get_by_role("list", name="Files sent again with the edited message")
    expect(kept.get_by_role("img", name="logo.png")).to_be_visible()
    editor.fill("Is it a logo?")
    editor.press("Enter")

    expect(replies(page)).to_have_count(1)
    expect(replies(page)).to_contain_text([f"{acknowledged} You said: “Is it a logo?”"])
    sent = page.locator("#messages .entry-user")
    expect(sent).to_have_count(1)
    expect(sent.get_by_role("img", name="logo.png")).to_be_visible()
    expect(page.get_by_role("button", name="Stop")).to_be_hidden()

    page.get_by_role("button", name="Regenerate this reply").click()
    expect(page.get_by_role("button", name="Stop")).to_be_hidden()
    expect(replies(page)).to_have_count(1)
    expect(replies(page)).to_contain_text([f"{acknowledged} You said: “Is it a logo?”"])

    page.reload()
    sent = page.locator("#messages .entry-user")
    expect(sent).to_have_count(1)
    expect(user_messages(page)).to_have_text(["Is it a logo?"])
    expect(sent.get_by_role("img", name="logo.png")).to_be_visible()
    expect(replies(page)).to_have_count(1)


@pytest.mark.parametrize(
    "viewport", [pytest.param(WIDE, id="1280px"), pytest.param(PHONE, id="390px")]
)
def test_an_edit_says_what_it_replaces_and_the_title_follows_the_first_message(new_page, viewport):
    page = new_page(viewport)
    send(page, "What is 17 times 23?")
    expect(page.locator("#chat-title")).to_have_text("What is 17 times 23?")
    send(page, "And plus 2?")

    page.get_by_role("button", name="Edit this message").last.click()
    editor = page.get_by_role("textbox", name="Edit your message")
    expect(page.locator(".edit-loss-note")).to_have_text("The reply after it will be replaced.")
    editor.press("Escape")

    page.get_by_role("button", name="Edit this message").first.click()
    note = page.locator(".edit-loss-note")
    expect(note).to_have_text(
        "The 2 replies after it will be replaced, and your later message removed."
    )
    expect(editor).to_have_accessible_description(
        "The 2 replies after it will be replaced, and your later message removed."
    )
    assert note.bounding_box()["width"] <= viewport["width"]
    editor.fill("What is 19 times 21?")
    editor.press("Enter")

    expect(user_messages(page)).to_have_text(["What is 19 times 21?"])
    expect(page.get_by_role("button", name="Stop")).to_be_hidden()
    expect(page.locator("#chat-title")).to_have_text("What is 19 times 21?")
    page.reload()
    expect(page.locator("#chat-title")).to_have_text("What is 19 times 21?")


def test_a_title_the_person_chose_stays_when_the_first_message_is_edited(chat_page: Page):
    page = chat_page
    send(page, "What is 17 times 23?")
    expect(page.locator("#chat-title")).to_have_text("What is 17 times 23?")
    page.locator(".session-item").first.hover()
    page.get_by_role("button", name="Rename \u201cWhat is 17 times 23?\u201d").click()
    chosen = page.get_by_role("textbox", name="Chat title")
    chosen.fill("Sums")
    chosen.press("Enter")
    expect(page.locator("#chat-title")).to_have_text("Sums")

    page.get_by_role("button", name="Edit this message").click()
    editor = page.get_by_role("textbox", name="Edit your message")
    editor.fill("What is 19 times 21?")
    editor.press("Enter")

    expect(user_messages(page)).to_have_text(["What is 19 times 21?"])
    expect(page.get_by_role("button", name="Stop")).to_be_hidden()
    page.reload()
    expect(page.locator("#chat-title")).to_have_text("Sums")
