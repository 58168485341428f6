"""Access to one's data in a real browser: a user lets support read their memories until a date,
support opens one in the staff console, the user sees that in the access log and revokes the
grant, and support can no longer open it."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from django.utils import timezone
from playwright.sync_api import Browser, expect

from tests.browser.conftest import WIDE
from tests.browser.server import Server

pytestmark = pytest.mark.browser

SUPPORT = "support-sam"
SUPPORT_PASSWORD = "support-browser-password"

SETUP = """
import json
from django.contrib.auth import get_user_model
from memory_app.models import Memory

users = get_user_model().objects
support, _ = users.get_or_create(username={support!r}, defaults={{"is_staff": True}})
support.set_password({password!r})
support.save()
owner = users.get(username={owner!r})
memory = Memory.objects.create(
    app_name="chat", user=owner, topic="preferences", source_type="explicit",
    text="Prefers vegetarian meals on flights.",
)
print(json.dumps({{"memory": str(memory.pk)}}))
"""


def test_grant_support_see_the_access_logged_and_revoke(
    browser: Browser, server: Server, new_page, usernames
):
    page = new_page()
    owner = page.locator(".nav-user").inner_text()
    ids = json.loads(
        server.shell(SETUP.format(support=SUPPORT, password=SUPPORT_PASSWORD, owner=owner))
        .strip()
        .splitlines()[-1]
    )
    memory_url = f"{server.base_url}/admin/memory_app/memory/{ids['memory']}/change/"

    page.get_by_role("link", name="Access", exact=True).click()
    expect(page.get_by_role("heading", name="Access to your data")).to_be_visible()
    expect(page.locator("#no-active-grants")).to_be_visible()
    page.get_by_label("Staff username").fill("nobody-at-all")
    page.get_by_role("button", name="Grant read access").click()
    expect(page.locator(".errorlist")).to_contain_text("No account has this username")

    until = timezone.localdate() + timedelta(days=3)
    page.get_by_label("Staff username").fill(SUPPORT)
    page.get_by_label("What they may read").select_option("memories")
    page.get_by_label("Until (inclusive)").fill(until.isoformat())
    page.get_by_role("button", name="Grant read access").click()
    expect(page.locator(".message-success")).to_contain_text(f"{SUPPORT} may read")
    grants = page.locator("#active-grants")
    expect(grants).to_contain_text(SUPPORT)
    expect(grants).to_contain_text(f"{until:%-d %b %Y} (inclusive)")

    support = browser.new_context(viewport=WIDE).new_page()
    support.goto(f"{server.base_url}/admin/login/")
    support.get_by_label("Username").fill(SUPPORT)
    support.get_by_label("Password").fill(SUPPORT_PASSWORD)
    support.get_by_role("button", name="Log in").click()
    support.goto(memory_url)
    expect(support.locator("body")).to_contain_text("Prefers vegetarian meals on flights.")

    page.reload()
    log = page.locator("#audit-log")
    expect(log).to_contain_text(SUPPORT)
    expect(log).to_contain_text("Viewed the memory “Prefers vegetarian meals on flights.”")

    page.get_by_role("button", name="Revoke").click()
    expect(page.locator(".message-success")).to_contain_text(f"{SUPPORT} no longer has access.")
    expect(page.locator("#no-active-grants")).to_be_visible()

    support.goto(memory_url)
    expect(support.locator("body")).not_to_contain_text("Prefers vegetarian meals on flights.")
    support.context.close()
