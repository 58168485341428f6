"""How the conversation's entries read, at 1280 and 390 px: tool calls as compact steps with
their details on demand, notices, errors, and Markdown's tables and code blocks."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import Page, expect

from tests.browser.conftest import PHONE, WIDE

pytestmark = pytest.mark.browser

SCREENS = [pytest.param(WIDE, id="1280px"), pytest.param(PHONE, id="390px")]


def send(page: Page, text: str) -> None:
    composer = page.get_by_role("textbox", name="Message")
    composer.fill(text)
    composer.press("Enter")


def turn(page: Page, text: str) -> None:
    """Send ``text`` and wait for its reply to be complete."""
    count = page.locator("#messages .entry-user").count()
    send(page, text)
    expect(page.locator("#messages .entry-user")).to_have_count(count + 1)
    expect(page.get_by_role("button", name="Send")).to_be_visible()


def steps(page: Page):
    return page.locator("#messages .tool-step")


@pytest.mark.parametrize("viewport", SCREENS)
def test_tool_calls_are_compact_steps_with_their_details_on_demand(new_page, viewport):
    page = new_page(viewport)

    turn(page, "my name is Ada")
    turn(page, "remember that I like green tea")
    turn(page, "what do you know about tea?")

    expect(steps(page).locator("summary")).to_have_text(
        ["Saved your name", "Saved a memory", re.compile(r"^Looked up [12] memor(y|ies)$")]
    )
    conversation = page.locator("#messages")
    expect(conversation).not_to_contain_text("Tool call")
    for details in conversation.locator(".tool-json").all():
        expect(details).to_be_hidden()
    first = steps(page).first
    first.locator("summary").focus()
    page.keyboard.press("Enter")
    expect(first.get_by_text("set_state")).to_be_visible()
    expect(first.locator(".tool-json").first).to_contain_text('"value": "Ada"')
    expect(first.locator(".tool-json").last).to_contain_text('"status": "ok"')
    page.keyboard.press("Enter")
    expect(first.get_by_text("set_state")).to_be_hidden()

    page.reload()

    expect(steps(page).locator("summary")).to_have_text(
        ["Saved your name", "Saved a memory", re.compile(r"^Looked up [12] memor(y|ies)$")]
    )
    assert page.evaluate(
        "document.scrollingElement.scrollWidth <= document.scrollingElement.clientWidth"
    )


def notices(page: Page):
    return page.get_by_role("status", name="Notices").get_by_role("listitem")


def settings_saved_elsewhere(page: Page, *, create: bool, use: bool) -> None:
    """Save the memory settings from another tab of the same browser."""
    other = page.context.new_page()
    other.goto(page.url.split("/chat/")[0].rstrip("/") + "/settings/")
    other.get_by_label("Create memories from my chats").set_checked(create)
    other.get_by_label("Use memories in replies").set_checked(use)
    other.get_by_role("button", name="Save memory settings").click()
    expect(other.get_by_text("Memory settings saved")).to_be_visible()
    other.close()


@pytest.mark.parametrize("viewport", SCREENS)
def test_notices_arriving_together_stack_and_each_can_be_dismissed(new_page, viewport):
    page = new_page(viewport)
    turn(page, "hello")
    page.clock.install()  # the notices' timers run on a clock the test moves on

    settings_saved_elsewhere(page, create=False, use=True)
    settings_saved_elsewhere(page, create=True, use=True)

    expect(notices(page)).to_have_count(2)
    expect(notices(page).first).to_contain_text("no new memories will be made")
    expect(notices(page).last).to_contain_text("new memories will be made from your chats, and")
    notices(page).first.get_by_role("button", name="Dismiss notice").click()
    expect(notices(page)).to_have_count(1)
    expect(notices(page).first).to_contain_text("and replies will use")
    # It stays while the pointer rests on the stack, and goes a while after it leaves.
    page.clock.run_for(9_000)
    expect(notices(page)).to_have_count(1)
    page.mouse.move(5, 5)
    page.clock.run_for(3_000)
    expect(notices(page)).to_have_count(0)


@pytest.mark.parametrize("viewport", SCREENS)
def test_deleting_all_data_elsewhere_says_so_once_in_an_open_chat(new_page, server, viewport):
    """Issue 17: the open chat said it twice, as a notice and as an alert."""
    page = new_page(viewport)
    turn(page, "hello there")
    other = page.context.new_page()
    other.goto(f"{server.base_url}/settings/delete/")
    other.get_by_label("Password").fill(server.password)
    other.get_by_role("button", name="Delete all my data").click()
    expect(other.get_by_text("All your chats, memories and state were deleted.")).to_be_visible()

    expect(page.get_by_role("alert")).to_contain_text("All your chats and memories were deleted.")
    expect(page.get_by_text("All your chats and memories were deleted.")).to_have_count(1)
    expect(page.locator("#messages .entry")).to_have_count(0)
    if viewport is PHONE:
        page.get_by_role("button", name="Chats").click()
    expect(page.get_by_text("No chats yet.")).to_be_visible()


@pytest.mark.parametrize("viewport", SCREENS)
def test_an_error_says_its_sentence_without_the_internal_code(new_page, viewport):
    page = new_page(viewport)
    too_long = "x" * 8001

    page.get_by_role("textbox", name="Message").fill(too_long)
    page.get_by_role("textbox", name="Message").press("Enter")

    alert = page.get_by_role("alert")
    expect(alert).to_be_visible()
    expect(alert).not_to_contain_text("message_too_large")
    expect(alert).not_to_have_text(re.compile(r"\([a-z_]+\)\s*Dismiss$"))
    expect(alert).to_contain_text("8000")
    expect(page.get_by_role("textbox", name="Message")).to_have_value(too_long)


MARKDOWN = "Here:\n\n| name | value |\n|---|---|\n| tea | green |\n\n```python\nprint('hi')\n```"


@pytest.mark.parametrize("viewport", SCREENS)
def test_markdown_tables_have_borders_and_code_blocks_name_their_language(new_page, viewport):
    page = new_page(viewport)

    turn(page, MARKDOWN)

    reply = page.locator("#messages .entry-agent .bubble-body.rich").last
    cell = reply.locator("td").first
    expect(cell).to_have_text("tea")
    assert cell.evaluate("c => getComputedStyle(c).borderTopStyle") == "solid"
    assert cell.evaluate("c => getComputedStyle(c).borderTopWidth") == "1px"
    code = reply.locator("pre").first
    expect(code).to_have_attribute("data-language", "python")
    label = code.evaluate("p => getComputedStyle(p, '::before').content")
    assert label == '"python"'
    assert page.evaluate(
        "document.scrollingElement.scrollWidth <= document.scrollingElement.clientWidth"
    )
