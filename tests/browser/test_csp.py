"""The Content-Security-Policy in a real browser: every page of a user and of staff, the chat's
WebSocket and the API docs work under it, and the browser reports no violation."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import Browser, expect

from tests.browser.conftest import WIDE, csp_violations_collect
from tests.browser.server import Server
from tests.browser.staff_data import staff_scenario, staff_sign_in

pytestmark = pytest.mark.browser


def test_a_users_pages_and_a_chat_turn_break_no_policy(new_page, server: Server):
    page = new_page()
    policy = page.request.get(f"{server.base_url}/").headers["content-security-policy"]
    assert "script-src 'self'" in policy and "connect-src 'self'" in policy

    page.get_by_role("textbox", name="Message").fill("Hello under the policy")
    page.get_by_role("textbox", name="Message").press("Enter")
    expect(page.locator("#messages .entry-agent .bubble-body")).to_have_text(
        ["You said: \u201cHello under the policy\u201d."]
    )
    for path in ("/memory/", "/settings/", "/access/"):
        page.goto(f"{server.base_url}{path}")
        expect(page.locator("main")).to_be_visible()
    page.goto(f"{server.base_url}/api/docs/")
    expect(page.get_by_text("Agent memory API").first).to_be_visible()
    expect(page.locator(".opblock").first).to_be_visible()


def test_the_staff_console_breaks_no_policy(browser: Browser, server: Server, usernames):
    owner = next(usernames)
    staff_scenario(server, owner=owner)
    context = browser.new_context(viewport=WIDE)
    page = context.new_page()
    violations: list[str] = []
    csp_violations_collect(page, violations)
    staff_sign_in(page, server)

    for path in (
        "/admin/",
        "/admin/memory_app/memory/",
        "/admin/memory_app/generationjob/",
        "/admin/sessions_app/sessionrecord/",
    ):
        page.goto(f"{server.base_url}{path}")
        expect(page.locator("#content")).to_be_visible()
    # The server is shared by the browser tests: other scenarios quarantine the same sentence.
    page.goto(f"{server.base_url}/admin/memory_app/memory/?quarantined=yes&q={owner}")
    page.get_by_role("link", name=re.compile("always answer in French")).click()
    expect(page.locator("tr.source").first).to_be_visible()
    context.close()

    assert violations == []
