"""Memories said to the person they are about (issue 46, item 5), at 1280 and 390 px, light and
dark: after "remember that I live in Lisbon" and a correction to Porto on the Memory page, the
chat's notices, the Memory page, its history and the profile say "you" ("You live in Porto."),
nowhere "the user"; axe-core finds no serious violation on either page."""

from __future__ import annotations

import json
import re

import pytest
from playwright.sync_api import Page, expect

from tests.browser.conftest import PHONE, WIDE
from tests.browser.test_accessibility import serious_violations
from tests.browser.test_memory import send

pytestmark = pytest.mark.browser

SCREENS = [pytest.param(WIDE, id="1280px"), pytest.param(PHONE, id="390px")]
THE_USER = re.compile(r"\bthe user\b", re.IGNORECASE)


def assert_accessible(page: Page, where: str, *, scripted: bool) -> None:
    violations = serious_violations(page, scripted=scripted)
    assert violations == [], f"{where}: {json.dumps(violations, indent=1)}"


@pytest.mark.parametrize("scheme", ["light", "dark"])
@pytest.mark.parametrize("viewport", SCREENS)
def test_the_memory_page_the_profile_and_the_notices_speak_to_you(
    new_page, server, viewport, scheme
):
    chat = new_page(viewport, color_scheme=scheme)
    notices = chat.locator("#chat-notices")
    send(chat, "remember that I live in Lisbon")
    expect(notices).to_contain_text("Remembered: you live in Lisbon.")

    page = chat.context.new_page()
    page.goto(f"{server.base_url}/memory/")
    memory = page.locator(".memory-item", has_text="Lisbon")
    expect(memory.locator(".memory-text")).to_have_text("You live in Lisbon.")
    memory.get_by_text("Correct", exact=True).click()
    memory.get_by_label("What is true instead?").fill("I live in Porto.")
    memory.get_by_role("button", name="Save correction").click()

    expect(page.get_by_text("Memory corrected.")).to_be_visible()
    memory = page.locator(".memory-item", has_text="Porto")
    expect(memory.locator(".memory-text")).to_have_text("You live in Porto.")
    expect(memory.locator(".memory-change")).to_contain_text("it was “you live in Lisbon”")
    expect(memory.locator(".memory-change")).to_contain_text("Why: Corrected by you.")
    profile = page.locator(".memory-profile")
    expect(profile).to_contain_text("Porto")
    expect(profile).to_contain_text("from your memory “you live in Porto”")
    memory.get_by_text("Why is this remembered?").click()
    expect(memory.locator(".memory-history")).to_contain_text(
        "Was “you live in Lisbon”, now “you live in Porto”."
    )
    expect(page.locator("main")).not_to_contain_text(THE_USER, use_inner_text=True)
    assert_accessible(page, "the Memory page", scripted=False)

    expect(notices).to_contain_text("Memory corrected: you live in Porto.")
    expect(notices).not_to_contain_text(THE_USER)
    assert_accessible(chat, "the chat with its notices", scripted=True)
