"""Nothing goes on one click: deleting a memory and revoking a token ask first, in a dialog
where scripts run and on a page of their own where they do not, and Cancel keeps it; a new
token has a Copy button. At 1280 and 390 px, with axe-core finding no serious violation in
the dialogs and pages that ask."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from playwright.sync_api import Browser, Page, expect

from tests.browser.conftest import PHONE, WIDE
from tests.browser.server import SESSION_OF, Server
from tests.browser.test_accessibility import serious_violations

pytestmark = pytest.mark.browser

SCREENS = [pytest.param(WIDE, id="1280px"), pytest.param(PHONE, id="390px")]


@pytest.fixture
def scriptless_page(browser: Browser, server: Server, usernames) -> Iterator[Page]:
    """A signed-in page of a browser with JavaScript off, at phone width."""
    context = browser.new_context(viewport=PHONE, java_script_enabled=False)
    name, value = server.shell(SESSION_OF.format(username=next(usernames))).split()
    context.add_cookies([{"name": name, "value": value, "url": server.base_url}])
    yield context.new_page()
    context.close()


def add_memory(page: Page, server: Server, text: str) -> None:
    page.goto(f"{server.base_url}/memory/")
    page.get_by_text("Add a memory").click()
    page.get_by_label("What should the assistant remember?").fill(text)
    page.get_by_role("button", name="Add", exact=True).click()
    expect(page.get_by_text("Added. The assistant uses it from the next reply.")).to_be_visible()


def assert_accessible(page: Page, where: str) -> None:
    violations = serious_violations(page, scripted=False)
    assert violations == [], f"{where}: {json.dumps(violations, indent=1)}"


def make_token(page: Page, server: Server, name: str) -> str:
    page.goto(f"{server.base_url}/settings/")
    page.get_by_label("Name").fill(name)
    page.get_by_role("button", name="Make a token").click()
    expect(page.get_by_role("heading", level=1)).to_have_text("Your new token")
    return page.locator("#new-token").inner_text().strip()


@pytest.mark.parametrize("viewport", SCREENS)
def test_deleting_a_memory_asks_in_a_dialog_and_cancel_keeps_it(new_page, server: Server, viewport):
    page = new_page(viewport)
    add_memory(page, server, "I keep bees on the roof.")
    memory = page.locator(".memory-item", has_text="bees")
    delete = memory.get_by_role("link", name="Delete memory: ")

    delete.click()

    dialog = page.get_by_role("dialog", name="Delete this memory?")
    expect(dialog).to_be_visible()
    expect(dialog.locator("blockquote")).to_contain_text("bees on the roof")
    assert dialog.bounding_box()["width"] <= viewport["width"]
    assert_accessible(page, "the Memory page's delete dialog")
    dialog.get_by_role("button", name="Cancel").click()
    expect(dialog).to_be_hidden()
    expect(delete).to_be_focused()
    expect(memory).to_have_count(1)

    delete.click()
    dialog.get_by_role("button", name="Delete memory").click()

    expect(page.get_by_text("Memory deleted. It will not be used again.")).to_be_visible()
    expect(page.locator(".memory-item", has_text="bees")).to_have_count(0)


def test_a_search_stays_after_deleting_from_its_results(new_page, server: Server):
    page = new_page()
    add_memory(page, server, "I keep bees on the roof.")
    add_memory(page, server, "My sister lives in Braga.")
    page.get_by_role("searchbox", name="Search memories").fill("bees")
    page.get_by_role("button", name="Search").click()

    page.locator(".memory-item", has_text="bees").get_by_role(
        "link", name="Delete memory: "
    ).click()
    page.get_by_role("dialog").get_by_role("button", name="Delete memory").click()

    expect(page.get_by_text("Memory deleted.")).to_be_visible()
    expect(page.get_by_role("searchbox", name="Search memories")).to_have_value("bees")
    page.get_by_role("link", name="Show all").click()
    expect(page.locator(".memory-item", has_text="Braga")).to_have_count(1)


def test_without_javascript_deleting_a_memory_asks_on_a_page(scriptless_page: Page, server: Server):
    page = scriptless_page
    add_memory(page, server, "I keep bees on the roof.")
    delete = page.locator(".memory-item", has_text="bees").get_by_role(
        "link", name="Delete memory: "
    )

    delete.click()
    expect(page.get_by_role("heading", level=1)).to_have_text("Delete this memory?")
    expect(page.locator("blockquote")).to_contain_text("bees on the roof")
    page.get_by_role("link", name="Cancel").click()
    expect(page.locator(".memory-item", has_text="bees")).to_have_count(1)

    delete.click()
    page.get_by_role("button", name="Delete memory").click()

    expect(page.get_by_text("Memory deleted. It will not be used again.")).to_be_visible()
    expect(page.locator(".memory-item", has_text="bees")).to_have_count(0)


@pytest.mark.parametrize("viewport", SCREENS)
def test_a_new_token_is_copied_and_revoking_it_asks_first(new_page, server: Server, viewport):
    page = new_page(viewport, permissions=["clipboard-read", "clipboard-write"])

    token = make_token(page, server, "Claude Desktop")

    assert_accessible(page, "the new token's page")
    page.get_by_role("button", name="Copy").click()
    expect(page.get_by_role("status")).to_have_text("Copied.")
    assert page.evaluate("navigator.clipboard.readText()") == token
    page.get_by_role("link", name="Back to Settings").click()
    row = page.locator("#tokens tbody tr", has_text="Claude Desktop")
    revoke = row.get_by_role("link", name="Revoke the token Claude Desktop")

    revoke.click()
    dialog = page.get_by_role("dialog", name="Revoke this token?")
    expect(dialog).to_be_visible()
    expect(dialog.locator("blockquote")).to_contain_text("Claude Desktop")
    assert_accessible(page, "the Settings page's revoke dialog")
    page.keyboard.press("Escape")
    expect(dialog).to_be_hidden()
    expect(revoke).to_be_focused()
    expect(row).not_to_contain_text("revoked")

    revoke.click()
    dialog.get_by_role("button", name="Revoke token").click()

    expect(page.get_by_text("was revoked: it no longer connects.")).to_be_visible()
    expect(row).to_contain_text("revoked")


def test_without_javascript_revoking_asks_on_a_page_and_copy_is_not_offered(
    scriptless_page: Page, server: Server
):
    page = scriptless_page
    make_token(page, server, "Cursor")
    expect(page.get_by_role("button", name="Copy")).to_be_hidden()
    page.get_by_role("link", name="Back to Settings").click()
    row = page.locator("#tokens tbody tr", has_text="Cursor")

    row.get_by_role("link", name="Revoke the token Cursor").click()
    expect(page.get_by_role("heading", level=1)).to_have_text("Revoke this token?")
    page.get_by_role("link", name="Cancel").click()
    expect(row).not_to_contain_text("revoked")
    row.get_by_role("link", name="Revoke the token Cursor").click()
    page.get_by_role("button", name="Revoke token").click()

    expect(row).to_contain_text("revoked")


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_the_pages_that_ask_have_no_serious_violation(new_page, server: Server, scheme):
    page = new_page(PHONE, color_scheme=scheme)
    add_memory(page, server, "I keep bees on the roof.")
    make_token(page, server, "Zed")
    page.get_by_role("link", name="Back to Settings").click()
    revoke_url = page.get_by_role("link", name="Revoke the token Zed").get_attribute("href")
    page.goto(f"{server.base_url}/memory/")
    delete_url = page.get_by_role("link", name="Delete memory: ").get_attribute("href")

    for url in (delete_url, revoke_url):
        page.goto(f"{server.base_url}{url}")
        assert_accessible(page, url)
