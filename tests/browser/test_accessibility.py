"""axe-core (from the npm registry, vendored by `make vendor`) on every page, at phone width
(390 px), in light and dark mode: signed out, signed in as a user (the chat in its states:
a conversation with code, a message being edited, search results, the drawers open) and as
staff. No serious or critical violation is allowed.

Left out: the API reference (/api/docs/), which is Swagger UI's own page and markup
(drf-spectacular's sidecar), not written by this project (axe finds serious violations in it).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from playwright.sync_api import Browser, Page, expect

from tests.browser.conftest import PHONE
from tests.browser.server import Server
from tests.browser.staff_data import staff_scenario, staff_sign_in

pytestmark = pytest.mark.browser

AXE = (Path(__file__).parent / "vendor" / "axe.min.js").read_text(encoding="utf-8")
# Page.evaluate runs outside the page's Content-Security-Policy, which would refuse an
# injected <script>; axe then runs in the page itself.
AXE_RUN = """async () => {
  const result = await axe.run(document, { resultTypes: ["violations"] });
  return result.violations
    .filter((violation) => ["serious", "critical"].includes(violation.impact))
    .map((violation) => ({
      rule: violation.id,
      impact: violation.impact,
      where: violation.nodes.slice(0, 5).map((node) => node.target.join(" ")),
      why: violation.nodes[0]?.failureSummary ?? "",
    }));
}"""


def serious_violations(page: Page, *, scripted: bool) -> list[dict]:
    """The page's serious and critical violations. A ``scripted`` page (the chat) fills itself
    after it loads, so axe waits until its requests have stopped; the others are whole when
    they load."""
    page.wait_for_load_state("networkidle" if scripted else "load")
    if not page.evaluate("typeof axe !== 'undefined'"):
        page.evaluate(AXE)
    return page.evaluate(AXE_RUN)


class Audit:
    """The serious and critical violations found, by page and state, for one assertion."""

    def __init__(self) -> None:
        self.found: dict[str, list[dict]] = {}

    def check(self, page: Page, name: str, *, scripted: bool = False) -> None:
        violations = serious_violations(page, scripted=scripted)
        if violations:
            self.found[name] = violations


def send(page: Page, text: str) -> None:
    """Send a message and wait for the whole reply."""
    replies = page.locator("#messages .entry-agent .bubble-body")
    before = replies.count()
    composer = page.get_by_role("textbox", name="Message")
    composer.fill(text)
    composer.press("Enter")
    expect(replies).to_have_count(before + 1)
    expect(page.get_by_role("button", name="Stop")).to_be_hidden()


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_every_page_has_no_serious_violation(
    new_page, browser: Browser, server: Server, usernames, scheme: str
):
    audit = Audit()

    signed_out = browser.new_context(viewport=PHONE, color_scheme=scheme)
    anonymous = signed_out.new_page()
    for path in ("/accounts/login/", "/accounts/signup/", "/accounts/password_reset/"):
        anonymous.goto(f"{server.base_url}{path}")
        audit.check(anonymous, path)
    signed_out.close()

    page = new_page(PHONE, color_scheme=scheme)
    audit.check(page, "chat, empty", scripted=True)
    send(page, "remember that my favourite colour is teal")
    send(page, "Look:\n```python\ndef greet(name):\n    return f'Hello, {name}'\n```\nThanks")
    expect(page.locator("#messages .code-block")).to_have_count(1)
    audit.check(page, "chat, a conversation", scripted=True)
    page.get_by_role("button", name="Edit this message").first.click()
    audit.check(page, "chat, editing a message", scripted=True)
    page.keyboard.press("Escape")
    page.get_by_role("button", name="Chats").click()
    page.get_by_role("searchbox", name="Search your chats").fill("teal")
    expect(page.locator("#search-status")).to_contain_text("result")
    audit.check(page, "chat, search results in the open drawer", scripted=True)
    page.keyboard.press("Escape")  # clears the search
    page.keyboard.press("Escape")  # closes the drawer
    page.get_by_role("button", name="State & context").click()
    audit.check(page, "chat, state and context drawer", scripted=True)
    chat_url = page.url
    for path in (
        "/memory/",
        "/memory/?q=teal",
        "/memory/delete-all/",
        "/settings/",
        "/settings/delete/",
        "/access/",
        "/accounts/password_change/",
        "/chat/no-such-chat/",
    ):
        page.goto(f"{server.base_url}{path}")
        audit.check(page, path, scripted=path.startswith("/chat/"))
    page.goto(chat_url)
    audit.check(page, "chat, reloaded", scripted=True)

    ids = staff_scenario(server, owner=next(usernames))
    staff_context = browser.new_context(viewport=PHONE, color_scheme=scheme)
    staff = staff_context.new_page()
    staff_sign_in(staff, server)
    for path in (
        "/admin/",
        "/admin/memory_app/memory/",
        f"/admin/memory_app/memory/{ids['quarantined']}/change/",
        f"/admin/memory_app/memory/{ids['trip']}/change/",
        "/admin/memory_app/generationjob/",
        "/admin/sessions_app/sessionrecord/",
        f"/admin/sessions_app/sessionrecord/{ids['session']}/change/",
    ):
        staff.goto(f"{server.base_url}{path}")
        audit.check(staff, path)
    staff_context.close()

    assert audit.found == {}, json.dumps(audit.found, indent=1)
