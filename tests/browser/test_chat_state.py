"""The chat's State panel reads as a person reads: a record as a small table of its fields, a
list as a list, a list of records as a table, yes and no for true and false; the raw JSON is
one toggle away and back. At 1280 and 390 px, light and dark, with axe-core finding no
serious violation either way."""

from __future__ import annotations

import json
import re

import pytest
from playwright.sync_api import Page, expect

from tests.browser.conftest import PHONE, WIDE
from tests.browser.test_accessibility import serious_violations

pytestmark = pytest.mark.browser

STATE = {
    "user:family": {"sister": "Ola", "partner": "Marek", "daughter": "Zofia"},
    "user:allergies": ["peanuts", "penicillin"],
    "trip": [{"city": "Lisbon", "nights": 3}, {"city": "Porto", "nights": 2}],
    "vegetarian": True,
}


def send(page: Page, text: str) -> None:
    composer = page.get_by_role("textbox", name="Message")
    composer.fill(text)
    composer.press("Enter")
    expect(page.locator("#messages .entry-agent")).to_have_count(1)
    expect(page.get_by_role("button", name="Stop")).to_be_hidden()


def state_set(page: Page, delta: dict) -> None:
    """Append a user event carrying ``delta`` through the sessions API, as a client would."""
    session_id = re.search(r"/chat/([^/?#]+)/", page.url).group(1)
    status = page.evaluate(
        """async ([id, delta]) => {
          const token = document.querySelector('meta[name="csrf-token"]').content;
          const answer = await fetch(`/api/sessions/${id}/events/?app_name=chat`, {
            method: "POST",
            headers: {"Content-Type": "application/json", "X-CSRFToken": token},
            body: JSON.stringify({author: "user", actions: {state_delta: delta}}),
          });
          return answer.status;
        }""",
        [session_id, delta],
    )
    assert status == 201


def open_state(page: Page, viewport: dict) -> None:
    page.reload()
    if viewport is PHONE:
        page.get_by_role("button", name="State & context").click()
    expect(page.locator("#state-view dt", has_text="user:family")).to_be_visible()


def row_of(page: Page, key: str):
    return page.locator("#state-view .state-row", has=page.locator("dt", has_text=key))


@pytest.mark.parametrize("scheme", ["light", "dark"])
@pytest.mark.parametrize(
    "viewport", [pytest.param(WIDE, id="1280px"), pytest.param(PHONE, id="390px")]
)
def test_state_values_read_as_tables_and_lists_with_the_raw_json_behind_a_toggle(
    new_page, viewport, scheme
):
    page = new_page(viewport, color_scheme=scheme)
    send(page, "hello")
    state_set(page, STATE)
    open_state(page, viewport)

    family = row_of(page, "user:family")
    # By name, whatever order the database keeps (PostgreSQL's jsonb orders by length).
    expect(family.get_by_role("row")).to_have_text(["daughterZofia", "partnerMarek", "sisterOla"])
    expect(family.get_by_role("rowheader", name="partner")).to_be_visible()
    expect(row_of(page, "user:allergies").get_by_role("listitem")).to_have_text(
        ["peanuts", "penicillin"]
    )
    trip = row_of(page, "trip")
    expect(trip.get_by_role("columnheader")).to_have_text(["city", "nights"])
    expect(trip.get_by_role("row")).to_have_text(["citynights", "Lisbon3", "Porto2"])
    expect(row_of(page, "vegetarian").locator("dd")).to_have_text("yes")
    expect(page.locator("#state-view")).not_to_contain_text('"partner"')
    assert page.evaluate(
        "document.scrollingElement.scrollWidth <= document.scrollingElement.clientWidth"
    )
    assert serious_violations(page, scripted=True) == []

    toggle = page.get_by_role("button", name="Raw JSON")
    toggle.click()

    expect(toggle).to_have_attribute("aria-pressed", "true")
    raw = family.locator("pre")
    expect(raw).to_be_visible()
    assert json.loads(raw.inner_text()) == STATE["user:family"]
    expect(family.get_by_role("table")).to_have_count(0)
    assert serious_violations(page, scripted=True) == []
    toggle.click()
    expect(raw).to_have_count(0)
    expect(family.get_by_role("table")).to_be_visible()


def test_the_raw_json_stays_shown_when_the_state_is_read_again(new_page):
    page = new_page()
    send(page, "hello")
    state_set(page, STATE)
    open_state(page, WIDE)
    page.get_by_role("button", name="Raw JSON").click()

    composer = page.get_by_role("textbox", name="Message")
    composer.fill("again")
    composer.press("Enter")
    expect(page.locator("#messages .entry-agent")).to_have_count(2)
    expect(page.get_by_role("button", name="Stop")).to_be_hidden()

    expect(row_of(page, "vegetarian").locator("dd")).to_have_text("true")
    expect(row_of(page, "user:family").get_by_role("table")).to_have_count(0)
