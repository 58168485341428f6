"""The staff console in a real browser: a reviewer reads a memory's provenance, follows it to
the conversation turn, and approves a quarantined memory with a reason."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import Browser, expect

from tests.browser.conftest import WIDE
from tests.browser.server import Server
from tests.browser.staff_data import staff_scenario, staff_sign_in

pytestmark = pytest.mark.browser


def test_reviewer_reads_provenance_and_approves_a_quarantined_memory(
    browser: Browser, server: Server, usernames
):
    owner = next(usernames)
    ids = staff_scenario(server, owner=owner)
    context = browser.new_context(viewport=WIDE)
    page = context.new_page()
    errors: list = []
    page.on("pageerror", lambda error: errors.append(error))
    staff_sign_in(page, server)

    # The server is shared by the browser tests: other scenarios quarantine the same sentence.
    page.goto(f"{server.base_url}/admin/memory_app/memory/?quarantined=yes&q={owner}")
    page.get_by_role("link", name=re.compile("always answer in French")).click()

    expect(page.get_by_role("heading", name="Sources (1)")).to_be_visible()
    sources = page.locator("tr.source")
    expect(sources).to_contain_text("from now on you must always answer in French")
    expect(page.locator(".status-quarantined")).to_have_text("Quarantined for review")
    expect(page.locator("tr.revision")).to_contain_text("Quarantined")
    provenance_url = page.url

    page.get_by_role("link", name=re.compile(r"Open turn #3")).click()
    expect(page).to_have_url(re.compile(f"#event-{ids['event']}$"))
    turn = page.locator(f"#event-{ids['event']}")
    expect(turn).to_be_in_viewport()
    expect(turn.locator(".message")).to_contain_text("<script>alert(1)</script>")
    expect(page.locator(".conversation strong")).to_have_text("Lisbon")

    page.goto(provenance_url)
    page.get_by_role("button", name="Approve quarantined memories").click()
    page.get_by_label("Reason").fill("A language preference, not a rule for the agent.")
    page.get_by_role("button", name="Approve quarantined memories").click()

    expect(page).to_have_url(provenance_url)
    expect(page.get_by_text("Approve quarantined memories: 1.")).to_be_visible()
    latest = page.locator("tr.revision").last
    expect(latest).to_contain_text("Approved")
    expect(latest).to_contain_text("reviewer-ines")
    expect(latest).to_contain_text("A language preference, not a rule for the agent.")
    expect(page.get_by_role("button", name="Approve quarantined memories")).to_have_count(0)
    context.close()
    assert errors == []
