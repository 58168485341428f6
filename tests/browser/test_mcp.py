"""A person's own assistant reaches what they said in the browser chat over MCP: a memory
said in the chat is found with a token made on the Settings page, never with another
person's token, and the token is refused once it is revoked there. The MCP side is the
official client (tests/agents_app/test_mcp_server.py) against the same daphne."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pytest
from playwright.sync_api import Page, expect

from tests.agents_app.test_mcp_server import _initialize, call, texts, token_create
from tests.browser.test_memory import send

pytestmark = pytest.mark.browser


def mcp(server, token: str, tool: str, **arguments) -> dict:
    """One MCP tool call in a thread of its own: Playwright's sync API holds this thread's
    event loop."""
    with ThreadPoolExecutor(max_workers=1) as thread:
        return thread.submit(call, server, token, tool, **arguments).result()


def open_settings(page: Page) -> None:
    page.get_by_role("navigation", name="Main").get_by_role("link", name="Settings").click()
    expect(page.get_by_role("heading", level=1)).to_have_text("Settings")


def test_a_memory_said_in_the_chat_is_found_over_mcp_with_the_persons_token_only(
    chat_page: Page, server, usernames
):
    page = chat_page
    send(page, "remember that I keep bees on the roof")
    expect(page.locator("#chat-notices")).to_contain_text("Remembered: ")
    open_settings(page)
    page.get_by_label("Name").fill("Claude Desktop")
    page.get_by_role("button", name="Make a token").click()
    token = page.locator("#new-token").inner_text().strip()
    _, theirs = token_create(server, "--user", next(usernames))

    found = mcp(server, token, "search_memories", query="bees")

    assert texts(found) == ["The user keeps bees on the roof."]
    assert mcp(server, theirs, "search_memories", query="bees") == {"memories": []}
    assert "bees" not in str(mcp(server, theirs, "list_memories"))
    page.get_by_role("link", name="Back to Settings").click()
    row = page.locator("#tokens tbody tr", has_text="Claude Desktop")
    expect(row.locator("td").nth(4)).not_to_have_text("never")
    page.get_by_role("navigation", name="Main").get_by_role("link", name="Access").click()
    expect(page.get_by_text("search_memories through your personal access token")).to_be_visible()
    open_settings(page)
    row.get_by_role("link", name="Revoke the token Claude Desktop").click()
    page.get_by_role("dialog").get_by_role("button", name="Revoke token").click()
    expect(row).to_contain_text("revoked")
    assert _initialize(server, token).status_code == 401
